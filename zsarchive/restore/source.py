"""The first stage of a restore: an archive's records, read back into the parts of a repository.

Every family the restore needs is read here and nowhere else (record layouts: docs/archive-format.rst),
so the rest of the restore works on the Icechunk model alone.
"""

from __future__ import annotations

import json
from collections import OrderedDict, defaultdict
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from zsarchive.archive.format import schema
from zsarchive.archive.format.views import (
    NODE_SETS, ChunkRefValue, FileKey, FileValue, ManifestRefKey, NodeKey, NodeValue, OpsKey, OpsValue, RefKey,
    RefValue, RepoFactKey, RepoFactValue, RepoFile, SnapshotKey, SnapshotValue, TxlogKey, TxlogValue,
)
from zsarchive.archive.format.header import history_from_timeline
from zsarchive.archive.read.chunkhistory import chunk_changes, corrected
from zsarchive.archive.read.invariants import RefReach, SnapshotNodes, check_history, check_ref_rows, check_shape
from zsarchive.archive.read.reader import ArchiveReader, records_under
from zsarchive.archive.read.refrows import ChunkRefRows, chunk_ref_rows
from zsarchive.errors import ZSCorrupt
from zsarchive.icechunk.manifest import RefBatch
from zsarchive.icechunk.model import (
    ChunkRef, DimensionShape, ManifestFileInfo, ManifestRef, MoveOperation, Node, NodeType, RefKind, RepoStatus,
    SnapshotInfo, Update,
)

_NODE_TYPES = {schema.GROUP: NodeType.GROUP, schema.ARRAY: NodeType.ARRAY}


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
    """What the archive holds of one snapshot's transaction log (``X`` records and the per-chunk history)."""

    lists: dict[str, list[str]]
    """new_groups ... updated_arrays."""
    moves: list[MoveOperation]
    merged: tuple[str, ...] = ()
    missing: tuple[str, ...] = ()
    unjoined_moves: tuple[MoveOperation, ...] = ()
    coords: dict[str, np.ndarray] = field(default_factory=dict)
    """Node id -> (chunks, ndim) matrix of the coordinates of the chunks changed (the per-chunk history)."""


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
    files: dict[str, FileValue] = field(default_factory=dict)
    """Metadata file key (``snapshots/ID``, ``manifests/ID``, ``transactions/ID``) -> how it was written
    (format 6; empty before)."""
    deleted_tag_snapshots: dict[str, str] = field(default_factory=dict)
    """A V1 deleted tag -> the snapshot its ``ref.json`` named (format 6)."""
    repo_file: RepoFile | None = None
    """The ``repo`` file's implementation name and the ops log's division into files (format 6, V2)."""


def _moves(raw: tuple) -> list[MoveOperation]:
    return [MoveOperation(f, t, node_id, None if kind is None else _NODE_TYPES[kind]) for f, t, node_id, kind in raw]


def _json(raw: str, where: str) -> Any:
    try:
        return json.loads(raw)
    except ValueError:
        raise ZSCorrupt(f"{where}: not JSON") from None


def _node(components: tuple, raw: tuple) -> tuple[Node, str | None]:
    value = NodeValue.decode(raw)
    path = schema.path_of(components)
    if not value.is_array:
        return Node(value.node_id, path, NodeType.GROUP, bytes(value.user_data)), None
    dims = [DimensionShape(d.array_length, d.chunk_length, d.num_chunks) for d in value.dimensions]
    refs = [ManifestRef(mid, [tuple(e) for e in extents]) for mid, extents in value.manifests]
    names = None if value.dimension_names is None else list(value.dimension_names)
    return Node(value.node_id, path, NodeType.ARRAY, bytes(value.user_data), dims, names, refs), value.since


def read_history(reader: ArchiveReader, timelines: Timelines | None = None) -> ArchiveHistory:
    """Everything but chunk refs and chunk bytes (those stream: :class:`Timelines`); the transaction logs'
    chunks of a format 5 archive come from the arrays' timelines, kept in ``timelines`` for the manifests."""
    zs, name = reader.zs, reader.name
    named = ((RepoFactKey.decode(k).name, v) for k, v in records_under(zs, schema.REPO, unique=True))
    facts = {fact: _json(RepoFactValue.decode(v).json, f"{name}: G record {fact!r}") for fact, v in named}
    refs: dict[str, dict[str, str]] = {"branch": {}, "tag": {}}
    deleted: list[str] = []
    deleted_at: dict[str, str] = {}
    for k, value in records_under(zs, schema.REFS, unique=True):
        check_shape(schema.REFS, k, value)
        ref = RefKey.decode(k)
        if ref.deleted:
            deleted.append(ref.name)
            if RefValue.decode(value).snapshot_id is not None:  # format 6, spec V1: its ref.json's
                deleted_at[ref.name] = RefValue.decode(value).snapshot_id
        elif not (ref.kind == "tag" and ref.name in deleted):  # deleted tags come first: deleted wins
            refs[ref.kind][ref.name] = RefValue.decode(value).snapshot_id
    snapshots: dict[str, SnapshotRecord] = {}
    for k, raw in records_under(zs, schema.SNAPSHOT, unique=True):
        check_shape(schema.SNAPSHOT, k, raw)
        sid, value = SnapshotKey.decode(k).snapshot_id, SnapshotValue.decode(raw)
        info = SnapshotInfo(sid, value.parent_id, value.flushed_at, value.message,
                            _json(value.metadata, f"{name}: S record {sid}"))
        snapshots[sid] = SnapshotRecord(info, [ManifestFileInfo(m, size, n) for m, size, n in value.manifests])
    check_history({sid: record.info.parent_id for sid, record in snapshots.items()})
    tree = SnapshotNodes()
    for k, raw in records_under(zs, schema.NODE, unique=True):
        check_shape(schema.NODE, k, raw)
        key = NodeKey.decode(k)
        sid = key.snapshot_id
        tree.check(sid, key.components, raw)
        node, since = _node(key.components, raw)
        record = snapshots.get(sid)
        if record is None:
            raise ZSCorrupt(f"{name}: N record of snapshot {sid} {node.path!r}, but no S record of that snapshot")
        record.nodes.append(node)
        if since is not None:
            record.since[node.id] = since
    ops = []
    for k, raw in records_under(zs, schema.OPS, unique=True):
        updated_at, value = OpsKey.decode(k).updated_at, OpsValue.decode(raw)
        details = _json(value.details, f"{name}: O record at {updated_at}")
        if "status" in details and isinstance(details["status"], dict):
            details["status"] = RepoStatus(**details["status"])
        ops.append(Update(value.type, updated_at, value.backup_path, details))
    ops.reverse()
    txlogs: dict[str, TxSummary] = {}
    logged: set[str] = set()  # arrays whose chunks some transaction log names
    for k, raw in records_under(zs, schema.TXLOG, unique=True):
        check_shape(schema.TXLOG, k, raw)
        sid, value = TxlogKey.decode(k).snapshot_id, TxlogValue.decode(raw)
        summary = TxSummary(dict(zip(NODE_SETS, map(list, value.sets))), _moves(value.own_moves))
        if value.merged is not None:
            summary.merged, summary.missing = tuple(value.merged), tuple(value.lost_logs)
            summary.unjoined_moves = tuple(_moves(value.merged_moves or ()))
        txlogs[sid] = summary
        logged.update(node_id for node_id, _ in value.updated_chunks)
    if history_from_timeline(reader.view_format):
        _timeline_coords(reader, timelines or Timelines(reader), snapshots, txlogs, logged)
    else:
        for change in chunk_changes(zs, reader.view_format, _flushed_at(name, snapshots)):
            node_id, coords, sid = change.node_id, change.coords, change.snapshot_id
            if sid in txlogs:
                txlogs[sid].coords.setdefault(node_id, []).append(coords)
        for summary in txlogs.values():  # as matrices: a big commit changes millions of chunks
            summary.coords = {node: np.array(rows, dtype=np.uint32).reshape(len(rows), -1)
                              for node, rows in summary.coords.items()}
    files = {}
    for key, value in records_under(zs, schema.FILES, unique=True):
        check_shape(schema.FILES, key, value)
        files[FileKey.decode(key).path] = FileValue.decode(value)
    repo_file = facts.get("repo_file")
    if repo_file is not None and not RepoFile.well_formed(repo_file, len(ops)):
        raise ZSCorrupt(f"{name}: G record 'repo_file': not an implementation name of a file header and "
                        f"counts adding up to the {len(ops)} ops-log entries")
    return ArchiveHistory(name, reader.format_version, int(facts.get("spec_version", 2)), facts,
                          refs["branch"], refs["tag"], deleted, snapshots, ops, txlogs, files, deleted_at,
                          None if repo_file is None else RepoFile.decode(repo_file))


def _timeline_coords(reader: ArchiveReader, timelines: Timelines, snapshots: dict[str, SnapshotRecord],
                     txlogs: dict[str, TxSummary], logged: set[str]) -> None:
    """Each transaction log's chunk coordinates, per array, from a format 5 archive: the array's ``C``
    timeline decoded once (:class:`Timelines`, which the manifests then reuse) and corrected by its ``H``
    exceptions; an array no exported snapshot holds (created and deleted within an expired stretch) has
    only ``H`` records, read one by one."""
    zs, name = reader.zs, reader.name
    ndims = {node.id: len(node.shape) for record in snapshots.values() for node in record.nodes
             if node.shape is not None}
    flushed_at = _flushed_at(name, snapshots)
    for node_id in sorted(logged):
        if node_id in ndims:
            timeline = timelines.get(node_id)
            if len(timeline) and timeline.coords.shape[1] != ndims[node_id]:
                raise ZSCorrupt(f"{name}: chunk ref records of array {node_id} hold {timeline.coords.shape[1]} "
                                f"coordinates, the array has {ndims[node_id]} dimensions")
            table = np.column_stack([timeline.coords, timeline.snapshot]) if len(timeline) else \
                np.zeros((0, ndims[node_id] + 1), np.int64)
            rows, ids = corrected(zs, node_id, ndims[node_id], table, list(timeline.snapshot_ids))
            column = rows[:, -1]
            for i, sid in enumerate(ids):
                if sid in txlogs:
                    txlogs[sid].coords[node_id] = rows[column == i, :-1].astype(np.uint32)
            continue
        found: dict[str, list] = {}
        for change in chunk_changes(zs, reader.view_format, flushed_at, (node_id,)):
            coords, sid = change.coords, change.snapshot_id
            if sid in txlogs:
                found.setdefault(sid, []).append(coords)
        for sid, coords in found.items():
            txlogs[sid].coords[node_id] = np.array(coords, dtype=np.uint32).reshape(len(coords), -1)


def _flushed_at(name: str, snapshots: dict[str, SnapshotRecord]):
    """A snapshot id's time, for the per-chunk history (ZSCorrupt for a snapshot without an S record)."""
    def flushed_at(sid: str) -> int:
        record = snapshots.get(sid)
        if record is None:
            raise ZSCorrupt(f"{name}: a chunk ref record names snapshot {sid}, which has no S record")
        return record.info.flushed_at
    return flushed_at


def chunk_ref(coords: tuple, raw: tuple) -> ChunkRef | None:
    """The ref a ``C`` record value holds (None: removed)."""
    value = ChunkRefValue.decode(raw)
    if value.kind == schema.INLINE:
        return ChunkRef(coords, RefKind.INLINE, inline=bytes(value.inline))
    if value.kind == schema.NATIVE:
        return ChunkRef(coords, RefKind.NATIVE, chunk_id=value.chunk_id, offset=value.offset, length=value.length)
    if value.kind == schema.VIRTUAL:
        return ChunkRef(coords, RefKind.VIRTUAL, location=value.location, offset=value.offset, length=value.length,
                        checksum_etag=value.checksum_etag, checksum_last_modified=value.checksum_last_modified)
    return None


class Timelines:
    """The chunk ref timelines of arrays (format 2): each change of a ref, one row each, in coordinate
    order and, for one chunk, snapshot id order; decoded once and kept while they hold at most
    ``rows`` rows together (the most recently used first), for the transaction logs and the manifests."""

    def __init__(self, reader: ArchiveReader, rows: int = 1 << 23):
        self.reader = reader
        self.rows = rows
        self._kept: OrderedDict[str, ChunkRefRows] = OrderedDict()
        self.reach = RefReach()
        """How far the refs read so far reach into each chunk file (for the files the archive embeds)."""

    def get(self, node_id: str) -> ChunkRefRows:
        """The timeline of array ``node_id``, its invariants checked (:func:`check_ref_rows`)."""
        found = self._kept.get(node_id)
        if found is not None:
            self._kept.move_to_end(node_id)
            return found
        found = chunk_ref_rows(self.reader.zs, node_id)
        check_ref_rows(found, node_id, self.reach)
        self._kept[node_id] = found
        while len(self._kept) > 1 and sum(map(len, self._kept.values())) > self.rows:
            self._kept.popitem(last=False)
        return found


_REF_KINDS = {schema.INLINE: RefKind.INLINE, schema.NATIVE: RefKind.NATIVE, schema.VIRTUAL: RefKind.VIRTUAL}


def timeline_refs(rows: ChunkRefRows, chosen: np.ndarray) -> RefBatch:
    """The refs of the rows ``chosen`` (none removed), in their order, as columns."""
    n = len(chosen)
    kinds_at = rows.kind[chosen]
    present = np.unique(kinds_at).tolist()
    try:
        kinds_of = {k: _REF_KINDS[k] for k in present}
    except KeyError as exc:
        raise ZSCorrupt(f"chunk ref of kind {exc.args[0]}, which this zsarchive does not know") from None
    # columns gathered with numpy object arrays (each text one object, however many rows name it)
    named = np.array([*rows.texts, None], dtype=object)[rows.text[chosen]]  # -1: the None at the end
    if len(present) == 1:  # most arrays: one kind
        kinds = [kinds_of[present[0]]] * n
        chunk_ids = named.tolist() if kinds_of[present[0]] is RefKind.NATIVE else [None] * n
        locations = named.tolist() if kinds_of[present[0]] is RefKind.VIRTUAL else [None] * n
    else:
        kinds = [kinds_of[k] for k in kinds_at.tolist()]
        chunk_ids = np.where(kinds_at == schema.NATIVE, named, None).tolist()
        locations = np.where(kinds_at == schema.VIRTUAL, named, None).tolist()
    inline = [rows.inline.get(r) for r in chosen.tolist()] if rows.inline else [None] * n
    return RefBatch(rows.coords[chosen], kinds, inline, chunk_ids, locations, rows.offset[chosen],
                    rows.length[chosen], _pick(rows.checksum_etag, chosen), _pick(rows.checksum_last_modified, chosen))


def _pick(column: list, chosen: np.ndarray) -> list:
    """The entries ``chosen`` of a list column."""
    if column.count(None) == len(column):
        return [None] * len(chosen)
    picked = np.empty(len(column), dtype=object)
    picked[:] = column
    return picked[chosen].tolist()


def manifest_refs(reader: ArchiveReader, manifest_id: str) -> dict[str, list[ChunkRef]]:
    """Format 1: node id -> the refs a manifest holds."""
    out: dict[str, list[ChunkRef]] = defaultdict(list)
    for k, value in records_under(reader.zs, schema.CHUNK_REF, (manifest_id,)):
        key = ManifestRefKey.decode(k)
        out[key.node_id].append(chunk_ref(tuple(key.coords), value))
    return out
