"""The archive's records built from the repository model: one function per family group.

These are the pure parts of an export (no files, no processes): the exporter's stages call them,
in this process or in worker processes, and tests call them directly. Hot loops (chunk refs,
millions of records) build records a batch at a time with
:func:`zsarchive.archive.format.tuplerows.encode_rows`; tests check they equal what :func:`schema.record` builds.
"""

from __future__ import annotations

import dataclasses
import enum
import itertools
import json
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Iterable, Iterator

import numpy as np

from zsarchive.archive.format import tuples
from zsarchive.archive.format.tuplerows import encode_rows
from zsarchive.archive.format.pieces import PieceBlock, piece_blocks, piece_records, piece_starts
from zsarchive.archive.format.shards import ShardLayout
from zsarchive.archive.format import schema
from zsarchive.archive.write.chunkfiles import NATIVE, NativeFileEntry
from zsarchive.archive.format.header import keeps_file_forms
from zsarchive.archive.format import refrecords
from zsarchive.archive.format.views import (
    NODE_TYPE_CODES,
    REF_KIND_CODES,
    FileValue,
    NodeValue,
    OpsValue,
    RefValue,
    RepoFactValue,
    SnapshotValue,
    TxlogValue,
)
from zsarchive.archive.write.refdelta import coord_keys
from zsarchive.errors import ZSCorrupt
from zsarchive.icechunk.storage import Storage
from zsarchive.icechunk import Repository
from zsarchive.icechunk.gather import distinct
from zsarchive.icechunk.manifest.refs import RefBatch
from zsarchive.icechunk.model import MoveOperation, Node, NodeType, RefKind, SnapshotInfo


def _jsonable(value: Any) -> Any:
    if isinstance(value, (bytes, bytearray, memoryview)):
        return list(bytes(value))
    if isinstance(value, enum.Enum):
        return value.value
    if dataclasses.is_dataclass(value):
        return {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
    raise TypeError(f"cannot store {type(value).__name__} as JSON")


def to_json(value: Any) -> str:
    """Canonical JSON (sorted keys, no spaces) so that two exports write identical bytes."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=_jsonable)


# -- refs, repository facts, ops log ---------------------------------------------------------


def ref_records(repo: Repository, records_format: int = schema.FULL_FORMAT) -> list[bytes]:
    """The ``B`` records: branches, tags and deleted tags (sorted); from format 6 a V1 deleted tag keeps
    the snapshot its ``ref.json`` names."""
    out = [
        schema.record(schema.REFS, ("branch", name), RefValue(sid).encode()) for name, sid in repo.branches().items()
    ]
    out += [schema.record(schema.REFS, ("tag", name), RefValue(sid).encode()) for name, sid in repo.tags().items()]
    out += [
        schema.record(
            schema.REFS,
            ("deleted_tag", name),
            RefValue(repo.deleted_tag_snapshot(name) if keeps_file_forms(records_format) else None).encode(),
        )
        for name in repo.deleted_tags()
    ]
    return sorted(out)


def repo_fact_records(repo: Repository, records_format: int = schema.FULL_FORMAT) -> list[bytes]:
    """The ``G`` records: spec version, metadata, config, status, feature flags; from format 6 (spec V2)
    ``repo_file``: the implementation name of the ``repo`` file's header and how many ops-log entries
    each repo info file holds."""
    info = repo.repo_info()
    facts = {
        "spec_version": info.spec_version,
        "metadata": info.metadata,
        "config": info.config,
        "status": info.status,
        "feature_flags": {"enabled": info.enabled_feature_flags, "disabled": info.disabled_feature_flags},
    }
    if keeps_file_forms(records_format) and info.spec_version >= 2:
        facts["repo_file"] = {"implementation": info.header.implementation, "ops_log_files": repo.ops_log_files()}
    return [
        schema.record(schema.REPO, (name,), RepoFactValue(to_json(value)).encode()) for name, value in facts.items()
    ]


def file_records(repo: Repository, keys: Iterable[str]) -> list[bytes]:
    """The ``Y`` records (format 6) of the metadata files ``keys`` that the repository holds."""
    out = []
    for key in keys:
        form = repo.file_form(key)
        if form is not None:
            value = FileValue(form.implementation, form.compression_algorithm, form.location_dictionary)
            out.append(schema.record(schema.FILES, (key,), value.encode()))
    return out


def ops_records(repo: Repository) -> list[bytes]:
    """The ``O`` records: the ops log, numbered from 0 = oldest so equal times keep their order."""
    updates = list(repo.ops_log())
    return [
        schema.record(
            schema.OPS,
            (update.updated_at, len(updates) - 1 - position),
            OpsValue(update.type, update.backup_path, to_json(update.details)).encode(),
        )
        for position, update in enumerate(updates)
    ]


# -- snapshots and nodes -----------------------------------------------------------------------


def snapshot_records(repo: Repository, info: SnapshotInfo, since: dict[str, str]) -> list[bytes]:
    """The ``S``, ``T``, ``L`` and ``N`` records of one snapshot (``since``: array node id -> the
    snapshot its chunk ref timeline starts at)."""
    snap = repo.snapshot(info.id)
    out = [
        schema.record(
            schema.SNAPSHOT,
            (info.id,),
            SnapshotValue(
                info.parent_id,
                info.flushed_at,
                info.message,
                to_json(info.metadata),
                tuple((m.id, m.size_bytes, m.num_chunk_refs) for m in snap.manifest_files),
            ).encode(),
        ),
        schema.record(schema.SNAPSHOT_TIME, (info.flushed_at, info.id)),
    ]
    if info.parent_id is not None:
        out.append(schema.record(schema.CHILDREN, (info.parent_id, info.id)))
    out += [
        schema.record(schema.NODE, (info.id, schema.path_components(node.path)), node_value(node, since.get(node.id)))
        for node in snap.nodes
    ]
    return out


def node_value(node: Node, since: str | None) -> tuple:
    """The value of a node's ``N`` record (``since``: where an array's chunk ref timeline starts)."""
    code = NODE_TYPE_CODES[node.node_type]
    if node.node_type is NodeType.GROUP:
        return NodeValue(node.id, code, bytes(node.user_data), None, None, ()).encode()
    shape = tuple((d.array_length, d.chunk_length, d.num_chunks) for d in node.shape or ())
    names = None if node.dimension_names is None else tuple(node.dimension_names)
    manifests = tuple((m.id, tuple(tuple(e) for e in m.extents)) for m in node.manifests)
    return NodeValue(node.id, code, bytes(node.user_data), shape, names, manifests, since).encode()


# -- transaction logs --------------------------------------------------------------------------


def _moves(moves: Iterable[MoveOperation]) -> tuple:
    return tuple(
        (m.from_path, m.to_path, m.node_id, None if m.node_type is None else NODE_TYPE_CODES[m.node_type])
        for m in moves
    )


def txlog_summary(repo: Repository, sid: str) -> tuple[bytes, dict[str, np.ndarray] | None]:
    """The ``X`` summary of what one snapshot changed since its parent (its transaction log, merged with
    its pruned ancestors' after ``expire_snapshots``; record version 2 names those, and logs no longer
    stored), and the chunk coordinates the log names per array node id (None: the log is gone)."""
    changes = repo.changes(sid)
    tx = changes.log
    value = (
        TxlogValue(*((),) * 8)
        if tx is None
        else TxlogValue(  # None: garbage collected, so no history to give
            tuple(tx.new_groups),
            tuple(tx.new_arrays),
            tuple(tx.deleted_groups),
            tuple(tx.deleted_arrays),
            tuple(tx.updated_groups),
            tuple(tx.updated_arrays),
            tuple((node_id, len(coords)) for node_id, coords in sorted(tx.updated_coords.items())),
            _moves(tx.moved_nodes),
        )
    )
    if changes.merged or changes.missing:
        value = value._replace(merged=changes.merged, missing=changes.missing, merged_moves=_moves(changes.moves))
    return value.record(sid), None if tx is None else dict(tx.updated_coords)


# -- chunk refs: a per-chunk timeline ------------------------------------------------------------


def change_records(
    node_id: str, snapshot_id: str, changed: RefBatch | None, removed: np.ndarray, chunk_ids: list[bytes] | None
) -> list[bytes]:
    """The ``C`` records of one array's refs that a snapshot adds or changes (``changed``) and removes
    (coordinates ``removed``), in key order (node id, coords, snapshot id). Native chunk ids of
    ``changed`` go to ``chunk_ids`` when it is a list."""
    head, tail = refrecords.key_head(node_id), refrecords.key_tail(snapshot_id)
    records = batch_records(changed, head, chunk_ids, tail) if changed is not None else []
    if not len(removed):
        return records
    gone = refrecords.value_head(tail, schema.REMOVED)
    tombstones = encode_rows([head, *removed.T, gone], len(removed))
    if changed is None or not records:
        return tombstones
    both = records + tombstones
    order = np.argsort(np.concatenate([coord_keys(changed.coords), coord_keys(removed)]), kind="stable")
    return [both[j] for j in order.tolist()]


def batch_records(batch: RefBatch, head: bytes, chunk_ids: list[bytes] | None, tail: bytes) -> list[bytes]:
    """The chunk ref records of one decoded batch (``head``: the key up to the coordinates tuple;
    ``tail``: what follows the coordinates' elements up to the key's end)."""
    n = len(batch.kind)
    heads = {kind: refrecords.value_head(tail, code) for kind, code in REF_KIND_CODES.items()}
    if batch.kind.count(batch.kind[0]) == n:
        return _kind_records(batch, batch.kind[0], slice(None), n, head, heads, chunk_ids)
    # Mixed kinds (rare): each kind's rows alike, then interleaved back into coordinate order.
    records: list = [None] * n
    for kind in (RefKind.INLINE, RefKind.NATIVE, RefKind.VIRTUAL):
        rows = np.flatnonzero([k is kind for k in batch.kind])
        if not len(rows):
            continue
        for j, record in zip(rows.tolist(), _kind_records(batch, kind, rows, len(rows), head, heads, chunk_ids)):
            records[j] = record
    return records


def _kind_records(
    batch: RefBatch,
    kind: RefKind,
    rows: slice | np.ndarray,
    n: int,
    head: bytes,
    heads: dict[RefKind, bytes],
    chunk_ids: list[bytes] | None,
) -> list[bytes]:
    """Records of the refs ``rows`` of ``batch``, all of ``kind`` (``heads``: the bytes from the end of
    the coordinates to the kind code, per kind)."""
    pick = (lambda column: column) if isinstance(rows, slice) else (lambda column: [column[j] for j in rows])
    key = [head, *batch.coords[rows].T, heads[kind]]
    every = np.arange(n)
    if kind is RefKind.INLINE:
        pieces = [tuples.encode_value((data,)) for data in pick(batch.inline)]
        return encode_rows([*key, (pieces, every)], n)
    numbers = [batch.offset[rows], batch.length[rows]]
    if kind is RefKind.NATIVE:
        names = pick(batch.chunk_id)
        if chunk_ids is not None:
            chunk_ids.extend(
                NATIVE % (name.encode("ascii"), offset, length)
                for name, offset, length in zip(names, numbers[0].tolist(), numbers[1].tolist())
            )
        return encode_rows([*key, ([tuples.encode_text(name) for name in names], every), *numbers], n)
    # Locations repeat (many chunks per file) and the decoder hands out one string object per distinct
    # location: encoding each object once is enough (equal strings that are distinct objects only
    # cost an encoding more).
    texts = pick(batch.location)
    first, choice = distinct(np.fromiter(map(id, texts), np.int64, n))
    locations = ([tuples.encode_text(texts[j]) for j in first.tolist()], choice)
    etags, modified = pick(batch.checksum_etag), pick(batch.checksum_last_modified)
    if etags.count(None) == n and modified.count(None) == n:
        checksums: bytes | tuple = refrecords.NO_CHECKSUMS
    else:
        seen: dict[tuple, int] = {}
        picked = [seen.setdefault(pair, len(seen)) for pair in zip(etags, modified)]
        checksums = ([tuples.encode((etag, stamp)) for etag, stamp in seen], np.array(picked, dtype=np.int64))
    return encode_rows([*key, locations, *numbers, checksums], n)


def _shard_cuts(
    chunk_id: str, offset: int, length: int, layout: ShardLayout, raw: bytes, index_records: list[bytes]
) -> list[int]:
    """The shard index record of one native shard (appended to ``index_records``) and the offsets
    its pieces are cut at (index and inner chunk bounds); nothing for an index that does not check
    out (zarr then reads the index from the shard's bytes, and reports what it finds)."""
    try:
        table = layout.entries(raw, length, f"chunks/{chunk_id}")
    except ZSCorrupt:
        return []
    index_records.append(schema.record(schema.SHARD_INDEX, (chunk_id, offset, length), (layout.at_end, raw)))
    return [offset + cut for cut in layout.cuts(table, length)]


def _shard_of(refs: list[NativeFileEntry]) -> tuple[int, int, ShardLayout] | None:
    """``(offset, length, layout)`` of the one shard the refs to a chunk file name, or None (no sharded
    ref, refs that disagree, or a range too short for its index). icechunk's refs cover the whole file."""
    sharded = {(o, n, layout) for _, o, n, layout in refs if layout is not None and n > 0}
    if len(sharded) != 1:
        return None
    offset, length, text = sharded.pop()
    layout = ShardLayout.decode(text)
    return None if layout.index_size > length else (offset, length, layout)


def chunk_file_blocks(
    storage: Storage, entries: Iterator[bytes], embed: bool, stored: bool, index_records: list[bytes], ahead: int = 64
) -> Iterator[PieceBlock]:
    """Per native chunk file the chunk refs name (``entries`` sorted, unique: see :mod:`chunkfiles <zsarchive.archive.write.chunkfiles>`):
    its shard index record into ``index_records`` when its array is sharded, and with ``embed`` its
    bytes as blocks of ``D`` pieces (``stored``: uncompressed)."""
    grouped = (
        (chunk_id, list(refs))
        for chunk_id, refs in itertools.groupby(map(NativeFileEntry.parse, entries), key=lambda e: e.chunk_id)
    )
    files = ((chunk_id, _shard_of(refs), max(e.offset + e.length for e in refs)) for chunk_id, refs in grouped)
    if not embed:
        for chunk_id, shard, _ in files:
            if shard is not None:
                offset, length, layout = shard
                start, stop = layout.index_span(length)
                raw = storage.read_range(f"chunks/{chunk_id}", offset + start, stop - start)
                _shard_cuts(chunk_id, offset, length, layout, raw, index_records)
        return iter(())
    return piece_blocks(_embedded_files(storage, files, index_records, ahead), stored)


READ_AHEAD_BYTES = 64 << 20
"""Chunk file bytes an export reads ahead of the writing, as far as the refs tell their sizes."""


def _embedded_files(
    storage: Storage, files: Iterator[tuple[str, tuple | None, int]], index_records: list[bytes], ahead: int
) -> Iterator[list[tuple[bytes, int, int]]]:
    """The piece records of each file, in order. A thread reads the files and cuts their pieces ahead
    of the writing (up to READ_AHEAD_BYTES by the sizes the refs give, and ``ahead`` files: remote
    storage downloads those concurrently); each shard index record goes into ``index_records``."""

    def load(chunk_id: str, shard: tuple | None) -> list[tuple[bytes, int, int]]:
        data = storage.read(f"chunks/{chunk_id}")
        if data is None:
            raise ZSCorrupt(
                f"{storage.name.rstrip('/')}/chunks/{chunk_id}: missing, but a chunk ref "
                f"points to native chunk {chunk_id}"
            )
        cuts: list[int] = []
        if shard is not None and shard[0] + shard[1] <= len(data):
            offset, length, layout = shard
            start, stop = layout.index_span(length)
            cuts = _shard_cuts(chunk_id, offset, length, layout, data[offset + start : offset + stop], index_records)
        return piece_records(chunk_id, data, piece_starts(len(data), cuts))

    pending: deque[tuple[Future, int]] = deque()
    queued = 0
    with ThreadPoolExecutor(1, thread_name_prefix="zsarchive-chunk-files") as pool:
        try:
            while batch := list(itertools.islice(files, ahead)):
                storage.prefetch(f"chunks/{chunk_id}" for chunk_id, _, _ in batch)
                for chunk_id, shard, size in batch:
                    while pending and queued + size > READ_AHEAD_BYTES:
                        future, held = pending.popleft()
                        queued -= held
                        yield future.result()
                    pending.append((pool.submit(load, chunk_id, shard), size))
                    queued += size
            while pending:
                yield pending.popleft()[0].result()
        finally:
            for future, _ in pending:
                future.cancel()
