"""The first stage of a restore: an archive's records, read back into the parts of a repository.

Every family the restore needs is read here and nowhere else (record layouts: docs/archive-format.rst),
so the rest of the restore works on the Icechunk model alone.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Iterator

import numpy as np

from zsarchive.archive.format import schema as S
from zsarchive.archive.read.reader import ArchiveReader, records_under
from zsarchive.errors import ZSCorrupt
from zsarchive.icechunk.model import (
    ChunkRef, DimensionShape, ManifestFileInfo, ManifestRef, MoveOperation, Node, NodeType, RefKind, RepoStatus,
    SnapshotInfo, Update,
)

_NODE_TYPES = {S.GROUP: NodeType.GROUP, S.ARRAY: NodeType.ARRAY}


@dataclass
class SnapshotRecord:
    """What the archive holds of one snapshot (``S`` and ``N`` records)."""

    info: SnapshotInfo
    manifest_files: list[ManifestFileInfo]
    nodes: list[Node] = field(default_factory=list)
    since: dict[str, str] = field(default_factory=dict)
    """Array node id -> the snapshot its chunk ref timeline starts at (format 2)."""


@dataclass
class TxSummary:
    """What the archive holds of one snapshot's transaction log (``X`` and ``H`` records)."""

    lists: dict[str, list[str]]
    """new_groups ... updated_arrays."""
    moves: list[MoveOperation]
    merged: tuple[str, ...] = ()
    missing: tuple[str, ...] = ()
    unjoined_moves: tuple[MoveOperation, ...] = ()
    coords: dict[str, np.ndarray] = field(default_factory=dict)
    """Node id -> (chunks, ndim) matrix of the coordinates of the chunks changed (``H`` records)."""


@dataclass
class ArchiveHistory:
    """A repository's history as an archive holds it."""

    name: str
    format_version: int
    spec_version: int
    facts: dict[str, Any]
    branches: dict[str, str]
    tags: dict[str, str]
    deleted_tags: list[str]
    snapshots: dict[str, SnapshotRecord]
    ops: list[Update]
    """Newest first."""
    txlogs: dict[str, TxSummary]


def _moves(raw: tuple) -> list[MoveOperation]:
    return [MoveOperation(f, t, node_id, None if kind is None else _NODE_TYPES[kind]) for f, t, node_id, kind in raw]


def _json(raw: str, where: str) -> Any:
    try:
        return json.loads(raw)
    except ValueError:
        raise ZSCorrupt(f"{where}: not JSON") from None


def _node(snapshot_id: str, components: tuple, value: tuple) -> tuple[Node, str | None]:
    node_id, kind, zarr_json, shape, names, manifests = value[:6]
    path = S.path_of(components)
    if kind == S.GROUP:
        return Node(node_id, path, NodeType.GROUP, bytes(zarr_json)), None
    dims = [DimensionShape(a, c, n) for a, c, n in shape]
    refs = [ManifestRef(mid, [tuple(e) for e in extents]) for mid, extents in manifests]
    since = value[6] if len(value) > 6 else None
    return Node(node_id, path, NodeType.ARRAY, bytes(zarr_json), dims,
                None if names is None else list(names), refs), since


def read_history(reader: ArchiveReader) -> ArchiveHistory:
    """Everything but chunk refs and chunk bytes (those stream: :func:`chunk_ref_records`)."""
    zs, name = reader.zs, reader.name
    facts = {k[0]: _json(v[0], f"{name}: G record {k[0]!r}") for k, v in records_under(zs, S.REPO)}
    refs: dict[str, dict[str, str]] = {"branch": {}, "tag": {}}
    deleted: list[str] = []
    for (kind, ref_name), value in records_under(zs, S.REFS):
        if kind == "deleted_tag":
            deleted.append(ref_name)
        else:
            refs[kind][ref_name] = value[0]
    snapshots: dict[str, SnapshotRecord] = {}
    for (sid,), (parent, flushed_at, message, metadata, files) in records_under(zs, S.SNAPSHOT):
        info = SnapshotInfo(sid, parent, flushed_at, message, _json(metadata, f"{name}: S record {sid}"))
        snapshots[sid] = SnapshotRecord(info, [ManifestFileInfo(m, size, n) for m, size, n in files])
    for (sid, components), value in records_under(zs, S.NODE):
        node, since = _node(sid, components, value)
        record = snapshots.get(sid)
        if record is None:
            raise ZSCorrupt(f"{name}: N record of snapshot {sid} {node.path!r}, but no S record of that snapshot")
        record.nodes.append(node)
        if since is not None:
            record.since[node.id] = since
    ops = []
    for (updated_at, _seq), (kind, backup, details) in records_under(zs, S.OPS):
        details = _json(details, f"{name}: O record at {updated_at}")
        if "status" in details and isinstance(details["status"], dict):
            details["status"] = RepoStatus(**details["status"])
        ops.append(Update(kind, updated_at, backup, details))
    ops.reverse()
    txlogs: dict[str, TxSummary] = {}
    fields = ("new_groups", "new_arrays", "deleted_groups", "deleted_arrays", "updated_groups", "updated_arrays")
    for (sid,), value in records_under(zs, S.TXLOG):
        summary = TxSummary({f: list(v) for f, v in zip(fields, value[:6])}, _moves(value[7]))
        if len(value) > 8:
            summary.merged, summary.missing = tuple(value[8]), tuple(value[9])
            summary.unjoined_moves = tuple(_moves(value[10]))
        txlogs[sid] = summary
    for (node_id, coords, _flushed_at, sid), _ in records_under(zs, S.CHUNK_HISTORY):
        if sid in txlogs:
            txlogs[sid].coords.setdefault(node_id, []).append(coords)
    for summary in txlogs.values():  # as matrices: a big commit changes millions of chunks
        summary.coords = {node: np.array(rows, dtype=np.uint32).reshape(len(rows), -1)
                          for node, rows in summary.coords.items()}
    return ArchiveHistory(name, reader.format_version, int(facts.get("spec_version", 2)), facts,
                          refs["branch"], refs["tag"], deleted, snapshots, ops, txlogs)


def chunk_ref(coords: tuple, value: tuple, texts: dict[str, str] | None = None) -> ChunkRef | None:
    """The ref a ``C`` record value holds (None: removed). ``texts``: one copy of each location kept
    (many refs of an array point into few files)."""
    kind = value[0]
    if kind == S.INLINE:
        return ChunkRef(coords, RefKind.INLINE, inline=bytes(value[1]))
    if kind == S.NATIVE:
        return ChunkRef(coords, RefKind.NATIVE, chunk_id=value[1], offset=value[2], length=value[3])
    if kind == S.VIRTUAL:
        location = value[1] if texts is None else texts.setdefault(value[1], value[1])
        return ChunkRef(coords, RefKind.VIRTUAL, location=location, offset=value[2], length=value[3],
                        checksum_etag=value[4], checksum_last_modified=value[5])
    return None


Timeline = dict
"""Format 2, one array: coords -> ``(snapshot id, ref)`` of the one snapshot that set it, or a list of
them when several did (ref None: removed). Most chunks are set once: no list for them."""


def node_timeline(reader: ArchiveReader, node_id: str) -> Timeline:
    """The chunk ref timeline of one array (see :data:`Timeline`)."""
    out: Timeline = {}
    texts: dict[str, str] = {}
    for (_node, coords, sid), value in records_under(reader.zs, S.CHUNK_REF, (node_id,)):
        coords = tuple(coords)
        change = (sid, chunk_ref(coords, value, texts))
        before = out.get(coords)
        if before is None:
            out[coords] = change
        elif isinstance(before, list):
            before.append(change)
        else:
            out[coords] = [before, change]
    return out


def manifest_refs(reader: ArchiveReader, manifest_id: str) -> dict[str, list[ChunkRef]]:
    """Format 1: node id -> the refs a manifest holds."""
    out: dict[str, list[ChunkRef]] = defaultdict(list)
    for (_mid, node_id, coords), value in records_under(reader.zs, S.CHUNK_REF, (manifest_id,)):
        out[node_id].append(chunk_ref(tuple(coords), value))
    return out


def embedded_files(reader: ArchiveReader) -> Iterator[tuple[str, bytes]]:
    """(chunk id, whole file bytes) of every chunk file the archive embeds (``D`` records), in id order."""
    current, parts, expected = None, [], 0
    for key, value in records_under(reader.zs, S.CHUNK_DATA):
        chunk_id = key[0]
        if reader.format_version < 3:
            yield chunk_id, bytes(value[0])
            continue
        if chunk_id != current:
            if current is not None:
                yield current, b"".join(parts)
            current, parts, expected = chunk_id, [], 0
        if key[1] != expected:
            raise ZSCorrupt(f"{reader.name}: chunk data of {chunk_id} has a gap at offset {expected}")
        parts.append(bytes(value[0]))
        expected += len(value[0])
    if current is not None:
        yield current, b"".join(parts)


def embedded_ids(reader: ArchiveReader) -> set[str]:
    """Ids of the chunk files the archive embeds (keys only)."""
    return {key[0] for key, _ in records_under(reader.zs, S.CHUNK_DATA)}
