"""Decode snapshot files (``snapshots/<id>``), spec V1 and V2."""

from __future__ import annotations

from zsarchive.icechunk.common import (
    decoding,
    id8,
    id12,
    id_struct,
    metadata_items,
    metadata_vector,
    offsets_vector,
    optional_id12,
    timestamp,
)
from zsarchive.icechunk.flatbuf import (
    FlatBufferError,
    byte_vector,
    check_sorted,
    require,
    root,
    struct_bytes,
    table_of,
    text,
)
from zsarchive.icechunk import ids
from zsarchive.icechunk.generated.ArrayNodeData import ArrayNodeData
from zsarchive.icechunk.generated.NodeData import NodeData
from zsarchive.icechunk.generated.Snapshot import Snapshot as FbSnapshot
from zsarchive.icechunk.header import IMPLEMENTATION, open_file, wrap_file
from zsarchive.icechunk.model import DimensionShape, FileType, ManifestFileInfo, ManifestRef, Node, NodeType, Snapshot
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
        names = [
            text(data.DimensionNames(j).Name(), f"{what}.dimension_names[{j}]")
            for j in range(data.DimensionNamesLength())
        ]
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
        out.append(
            ManifestFileInfo(id12(info.Id(), f"manifest_files_v2[{j}].id"), info.SizeBytes(), info.NumChunkRefs())
        )
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


# -- encoding ------------------------------------------------------------------------------------


def _struct_vector(b, size: int, alignment: int, items: list, create) -> int:
    """A vector of structs of ``size`` bytes, ``create(item)`` writing each."""
    b.StartVector(size, len(items), alignment)
    for item in reversed(items):
        create(item)
    return b.EndVector()


def _encode_array(b, node: Node, spec_version: int) -> int:
    from zsarchive.icechunk.generated import (
        ArrayNodeData as A,
        DimensionName as DN,
        DimensionShapeV2 as D2,
        ManifestRef as MR,
    )
    from zsarchive.icechunk.generated.ChunkIndexRange import CreateChunkIndexRange
    from zsarchive.icechunk.generated.DimensionShape import CreateDimensionShape

    refs = []
    for ref in node.manifests:
        b.StartVector(8, len(ref.extents), 4)
        for start, stop in reversed(ref.extents):
            CreateChunkIndexRange(b, start, stop)
        extents = b.EndVector()
        MR.Start(b)
        MR.AddObjectId(b, id_struct(b, ref.id, 12))
        MR.AddExtents(b, extents)
        refs.append(MR.End(b))
    manifests = offsets_vector(b, refs)
    names = None
    if node.dimension_names is not None:
        tables = []
        for name in node.dimension_names:
            name_off = None if name is None else b.CreateString(name)
            DN.Start(b)
            if name_off is not None:
                DN.AddName(b, name_off)
            tables.append(DN.End(b))
        names = offsets_vector(b, tables)
    shape = node.shape or []
    shape_v2 = None
    # V1 keeps the shape as structs, V2 as tables in another field (V1's left empty: it is required)
    shape_v1 = _struct_vector(
        b,
        16,
        8,
        shape if spec_version == 1 else [],
        lambda dim: CreateDimensionShape(b, dim.array_length, dim.chunk_length or 0),
    )
    if spec_version >= 2:
        dims = []
        for dim in shape:
            D2.Start(b)
            D2.AddArrayLength(b, dim.array_length)
            D2.AddNumChunks(b, dim.num_chunks or 0)
            dims.append(D2.End(b))
        shape_v2 = offsets_vector(b, dims)
    A.Start(b)
    A.AddShape(b, shape_v1)
    if names is not None:
        A.AddDimensionNames(b, names)
    A.AddManifests(b, manifests)
    if shape_v2 is not None:
        A.AddShapeV2(b, shape_v2)
    return A.End(b)


def _encode_node(b, node: Node, spec_version: int) -> int:
    from zsarchive.icechunk.generated import GroupNodeData as G, NodeSnapshot as NS

    path = b.CreateString(node.path)
    user_data = b.CreateByteVector(bytes(node.user_data))
    if node.node_type is NodeType.GROUP:
        G.Start(b)
        data, tag = G.End(b), NodeData.Group
    else:
        data, tag = _encode_array(b, node, spec_version), NodeData.Array
    NS.Start(b)
    NS.AddId(b, id_struct(b, node.id, 8))
    NS.AddPath(b, path)
    NS.AddUserData(b, user_data)
    NS.AddNodeDataType(b, tag)
    NS.AddNodeData(b, data)
    return NS.End(b)


def encode_snapshot(snap: Snapshot, spec_version: int, implementation: str = IMPLEMENTATION) -> bytes:
    """A snapshot file of ``spec_version`` (1: ``shape``, ``manifest_files``, ``parent_id``, MessagePack
    metadata; 2: ``shape_v2``, ``manifest_files_v2``, FlexBuffers) holding ``snap``; nodes sorted by the
    bytes of their path and manifest files by id, as icechunk's binary searches need."""
    import flatbuffers

    from zsarchive.icechunk.generated import ManifestFileInfoV2 as MF2, Snapshot as S
    from zsarchive.icechunk.generated.ManifestFileInfo import CreateManifestFileInfo

    b = flatbuffers.Builder(1024)
    nodes = offsets_vector(b, [_encode_node(b, n, spec_version) for n in sorted(snap.nodes, key=lambda n: n.path)])
    message = b.CreateString(snap.message)
    metadata = metadata_vector(b, snap.metadata, spec_version)
    files = sorted(snap.manifest_files, key=lambda m: m.id)
    files_v2 = None
    files_v1 = _struct_vector(
        b,
        32,
        8,
        files if spec_version == 1 else [],
        lambda info: CreateManifestFileInfo(b, ids.decode(info.id, 12), info.size_bytes, info.num_chunk_refs),
    )
    if spec_version >= 2:
        tables = []
        for info in files:
            MF2.Start(b)
            MF2.AddId(b, id_struct(b, info.id, 12))
            MF2.AddSizeBytes(b, info.size_bytes)
            MF2.AddNumChunkRefs(b, info.num_chunk_refs)
            tables.append(MF2.End(b))
        files_v2 = offsets_vector(b, tables)
    S.Start(b)
    S.AddId(b, id_struct(b, snap.id, 12))
    if spec_version == 1 and snap.parent_id is not None:
        S.AddParentId(b, id_struct(b, snap.parent_id, 12))
    S.AddNodes(b, nodes)
    S.AddFlushedAt(b, snap.flushed_at)
    S.AddMessage(b, message)
    S.AddMetadata(b, metadata)
    S.AddManifestFiles(b, files_v1)
    if files_v2 is not None:
        S.AddManifestFilesV2(b, files_v2)
    b.Finish(S.End(b))
    return wrap_file(FileType.SNAPSHOT, spec_version, bytes(b.Output()), implementation)
