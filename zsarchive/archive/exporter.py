"""Export an Icechunk repository's whole history into one ZS archive, streaming, in bounded memory.

Small families (refs, snapshots, nodes, transaction logs, per-chunk history, ops log) go through an
external sort; chunk refs stream straight out of the manifests (taken in id order, a manifest's refs
are already in key order) and embedded chunk bytes out of a second, deduplicating sort of chunk ids.
The families are chained in tag order into one ZSWriter, which writes a temporary file that is
renamed over the target only once complete and fsynced. With ``parallelism > 1`` worker processes
parse the transaction logs and manifests (the costly part) and hand back their encoded records in
run files; the bytes written do not depend on it.
"""

from __future__ import annotations

import collections
import dataclasses
import enum
import itertools
import json
import multiprocessing
import operator
import os
import pickle
import tempfile
import time
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass, field
from importlib import metadata as _pkg_metadata
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

import numpy as np

from zsarchive.archive import keys
from zsarchive.archive import schema as S
from zsarchive.archive.sorter import ExternalSorter
from zsarchive.errors import ZSError
from zsarchive.zs.format import codecs
from zsarchive.icechunk import Repository
from zsarchive.icechunk.manifest import RefBatch
from zsarchive.icechunk.model import NodeType, RefKind
from zsarchive.zs.pipeline import resolve_parallelism
from zsarchive.zs.writer import ZSWriter

CODECS = codecs.NAMES
"""Block codecs an export may use; the default, deflate, is standard ZS (any ZS reader opens the file)."""
_TASK_REFS = 250_000  # chunk refs per worker task (-j N > 1): a large manifest becomes several tasks
_VERSION = {family: bytes((version,)) for family, version in S.RECORD_VERSIONS.items()}


def exporter_version() -> str:
    """``zsarchive <version>``: the exporter that wrote an archive, recorded in its header."""
    try:
        return "zsarchive " + _pkg_metadata.version("zsarchive")
    except _pkg_metadata.PackageNotFoundError:
        return "zsarchive (unknown version)"


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


@dataclass
class ExportSummary:
    """What an export wrote."""

    path: Path
    counts: dict[str, int] = field(default_factory=dict)
    """Records written per family name."""
    size: int = 0
    seconds: float = 0.0


def _small_family_records(repo: Repository, refs: list[bytes], sorter: ExternalSorter,
                          txlogs: list[tuple[str, int]]) -> dict[str, int]:
    """Refs into ``refs`` (they precede the chunk refs in the file); repo facts, snapshots, nodes
    and the ops log into ``sorter`` (they follow them).

    Appends to ``txlogs`` the (snapshot id, flushed_at) whose transaction log is to be read, and
    returns the manifests the nodes use: id -> number of chunk refs (for the progress total).
    """
    manifest_ids: dict[str, int] = {}
    info = repo.repo_info()
    add = sorter.add
    record = S.record
    for name, sid in repo.branches().items():
        refs.append(record(S.REFS, ("branch", name), (sid,)))
    for name, sid in repo.tags().items():
        refs.append(record(S.REFS, ("tag", name), (sid,)))
    for name in repo.deleted_tags():
        refs.append(record(S.REFS, ("deleted_tag", name), (None,)))

    facts = {
        "spec_version": info.spec_version,
        "metadata": info.metadata,
        "config": info.config,
        "status": info.status,
        "feature_flags": {"enabled": info.enabled_feature_flags, "disabled": info.disabled_feature_flags},
    }
    for name, value in facts.items():
        add(record(S.REPO, (name,), (to_json(value),)))

    for info_snap in sorted(repo.snapshots(), key=lambda s: s.id):
        sid = info_snap.id
        snap = repo.snapshot(sid)
        add(record(S.SNAPSHOT, (sid,), (
            info_snap.parent_id, info_snap.flushed_at, info_snap.message, to_json(info_snap.metadata),
            tuple((m.id, m.size_bytes, m.num_chunk_refs) for m in snap.manifest_files),
        )))
        add(record(S.SNAPSHOT_TIME, (info_snap.flushed_at, sid)))
        if info_snap.parent_id is not None:
            add(record(S.CHILDREN, (info_snap.parent_id, sid)))
        sizes = {m.id: m.num_chunk_refs for m in snap.manifest_files}
        for node in snap.nodes:
            add(record(S.NODE, (sid, S.path_components(node.path)), _node_value(node)))
            for mref in node.manifests:
                manifest_ids[mref.id] = sizes.get(mref.id, 0)
        if info_snap.parent_id is not None:  # the initial snapshot's log is empty (V1 repos may lack it)
            txlogs.append((sid, info_snap.flushed_at))

    updates = list(repo.ops_log())
    for position, update in enumerate(updates):
        seq = len(updates) - 1 - position  # 0 = oldest: a stable tie-breaker for equal times
        add(record(S.OPS, (update.updated_at, seq), (update.type, update.backup_path, to_json(update.details))))
    return manifest_ids


def _txlog_records(repo: Repository, sid: str, flushed_at: int) -> tuple[bytes, list[bytes]]:
    """The transaction-log summary record of one snapshot, and its chunk history records (sorted)."""
    tx = repo.transaction_log(sid)
    summary = S.record(S.TXLOG, (sid,), (
        tuple(tx.new_groups), tuple(tx.new_arrays), tuple(tx.deleted_groups),
        tuple(tx.deleted_arrays), tuple(tx.updated_groups), tuple(tx.updated_arrays),
        tuple((node_id, len(coords)) for node_id, coords in sorted(tx.updated_chunks.items())),
        tuple((m.from_path, m.to_path, m.node_id,
               None if m.node_type is None else (S.ARRAY if m.node_type is NodeType.ARRAY else S.GROUP))
              for m in tx.moved_nodes),
    ))
    # One record per changed chunk (millions in a big commit): keys are built a batch at a time.
    tail = b"\x00" + keys.encode((flushed_at, sid)) + b"\x00" + _VERSION[S.CHUNK_HISTORY]
    history: list[bytes] = []
    for node_id, coords in sorted(tx.updated_coords.items()):
        head = S.CHUNK_HISTORY + keys.encode_text(node_id) + b"\x05"
        history.extend(keys.encode_rows([head, *coords.T, tail], len(coords)))
    return summary, history


def _node_value(node) -> tuple:
    if node.node_type is NodeType.GROUP:
        return (node.id, S.GROUP, bytes(node.user_data), None, None, ())
    shape = tuple((d.array_length, d.chunk_length, d.num_chunks) for d in node.shape or ())
    names = None if node.dimension_names is None else tuple(node.dimension_names)
    manifests = tuple((m.id, tuple(tuple(e) for e in m.extents)) for m in node.manifests)
    return (node.id, S.ARRAY, bytes(node.user_data), shape, names, manifests)


def _manifest_records(repo: Repository, manifest_id: str, chunk_ids: list[bytes] | None, first: int = 0,
                      stop: int | None = None) -> Iterator[list[bytes]]:
    """Chunk refs ``first`` to ``stop`` (default: all; numbered across the manifest's arrays in order)
    of one manifest, in key order (manifest id, node id, coords), in batches.

    The hot loop of an export (one record per ref): records are assembled a batch at a time from the
    decoder's columns (tests check they equal the general encoder's). Native chunk ids go to
    ``chunk_ids`` when it is a list.
    """
    manifest = repo.manifest(manifest_id)
    before = 0  # refs of the arrays before this one
    for array in manifest.arrays:
        lo = max(first - before, 0)
        hi = None if stop is None else stop - before
        before += array.num_chunk_refs
        if lo >= array.num_chunk_refs or (hi is not None and hi <= lo):
            continue
        head = S.CHUNK_REF + keys.encode((manifest_id, array.node_id)) + b"\x05"
        for batch in manifest.source.ref_batches(array.node_id, lo, hi):
            yield _ref_records(batch, head, chunk_ids)


# Closes the coordinates tuple and the key, then starts the value.
_REF_HEADS = {kind: b"\x00\x00" + _VERSION[S.CHUNK_REF] + keys.encode_int(code)
              for kind, code in ((RefKind.VIRTUAL, S.VIRTUAL), (RefKind.NATIVE, S.NATIVE), (RefKind.INLINE, S.INLINE))}


def _ref_records(batch: RefBatch, head: bytes, chunk_ids: list[bytes] | None) -> list[bytes]:
    """The chunk ref records of one decoded batch (``head``: the key up to the coordinates tuple)."""
    n = len(batch.kind)
    if batch.kind.count(batch.kind[0]) == n:
        return _kind_records(batch, batch.kind[0], slice(None), n, head, chunk_ids)
    # Mixed kinds (rare): each kind's rows alike, then interleaved back into coordinate order.
    records: list = [None] * n
    for kind in (RefKind.INLINE, RefKind.NATIVE, RefKind.VIRTUAL):
        rows = np.flatnonzero([k is kind for k in batch.kind])
        if not len(rows):
            continue
        for j, record in zip(rows.tolist(), _kind_records(batch, kind, rows, len(rows), head, chunk_ids)):
            records[j] = record
    return records


def _kind_records(batch: RefBatch, kind: RefKind, rows: slice | np.ndarray, n: int, head: bytes,
                  chunk_ids: list[bytes] | None) -> list[bytes]:
    """Records of the refs ``rows`` of ``batch``, all of ``kind``."""
    pick = (lambda column: column) if isinstance(rows, slice) else (lambda column: [column[j] for j in rows])
    key = [head, *batch.coords[rows].T, _REF_HEADS[kind]]
    every = np.arange(n)
    if kind is RefKind.INLINE:
        pieces = [keys.encode_value((data,)) for data in pick(batch.inline)]
        return keys.encode_rows([*key, (pieces, every)], n)
    numbers = [batch.offset[rows], batch.length[rows]]
    if kind is RefKind.NATIVE:
        names = pick(batch.chunk_id)
        if chunk_ids is not None:
            chunk_ids.extend(name.encode("ascii") for name in names)
        return keys.encode_rows([*key, ([keys.encode_text(name) for name in names], every), *numbers], n)
    # Locations repeat (many chunks per file) and the decoder hands out one string object per distinct
    # location: encoding each object once is enough (equal strings that are distinct objects only
    # cost an encoding more).
    texts = pick(batch.location)
    _ids, first, choice = np.unique(np.fromiter(map(id, texts), np.int64, n), return_index=True,
                                    return_inverse=True)
    locations = ([keys.encode_text(texts[j]) for j in first.tolist()], choice)
    etags, modified = pick(batch.checksum_etag), pick(batch.checksum_last_modified)
    if etags.count(None) == n and modified.count(None) == n:
        checksums: bytes | tuple = b"\x03\x03"
    else:
        seen: dict[tuple, int] = {}
        picked = [seen.setdefault(pair, len(seen)) for pair in zip(etags, modified)]
        checksums = ([keys.encode((etag, stamp)) for etag, stamp in seen], np.array(picked, dtype=np.int64))
    return keys.encode_rows([*key, locations, *numbers, checksums], n)


# -- worker processes (-j N > 1): each task reads one file of the repository and spills its records --

_WORKER_REPOS: dict[str, Repository] = {}


def _worker_repo(location: str) -> Repository:
    repo = _WORKER_REPOS.get(location)
    if repo is None:
        repo = _WORKER_REPOS[location] = Repository.open(location)
    return repo


def _write_run(batches: Iterable[list[bytes]], path: str) -> int:
    """Spill record batches to a run file, pickled (loading a batch is C-speed, a loop is not)."""
    count = 0
    with open(path, "wb") as out:
        for batch in batches:
            pickle.dump(batch, out, protocol=pickle.HIGHEST_PROTOCOL)
            count += len(batch)
    return count


def _read_batches(path: str) -> Iterator[list[bytes]]:
    """The record batches of a run file (our own, just written), then the file is removed."""
    with open(path, "rb") as run:
        while True:
            try:
                yield pickle.load(run)
            except EOFError:
                break
    os.unlink(path)


def _manifest_task(location: str, manifest_id: str, first: int, stop: int | None, path: str, want_ids: bool) -> int:
    """Chunk ref records ``first`` to ``stop`` of one manifest into run ``path``; their native chunk ids
    into ``path.ids``."""
    ids: list[bytes] | None = [] if want_ids else None
    count = _write_run(_manifest_records(_worker_repo(location), manifest_id, ids, first, stop), path)
    if ids is not None:
        # On disk rather than in the result: finished tasks wait for the writer, memory must not.
        _write_run([ids], path + ".ids")
    return count


def _txlog_task(location: str, sid: str, flushed_at: int, path: str) -> tuple[bytes, int]:
    summary, history = _txlog_records(_worker_repo(location), sid, flushed_at)
    return summary, _write_run([history], path)


def _batched(records: Iterable[bytes], size: int = 65536) -> Iterator[list[bytes]]:
    """``records`` in lists of at most ``size``."""
    records = iter(records)
    while batch := list(itertools.islice(records, size)):
        yield batch


def _chunk_data_records(repo_root: Path, chunk_ids: ExternalSorter) -> Iterator[bytes]:
    """Each native chunk file once, keyed by chunk id."""
    for raw_id in chunk_ids.sorted():
        chunk_id = raw_id.decode("ascii")
        path = repo_root / "chunks" / chunk_id
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise ZSError(f"{path}: cannot read native chunk {chunk_id}: {exc.strerror or exc}") from None
        yield S.record(S.CHUNK_DATA, (chunk_id,), (data,))


def _repo_root(location: str) -> Path:
    return Path(location[len("file://"):] if location.startswith("file://") else location)


def export(repo_location: str | os.PathLike, archive_path: str | os.PathLike, *, codec: str = "deflate",
           compress_level: int | str | None = None, include_chunks: bool = False, parallelism: int | str = 1,
           approx_block_size: int = 256 * 1024, branching_factor: int = 1024,
           export_time: int | None = None, progress: Callable[[int, int], None] | None = None,
           sort_memory: int = 128 << 20) -> ExportSummary:
    """Export the repository at ``repo_location`` into a new archive at ``archive_path``.

    ``progress(done, total)`` is called now and then with counts of records (chunk refs dominate).
    ``export_time`` (microseconds since 1970 UTC) defaults to now: it is the only field of the
    archive that differs between two exports of the same repository. ``parallelism``: worker
    processes decoding and threads compressing, or ``"guess"`` (one per core).
    """
    parallelism = resolve_parallelism(parallelism)
    if codec not in CODECS:
        raise ZSError(f"unknown codec {codec!r}: choose one of {', '.join(CODECS)}")
    started = time.monotonic()
    target = Path(archive_path)
    if target.is_dir():
        raise ZSError(f"{target}: is a directory, not an archive file name")
    location = os.fspath(repo_location)
    repo = Repository.open(location)
    if export_time is None:
        export_time = time.time_ns() // 1000
    target_dir = target.resolve().parent
    if not target_dir.is_dir():
        raise ZSError(f"{target}: directory {target_dir} does not exist")
    tmp = target_dir / f".{target.name}.{os.getpid()}.partial"

    # Small families hold no duplicate records; chunk ids repeat (one file, many refs) and are deduplicated.
    sorter = ExternalSorter(max_bytes=sort_memory, tmpdir=str(target_dir), unique=False)
    chunk_ids = ExternalSorter(max_bytes=sort_memory // 4, tmpdir=str(target_dir)) if include_chunks else None
    work = tempfile.TemporaryDirectory(dir=target_dir, prefix=f".{target.name}.work-")
    pool: ProcessPoolExecutor | None = None
    try:
        refs: list[bytes] = []
        txlogs: list[tuple[str, int]] = []
        manifest_refs = _small_family_records(repo, refs, sorter, txlogs)
        manifests = sorted(manifest_refs)
        manifest_futures: list[list[Future]] = []
        tx_futures: list[Future] = []
        if parallelism > 1 and len(txlogs) + len(manifests) > 1:
            # Parsing transaction logs and manifests dominates: worker processes do it (the GIL
            # would serialise threads), spilling encoded records to run files read back in order.
            # Chunk refs come first in the file, so writing them overlaps parsing the logs.
            pool = ProcessPoolExecutor(max_workers=parallelism, mp_context=multiprocessing.get_context("fork"))
            tx_futures = [pool.submit(_txlog_task, location, sid, flushed, os.path.join(work.name, f"t{i}"))
                          for i, (sid, flushed) in enumerate(txlogs)]
            # A large manifest is split into ranges of refs, so every worker decodes part of it and the
            # writer starts on the first range while later ones are decoded.
            for i, mid in enumerate(manifests):
                cuts = list(range(0, manifest_refs[mid], _TASK_REFS))[1:]
                manifest_futures.append([
                    pool.submit(_manifest_task, location, mid, lo, hi, os.path.join(work.name, f"m{i}.{k}"),
                                include_chunks)
                    for k, (lo, hi) in enumerate(zip([0] + cuts, cuts + [None]))])

        total = len(refs) + sorter.count + sum(manifest_refs.values())
        done = 0

        def tick(n: int) -> None:
            nonlocal done
            done += n
            if progress is not None:
                progress(done, total)

        def later_families() -> Iterator[bytes]:
            """Families after the chunk data: the sorter, once the transaction logs are in it."""
            nonlocal total
            before = sorter.count
            if tx_futures:
                for i, future in enumerate(tx_futures):
                    summary, _ = future.result()
                    sorter.add(summary)
                    for batch in _read_batches(os.path.join(work.name, f"t{i}")):
                        sorter.extend(batch)
            else:
                for sid, flushed in txlogs:
                    summary, history = _txlog_records(repo, sid, flushed)
                    sorter.add(summary)
                    sorter.extend(history)
            total += sorter.count - before
            yield from sorter.sorted()

        tally: collections.Counter[int] = collections.Counter()  # records written per family tag
        first_byte = operator.itemgetter(0)

        def counted(batches: Iterable[list[bytes]]) -> Iterator[list[bytes]]:
            for batch in batches:
                tally.update(map(first_byte, batch))
                yield batch
                tick(len(batch))

        def chunk_refs() -> Iterator[list[bytes]]:
            for i, manifest_id in enumerate(manifests):
                if manifest_futures:
                    for k, future in enumerate(manifest_futures[i]):
                        future.result()
                        run = os.path.join(work.name, f"m{i}.{k}")
                        yield from _read_batches(run)
                        if chunk_ids is not None:
                            for batch in _read_batches(run + ".ids"):
                                chunk_ids.extend(batch)
                else:
                    ids = [] if chunk_ids is not None else None
                    yield from _manifest_records(repo, manifest_id, ids)
                    if ids:
                        chunk_ids.extend(ids)

        def chunk_data() -> Iterator[bytes]:
            if chunk_ids is not None:
                yield from _chunk_data_records(_repo_root(location), chunk_ids)

        counts: dict[str, int] = {}

        def header() -> Iterator[bytes]:
            info = repo.repo_info()
            counts.update((S.FAMILY_NAMES[bytes((tag,))], n) for tag, n in sorted(tally.items()))
            yield [S.record(S.HEADER, (), (
                S.FORMAT_VERSION, info.spec_version, export_time, exporter_version(),
                tuple(sorted(counts.items())),
            ))]

        # Records travel in lists: per-record work stays in C (counting, cutting into blocks).
        lists = itertools.chain(counted(_batched(sorted(refs))), counted(chunk_refs()), counted(_batched(chunk_data())),
                                counted(_batched(later_families())), header())
        metadata = {S.METADATA_KEY: {"format_version": S.FORMAT_VERSION,
                                     "source_spec_version": repo.spec_version}}
        with ZSWriter(os.fspath(tmp), metadata, codec=codec, compress_level=compress_level,
                      parallelism=parallelism, approx_block_size=approx_block_size,
                      branching_factor=branching_factor, include_default_metadata=False) as writer:
            writer.add_record_lists(lists)
            writer.finish()  # fsyncs the file, then marks it complete
        os.replace(tmp, target)
        _fsync_dir(target_dir)
    except OSError as exc:  # disk full, permissions...: nothing that looks like an archive stays
        _remove_quietly(tmp)
        raise ZSError(f"{target}: export failed: {exc.strerror or exc}"
                      f"{f' ({exc.filename})' if exc.filename else ''}") from None
    except BaseException:
        _remove_quietly(tmp)
        raise
    finally:
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)
        work.cleanup()
        sorter.close()
        if chunk_ids is not None:
            chunk_ids.close()
    return ExportSummary(path=target, counts=counts, size=target.stat().st_size,
                         seconds=time.monotonic() - started)


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _remove_quietly(path: Path) -> None:
    try:
        path.unlink()
    except FileNotFoundError:
        pass
