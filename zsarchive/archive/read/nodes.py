"""Queries of the node tree of one snapshot: every node, one node, one array."""

from __future__ import annotations

import json
from typing import Any

from zsarchive.archive.format import schema
from zsarchive.archive.format.views import NodeKey, NodeValue
from zsarchive.archive.read.history import HistoryQueries
from zsarchive.archive.read.reader import NotFound, checked_record
from zsarchive.suggest import hint


class NodeQueries(HistoryQueries):
    """The groups and arrays of a snapshot, with their zarr.json, shape and where their chunk refs are."""


    @staticmethod
    @checked_record(schema.NODE)
    def _node_dict(snapshot_id: str, components: tuple, value: tuple) -> dict:
        node = NodeValue.decode(value)
        out: dict[str, Any] = {"path": schema.path_of(components), "node_type": "array" if node.is_array else "group",
                               "id": node.node_id, "zarr_json": json.loads(node.user_data), "user_data": node.user_data}
        if node.is_array:
            shape, names = node.shape, node.dimension_names
            out["shape"] = [dim[0] for dim in shape]
            out["num_chunks"] = [dim[2] if dim[2] is not None else
                                 (-(-dim[0] // dim[1]) if dim[1] else 0) for dim in shape]
            out["dimension_names"] = None if names is None else list(names)
            out["dtype"], out["chunk_shape"] = _dtype_and_chunks(out["zarr_json"])
            out["manifests"] = [{"id": m, "extents": [list(e) for e in ext]} for m, ext in node.manifests]
            # where its chunk refs are found in a format 2 archive (the timeline from "since" on)
            out["snapshot_id"], out["since"] = snapshot_id, node.since
        return out

    def ls(self, ref: str, path: str | None = None) -> list[dict]:
        """Every node of the snapshot REF names (under ``path`` and itself, if given), in the archive's order:
        path components compared one by one (``/a``, ``/a/b``, ``/a-b``), whatever order the repository's
        snapshot file used."""
        sid = self.resolve(ref)
        if path is None or path.strip("/") == "":
            return [self._node_dict(sid, NodeKey.decode(k).components, v) for k, v in self._records(schema.NODE, (sid,))]
        top = self._node_at(sid, path, ref)["path"]
        nodes = ((NodeKey.decode(k), v) for k, v in self._records(schema.NODE, (sid,)))
        return [self._node_dict(sid, key.components, v) for key, v in nodes
                if key.path == top or key.path.startswith(top + "/")]

    def _node_at(self, snapshot_id: str, path: str, ref: str) -> dict:
        components = schema.path_components(path if path.startswith("/") else "/" + path)
        value = self._one(schema.NODE, (snapshot_id, components))
        if value is None:
            paths = [NodeKey.decode(k).path for k, _ in self._records(schema.NODE, (snapshot_id,))]
            raise NotFound(f"{self.name}: no node {schema.path_of(components)!r} at {ref!r}"
                           f"{hint(schema.path_of(components), paths, 'paths', paths=True)}")
        return self._node_dict(snapshot_id, components, value)

    def node(self, ref: str, path: str) -> dict:
        """The group or array at ``path`` in the snapshot REF names."""
        return self._node_at(self.resolve(ref), path, ref)

    def _array_at(self, ref: str, path: str) -> dict:
        node = self.node(ref, path)
        if node["node_type"] != "array":
            raise NotFound(f"{self.name}: {node['path']!r} at {ref!r} is a group, not an array")
        return node


def _dtype_and_chunks(zarr_json: Any) -> tuple[Any, list | None]:
    """An array's data type (its name, for an extension type) and regular chunk grid's chunk shape, as its
    zarr.json states them; None for what it does not state (the metadata is the writer's, never checked)."""
    if not isinstance(zarr_json, dict):
        return None, None
    dtype = zarr_json.get("data_type")
    if isinstance(dtype, dict):
        dtype = dtype.get("name")
    grid = zarr_json.get("chunk_grid")
    config = grid.get("configuration") if isinstance(grid, dict) else None
    shape = config.get("chunk_shape") if isinstance(config, dict) else None
    ok = isinstance(shape, list) and all(isinstance(n, int) for n in shape)
    return (dtype if isinstance(dtype, str) else None), (shape if ok else None)
