"""The first stage of a restore: an archive's records, read back into the parts of a repository.

Every family the restore needs is read here and nowhere else (record layouts: docs/archive-format.rst),
so the rest of the restore works on the Icechunk model alone.
"""

from __future__ import annotations

import functools
from collections import OrderedDict, defaultdict
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from zsarchive.archive.format import schema
from zsarchive.archive.format.views import (
    NODE_SETS,
    NODE_TYPES,
    REF_KIND_CODES,
    ChunkRefValue,
    FileKey,
    FileValue,
    ManifestRefKey,
    NodeKey,
    NodeValue,
    OpsKey,
    OpsValue,
    RefKey,
    RefValue,
    RepoFactKey,
    RepoFactValue,
    RepoFile,
    SnapshotKey,
    SnapshotValue,
    TxlogKey,
    TxlogValue,
)
from zsarchive.archive.format.header import history_from_timeline
from zsarchive.archive.read.chunkhistory import chunk_changes, corrected
from zsarchive.archive.read.invariants import SnapshotNodes, check_history, check_ref_rows, check_shape
from zsarchive.archive.read.reader import ArchiveReader, records_under
from zsarchive.archive.read.refrows import ChunkRefRows, chunk_ref_rows
from zsarchive.errors import ZSCorrupt
from zsarchive.limits import load_json
from zsarchive.icechunk.manifest.refs import KINDS, RefTable, numbered
from zsarchive.icechunk.model import (
    ChunkRef,
    DimensionShape,
    ManifestFileInfo,
    ManifestRef,
    MoveOperation,
    Node,
    NodeType,
    RefKind,
    RepoStatus,
    SnapshotInfo,
    Update,
)


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
    listed: tuple[str, ...] = ()
    """The arrays whose chunks the log names (its ``X`` record's), however many (none included)."""


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
    logged: set[str] = field(default_factory=set)
    """The arrays whose chunks some transaction log names."""

    def ranges(self, node_id: str) -> list[tuple[int | None, int | None]]:
        """The ranges of an array's first axis its timeline is read in: the whole axis, or where some
        snapshot splits the array's refs over manifests, the pieces their extents cut it into (so that
        memory follows the largest manifest, not the array)."""
        cuts = self._cuts.get(node_id)
        if not cuts:
            return [(None, None)]
        return list(zip([None, *cuts], [*cuts, None]))

    @functools.cached_property
    def _cuts(self) -> dict[str, list[int]]:
        """Array node id -> where the extents of its manifests begin and end on the first axis, where it
        has several manifests in some snapshot."""
        cuts: dict[str, set[int]] = {}
        for record in self.snapshots.values():
            for node in record.nodes:
                if node.manifests is not None and len(node.manifests) > 1:
                    found = cuts.setdefault(node.id, set())
                    for ref in node.manifests:
                        if ref.extents:
                            found.update(ref.extents[0])
        return {node: sorted(found) for node, found in cuts.items()}

    @functools.cached_property
    def ndims(self) -> dict[str, int]:
        """Array node id -> its number of dimensions."""
        return {
            node.id: len(node.shape)
            for record in self.snapshots.values()
            for node in record.nodes
            if node.shape is not None
        }


def _moves(raw: tuple) -> list[MoveOperation]:
    return [MoveOperation(f, t, node_id, None if kind is None else NODE_TYPES[kind]) for f, t, node_id, kind in raw]


def _node(components: tuple, raw: tuple) -> tuple[Node, str | None]:
    value = NodeValue.decode(raw)
    path = schema.path_of(components)
    if not value.is_array:
        return Node(value.node_id, path, NodeType.GROUP, bytes(value.user_data)), None
    dims = [DimensionShape(d.array_length, d.chunk_length, d.num_chunks) for d in value.dimensions]
    refs = [ManifestRef(mid, [tuple(e) for e in extents]) for mid, extents in value.manifests]
    names = None if value.dimension_names is None else list(value.dimension_names)
    return Node(value.node_id, path, NodeType.ARRAY, bytes(value.user_data), dims, names, refs), value.since


def read_history(reader: ArchiveReader, timelines: Timelines | None = None, coords: bool = True) -> ArchiveHistory:
    """Everything but chunk refs and chunk bytes (those stream: :class:`Timelines`); the transaction logs'
    chunks of a format 5 archive come from the arrays' timelines, kept in ``timelines`` for the manifests
    (``coords`` False: none yet, :func:`add_chunk_coords` or :func:`set_chunk_coords` add them)."""
    zs, name = reader.zs, reader.name
    named = ((RepoFactKey.decode(k).name, v) for k, v in records_under(zs, schema.REPO, unique=True))
    facts = {fact: load_json(RepoFactValue.decode(v).json, f"{name}: G record {fact!r}") for fact, v in named}
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
        info = SnapshotInfo(
            sid, value.parent_id, value.flushed_at, value.message, load_json(value.metadata, f"{name}: S record {sid}")
        )
        snapshots[sid] = SnapshotRecord(info, [ManifestFileInfo(m, size, n) for m, size, n in value.manifests])
    check_history({sid: record.info.parent_id for sid, record in snapshots.items()})
    tree = SnapshotNodes()
    for k, raw in records_under(zs, schema.NODE, unique=True):
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
        details = load_json(value.details, f"{name}: O record at {updated_at}")
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
        summary.listed = tuple(node_id for node_id, _ in value.updated_chunks)
        txlogs[sid] = summary
        logged.update(summary.listed)
    files = {}
    for key, value in records_under(zs, schema.FILES, unique=True):
        check_shape(schema.FILES, key, value)
        files[FileKey.decode(key).path] = FileValue.decode(value)
    repo_file = facts.get("repo_file")
    if repo_file is not None and not RepoFile.well_formed(repo_file, len(ops)):
        raise ZSCorrupt(
            f"{name}: G record 'repo_file': not an implementation name of a file header and "
            f"counts adding up to the {len(ops)} ops-log entries"
        )
    history = ArchiveHistory(
        name,
        reader.format_version,
        int(facts.get("spec_version", 2)),
        facts,
        refs["branch"],
        refs["tag"],
        deleted,
        snapshots,
        ops,
        txlogs,
        files,
        deleted_at,
        None if repo_file is None else RepoFile.decode(repo_file),
        logged,
    )
    timelines = timelines or Timelines(reader)
    timelines.fit(history)
    if coords:
        add_chunk_coords(reader, timelines, history)
    return history


def add_chunk_coords(reader: ArchiveReader, timelines: Timelines, history: ArchiveHistory) -> None:
    """Each transaction log's chunk coordinates, every array's: from the arrays' timelines (format 5:
    :func:`array_coords`), else from the per-chunk history, one pass over all arrays."""
    found: dict[str, dict[str, np.ndarray]] = {}
    if history_from_timeline(reader.records_format):
        for node_id in sorted(history.logged):
            found[node_id] = array_coords(reader, timelines, history, node_id)
    else:
        rows: dict[tuple[str, str], list] = {}
        for change in chunk_changes(reader.zs, reader.records_format, _flushed_at(reader.name, history.snapshots)):
            if change.snapshot_id in history.txlogs:
                rows.setdefault((change.node_id, change.snapshot_id), []).append(change.coords)
        for (node_id, sid), coords in rows.items():  # as matrices: a big commit changes millions of chunks
            found.setdefault(node_id, {})[sid] = np.array(coords, dtype=np.uint32).reshape(len(coords), -1)
    set_chunk_coords(history, found)


def set_chunk_coords(history: ArchiveHistory, found: dict[str, dict[str, np.ndarray]]) -> None:
    """Give each transaction log the coordinates ``found`` (node id -> snapshot id -> matrix) of the arrays
    it names, as it names them: where expiration made a snapshot's parent the first one, its chunk refs
    all differ from the parent's, though the log may name none of them."""
    for sid, summary in history.txlogs.items():
        summary.coords = {node: found.get(node, {}).get(sid, np.zeros((0, 0), np.uint32)) for node in summary.listed}


def array_coords(
    reader: ArchiveReader, timelines: Timelines, history: ArchiveHistory, node_id: str
) -> dict[str, np.ndarray]:
    """Snapshot id -> the coordinates of the array's chunks its transaction log names, from a format 5
    archive: the array's ``C`` timeline decoded once (:class:`Timelines`, which the manifests then reuse),
    a range of its first axis at a time where its manifests are split (:meth:`ArchiveHistory.ranges`),
    and corrected by its ``H`` exceptions; an array no exported snapshot holds (created and deleted
    within an expired stretch) has only ``H`` records, read one by one."""
    zs, name = reader.zs, reader.name
    ndim = history.ndims.get(node_id)
    if ndim is not None:
        parts: dict[str, list[np.ndarray]] = {}
        for first, stop in history.ranges(node_id):
            timeline = timelines.get(node_id, first, stop)
            if len(timeline) and timeline.coords.shape[1] != ndim:
                raise ZSCorrupt(
                    f"{name}: chunk ref records of array {node_id} hold {timeline.coords.shape[1]} "
                    f"coordinates, the array has {ndim} dimensions"
                )
            table = (
                np.column_stack([timeline.coords, timeline.snapshot])
                if len(timeline)
                else np.zeros((0, ndim + 1), np.int64)
            )
            rows, ids = corrected(zs, node_id, ndim, table, list(timeline.snapshot_ids), first, stop)
            column = rows[:, -1]
            for i, sid in enumerate(ids):
                if sid in history.txlogs:
                    parts.setdefault(sid, []).append(rows[column == i, :-1].astype(np.uint32))
        return {sid: found[0] if len(found) == 1 else np.concatenate(found) for sid, found in parts.items()}
    listed: dict[str, list] = {}
    for change in chunk_changes(zs, reader.records_format, _flushed_at(name, history.snapshots), (node_id,)):
        if change.snapshot_id in history.txlogs:
            listed.setdefault(change.snapshot_id, []).append(change.coords)
    return {sid: np.array(coords, dtype=np.uint32).reshape(len(coords), -1) for sid, coords in listed.items()}


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
        return ChunkRef(
            coords,
            RefKind.VIRTUAL,
            location=value.location,
            offset=value.offset,
            length=value.length,
            checksum_etag=value.checksum_etag,
            checksum_last_modified=value.checksum_last_modified,
        )
    return None


FEW_ROWS = 1 << 20
"""Rows of chunk ref records a restore keeps decoded however small its manifests (~100 MB)."""


class Timelines:
    """The chunk ref timelines of arrays (format 2): each change of a ref, one row each, in coordinate
    order and, for one chunk, snapshot id order; decoded once and kept while they hold at most
    ``rows`` rows together (the most recently used first), for the transaction logs and the manifests."""

    def __init__(self, reader: ArchiveReader, rows: int = 1 << 23):
        self.reader = reader
        self.rows = rows
        self._kept: OrderedDict[tuple[str, int | None, int | None], ChunkRefRows] = OrderedDict()

    def fit(self, history: ArchiveHistory) -> None:
        """Keep as many rows as the largest manifest holds refs (at least ``FEW_ROWS``, so that small arrays
        read for their transaction logs stay for their manifests): an array split over manifests is read a
        manifest's worth at a time, and memory follows the largest manifest, not the largest array."""
        self.rows = max(
            [
                FEW_ROWS,
                *(info.num_chunk_refs for record in history.snapshots.values() for info in record.manifest_files),
            ]
        )

    def get(self, node_id: str, first: int | None = None, stop: int | None = None) -> ChunkRefRows:
        """The timeline of array ``node_id`` (only the chunks whose first coordinate is in ``[first, stop)``,
        if given)."""
        key = (node_id, first, stop)
        found = self._kept.get(key)
        if found is not None:
            self._kept.move_to_end(key)
            return found
        found = chunk_ref_rows(self.reader.zs, node_id, first, stop)
        check_ref_rows(found, node_id)
        self._kept[key] = found
        while len(self._kept) > 1 and sum(map(len, self._kept.values())) > self.rows:
            self._kept.popitem(last=False)
        return found


_NOT_A_REF = 255
_REF_KINDS = np.full(256, _NOT_A_REF, np.uint8)
_REF_KINDS[list(REF_KIND_CODES.values())] = [KINDS.index(kind) for kind in REF_KIND_CODES]
"""The archive's ref kind codes -> the manifest encoder's (the kind's index in ``KINDS``)."""


def timeline_refs(rows: ChunkRefRows, chosen: np.ndarray) -> RefTable:
    """The refs of the rows ``chosen`` (none removed), in their order, as numbers."""
    kinds_at = rows.kind[chosen]
    kind = _REF_KINDS[kinds_at]
    if (kind == _NOT_A_REF).any():
        raise ZSCorrupt(f"chunk ref of kind {int(kinds_at[kind == _NOT_A_REF][0])}, which this zsarchive does not know")
    etag, etags = numbered(_pick(rows.checksum_etag, chosen))
    stamps = _pick(rows.checksum_last_modified, chosen)
    modified = (
        np.zeros(len(chosen), np.uint32)
        if stamps.count(None) == len(stamps)
        else np.array([m or 0 for m in stamps], np.uint32)
    )
    inline, blobs = numbered([rows.inline.get(r) for r in chosen.tolist()] if rows.inline else [None] * len(chosen))
    return RefTable(
        rows.coords[chosen].astype(np.uint32),
        kind,
        rows.text[chosen].astype(np.int64),
        rows.texts,
        rows.offset[chosen].astype(np.uint64),
        rows.length[chosen].astype(np.uint64),
        etag,
        etags,
        modified,
        inline,
        blobs,
    )


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
