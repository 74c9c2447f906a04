"""Decode snapshot files (``snapshots/<id>``), spec V1 and V2."""

from __future__ import annotations

from zsarchive.icechunk.common import decoding, id8, id12, metadata_items, optional_id12, timestamp
from zsarchive.icechunk.flatbuf import FlatBufferError, byte_vector, check_sorted, require, root, struct_bytes, \
    table_of, text
from zsarchive.icechunk import ids
from zsarchive.icechunk.generated.ArrayNodeData import ArrayNodeData
from zsarchive.icechunk.generated.NodeData import NodeData
from zsarchive.icechunk.generated.Snapshot import Snapshot as FbSnapshot
from zsarchive.icechunk.header import open_file
from zsarchive.icechunk.model import (
    DimensionShape, FileType, ManifestFileInfo, ManifestRef, Node, NodeType, Snapshot,
)
from zsarchive.icechunk.paths import is_valid_path


def _array_fields(data: ArrayNodeData, what: str):
    if data.ShapeIsNone():
        raise FlatBufferError(f"required field {what}.shape is missing")
    if data.ManifestsIsNone():
        raise FlatBufferError(f"required field {what}.manifests is missing")
    shape = []
    for j in range(data.ShapeLength()):
        dim = data.Shape(j)
        array_length, chunk_length = dim.ArrayLength(), dim.ChunkLength()
        # V1 stores the chunk length; icechunk reports the number of chunks it implies.
        num_chunks = -(-array_length // chunk_length) if chunk_length else 0
        shape.append(DimensionShape(array_length, chunk_length, num_chunks))
    for j in range(data.ShapeV2Length()):
        dim = data.ShapeV2(j)
        shape.append(DimensionShape(dim.ArrayLength(), None, dim.NumChunks()))
    names = None
    if not data.DimensionNamesIsNone():
        names = [text(data.DimensionNames(j).Name(), f"{what}.dimension_names[{j}]")
                 for j in range(data.DimensionNamesLength())]
    manifests = []
    for j in range(data.ManifestsLength()):
        ref = data.Manifests(j)
        if ref.ExtentsIsNone():
            raise FlatBufferError(f"required field {what}.manifests[{j}].extents is missing")
        extents = []
        for k in range(ref.ExtentsLength()):
            rng = ref.Extents(k)
            extents.append((rng.From_(), rng.To()))
        manifests.append(ManifestRef(id12(ref.ObjectId(), f"{what}.manifests[{j}].object_id"), extents))
    return shape, names, manifests


def _node(obj, j: int) -> Node:
    what = f"nodes[{j}]"
    path = text(require(obj.Path(), f"{what}.path"), f"{what}.path")
    what = f"node {path!r}"
    if not is_valid_path(path):
        raise FlatBufferError(f"{what}: not a valid node path")
    node_id = id8(obj.Id(), f"{what}.id")
    user_data = require(byte_vector(obj, 8), f"{what}.user_data")
    kind = obj.NodeDataType()
    data = require(obj.NodeData(), f"{what}.node_data")
    if kind == NodeData.Group:
        return Node(node_id, path, NodeType.GROUP, user_data)
    if kind != NodeData.Array:
        raise FlatBufferError(f"{what}.node_data has unknown union tag {kind}")
    shape, names, manifests = _array_fields(table_of(ArrayNodeData, data), what)
    return Node(node_id, path, NodeType.ARRAY, user_data, shape, names, manifests)


def _manifest_files(snap) -> list[ManifestFileInfo]:
    out = []
    for j in range(snap.ManifestFilesLength()):
        info = snap.ManifestFiles(j)
        out.append(ManifestFileInfo(ids.encode(struct_bytes(info, 12)), info.SizeBytes(), info.NumChunkRefs()))
    for j in range(snap.ManifestFilesV2Length()):
        info = snap.ManifestFilesV2(j)
        out.append(ManifestFileInfo(id12(info.Id(), f"manifest_files_v2[{j}].id"),
                                    info.SizeBytes(), info.NumChunkRefs()))
    return out


def decode_snapshot(raw: bytes, name: str) -> Snapshot:
    """Decode a snapshot file (``name`` is used in error messages)."""
    header, payload = open_file(raw, name, FileType.SNAPSHOT)
    with decoding(name):
        snap = root(FbSnapshot, payload)
        for field in ("Nodes", "Metadata", "ManifestFiles"):
            if getattr(snap, field + "IsNone")():
                raise FlatBufferError(f"required field {field} is missing")
        nodes = [_node(snap.Nodes(j), j) for j in range(snap.NodesLength())]
        # icechunk orders nodes by the bytes of the whole path (``/a-b`` before ``/a/b``); str order is
        # code point order, which is UTF-8 byte order.
        check_sorted([n.path for n in nodes], "nodes (by path)")
        manifest_files = _manifest_files(snap)
        check_sorted([m.id for m in manifest_files], "manifest_files (by id)")
        return Snapshot(
            header=header,
            id=id12(snap.Id(), "id"),
            parent_id=optional_id12(snap.ParentId()),
            flushed_at=timestamp(snap.FlushedAt(), "flushed_at"),
            message=text(require(snap.Message(), "message"), "message"),
            metadata=metadata_items(snap, header.spec_version, "metadata", must_sort=True),
            nodes=nodes,
            manifest_files=manifest_files,
            extra=byte_vector(snap, 20),
        )
