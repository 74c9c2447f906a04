"""Queries of the node tree of one snapshot: every node, one node, one array."""

from __future__ import annotations

import json
from typing import Any, Iterator

from zsarchive.archive.format import schema
from zsarchive.archive.format.views import NodeKey, NodeValue
from zsarchive.archive.read.history import HistoryQueries
from zsarchive.archive.read.model import ManifestSpan, NodeInfo
from zsarchive.archive.read.invariants import SnapshotNodes
from zsarchive.archive.read.reader import NotFound, checked_record, records_under
from zsarchive.suggest import hint


class NodeQueries(HistoryQueries):
    """The groups and arrays of a snapshot, with their zarr.json, shape and where their chunk refs are."""

    @staticmethod
    @checked_record(schema.NODE)
    def _node_info(snapshot_id: str, components: tuple, value: tuple) -> NodeInfo:
        node = NodeValue.decode(value)
        path, zarr_json = schema.path_of(components), json.loads(node.user_data)
        if not node.is_array:
            return NodeInfo(path, "group", node.node_id, zarr_json, node.user_data, snapshot_id)
        dimensions = node.dimensions
        dtype, chunk_shape = _dtype_and_chunks(zarr_json)
        return NodeInfo(
            path,
            "array",
            node.node_id,
            zarr_json,
            node.user_data,
            snapshot_id,
            shape=[dim.array_length for dim in dimensions],
            num_chunks=[dim.chunks for dim in dimensions],
            dimension_names=None if node.dimension_names is None else list(node.dimension_names),
            dtype=dtype,
            chunk_shape=chunk_shape,
            manifests=tuple(ManifestSpan(m, tuple(tuple(e) for e in ext)) for m, ext in node.manifests),
            since=node.since,
        )

    def node_infos(self, ref: str, path: str | None = None) -> list[NodeInfo]:
        """:meth:`ls` as typed values; ZSCorrupt where the snapshot's nodes break an invariant (two records
        of one path, a node disagreeing with its zarr.json, a node below an array: see
        :class:`~zsarchive.archive.read.invariants.SnapshotNodes`)."""
        sid = self.resolve(ref)
        nodes = self._checked_nodes(sid)
        if path is None or path.strip("/") == "":
            return [self._node_info(sid, key.components, v) for key, v in nodes]
        top = self._node_at(sid, path, ref).path
        return [
            self._node_info(sid, key.components, v)
            for key, v in nodes
            if key.path == top or key.path.startswith(top + "/")
        ]

    def ls(self, ref: str, path: str | None = None) -> list[dict]:
        """Every node of the snapshot REF names (under ``path`` and itself, if given), in the archive's order:
        path components compared one by one (``/a``, ``/a/b``, ``/a-b``), whatever order the repository's
        snapshot file used."""
        return [node.as_dict() for node in self.node_infos(ref, path)]

    def _checked_nodes(self, snapshot_id: str) -> Iterator[tuple[NodeKey, tuple]]:
        """The node records of a snapshot, in key order, each checked against the invariants."""
        tree = SnapshotNodes()
        for k, v in records_under(self.zs, schema.NODE, (snapshot_id,), unique=True):
            key = NodeKey.decode(k)
            tree.check(snapshot_id, key.components, v)
            yield key, v

    def _node_at(self, snapshot_id: str, path: str, ref: str) -> NodeInfo:
        components = schema.path_components(path if path.startswith("/") else "/" + path)
        value = self._one(schema.NODE, (snapshot_id, components))
        if value is None:
            paths = [NodeKey.decode(k).path for k, _ in self._records(schema.NODE, (snapshot_id,))]
            raise NotFound(
                f"{self.name}: no node {schema.path_of(components)!r} at {ref!r}"
                f"{hint(schema.path_of(components), paths, 'paths', paths=True)}"
            )
        SnapshotNodes().check(snapshot_id, components, value)
        return self._node_info(snapshot_id, components, value)

    def node_info(self, ref: str, path: str) -> NodeInfo:
        """:meth:`node` as a typed value."""
        return self._node_at(self.resolve(ref), path, ref)

    def node(self, ref: str, path: str) -> dict:
        """The group or array at ``path`` in the snapshot REF names."""
        return self.node_info(ref, path).as_dict()

    def _array_at(self, ref: str, path: str) -> NodeInfo:
        node = self.node_info(ref, path)
        if not node.is_array:
            raise NotFound(f"{self.name}: {node.path!r} at {ref!r} is a group, not an array")
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
