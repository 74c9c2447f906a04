"""Export an Icechunk repository's whole history into one ZS archive, streaming, in bounded memory.

:func:`export` is a pipeline of named stages, read top to bottom:

1. :func:`plan_export` — what to read: the snapshots, their transaction logs, and each array whose
   manifests differ from the ones it had in the parent snapshot (an *array change*);
2. :func:`gather_metadata` — refs, repository facts, snapshots, nodes and the ops log;
3. :func:`decode_changes` and :func:`gather_txlogs` — what each array change adds, changes and
   removes (two sorted ref streams merged, :mod:`refdelta <zsarchive.archive.write.refdelta>`) and the
   transaction logs, computed by an :mod:`engine <zsarchive.archive.write.engine>` (this process, or
   worker processes in parallel);
4. :func:`merge_families` — every family in tag order: small families through an external sort,
   the chunk ref timeline array by array (sorted across an array's changes), then per native chunk
   file from a deduplicating sort of the files the refs name: its shard index (sharded arrays) and,
   with ``include_chunks``, its bytes in pieces, blocks of their own; the header last;
5. :func:`write_archive` — a ZSWriter into a temporary file renamed over the target once complete.

The bytes written do not depend on the engine or on ``parallelism``.
"""

from __future__ import annotations

import collections
import contextlib
import functools
import itertools
import operator
import os
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Iterator, Mapping

from zsarchive.archive.write import records as repo_records
from zsarchive.archive.format import schema
from zsarchive.archive.format.header import ArchiveHeader, full_format, keeps_file_forms, marker_metadata
from zsarchive.archive.write.history import Digest, HistoryTally, digest, exception_records, log_digests
from zsarchive.archive.write import virtualdata, virtualshards
from zsarchive.archive.write.virtualdata import KeptRanges, VirtualReport
from zsarchive.archive.write.chunkfiles import is_virtual, with_layout
from zsarchive.archive.read.chunkdata import ChunkReader
from zsarchive.archive.format.pieces import PieceBlock
from zsarchive.archive.write.engine import Batches, Engine, InProcess, open_engine
from zsarchive.archive.write.refdelta import array_changes
from zsarchive.archive.format.shards import shard_layout
from zsarchive.archive.write.sorter import ExternalSorter
from zsarchive.errors import ZSCorrupt, ZSError
from zsarchive.icechunk import Repository
from zsarchive.icechunk.model import NodeType, SnapshotInfo
from zsarchive.walk import parent_chain
from zsarchive.io.location import Location
from zsarchive.io.outfile import whole_file
from zsarchive.zs.format import codecs
from zsarchive.zs.pipeline import resolve_parallelism
from zsarchive.zs.writer import BlockCutter, BuiltBlock, ZSWriter, build_data_block

CODECS = codecs.NAMES
"""Block codecs an export may use; the default, deflate, is standard ZS (any ZS reader opens the file)."""
CHUNK_CODECS = ("none", "same")
"""How blocks of embedded chunk bytes are written: uncompressed (the default), or with the archive's codec."""
_TASK_REFS = 250_000  # chunk refs per decoding task: an array's large first manifest becomes several tasks
_MAX_SPLIT = 64  # decoding tasks one manifest becomes at most
_DIFF_TASK_SHARE = 4  # a diff against the parent's manifest: ranges this many times larger (see change_tasks)


def exporter_version() -> str:
    """``zsarchive <version>``: the exporter that wrote an archive, recorded in its header."""
    return _version_lookup().result()


@functools.cache
def _version_lookup() -> Future:
    """The exporter's version, looked up in a thread the first call starts: importing importlib.metadata
    and reading the package's metadata take ~15 ms, which an export's decoding hides."""
    pool = ThreadPoolExecutor(1)
    future = pool.submit(_installed_version)
    pool.shutdown(wait=False)
    return future


def _installed_version() -> str:
    from importlib import metadata  # here, and in a thread: see _version_lookup

    try:
        return "zsarchive " + metadata.version("zsarchive")
    except metadata.PackageNotFoundError:
        return "zsarchive (unknown version)"


@dataclass
class ExportSummary:
    """What an export wrote."""

    path: Path
    counts: dict[str, int] = field(default_factory=dict)
    """Records written per family name."""
    size: int = 0
    seconds: float = 0.0
    left_out: dict[str, str] = field(default_factory=dict)
    """Snapshot id -> why it is not in the archive (see :func:`unreadable_snapshots`)."""
    unindexed: virtualshards.Skipped = field(default_factory=virtualshards.Skipped)
    """Virtual shards whose index the archive does not keep, and why (the first)."""
    virtual: VirtualReport | None = None
    """What the export did with the bytes of virtual chunk refs (``include_virtual``)."""


class Scope:
    """What an export writes of what it reads: here everything, a full archive. A fragment's scope
    (:mod:`zsarchive.archive.write.incremental`) writes what its base lacks."""

    blocks_allowed = True
    """Whether chunk refs may reach the writer as built blocks (a fragment's scope reads every record)."""
    view_format = schema.FULL_FORMAT
    """The format the records follow (a fragment's: its base's)."""

    def __init__(self, include_virtual: bool = False, kept: KeptRanges | None = None) -> None:
        self.view_format = full_format(include_virtual)
        self._kept = kept or KeptRanges()

    def kept_virtual(self) -> KeptRanges:
        """The virtual ranges the archive keeps already (a full archive: none, unless it is made to be
        compared with an archive whose ranges it takes)."""
        return self._kept

    def small_family(self, family: bytes, records: list[bytes]) -> list[bytes]:
        """The records to write of a small family (refs, repository facts, ops log), in any order."""
        return records

    def unheld(self, family: bytes, records: list[bytes]) -> list[bytes]:
        """The records of ``family`` (keyed by something immutable: a file's path) whose key the archive
        does not hold yet: here all of them."""
        return records

    def chunk_files_to_write(self, entries: Iterable[bytes]) -> Iterable[bytes]:
        """The native chunk files (sorted ``chunk id offset length [layout]`` entries) to write."""
        return entries

    def shards_to_index(self, entries: Iterable[bytes]) -> Iterable[bytes]:
        """The virtual ranges (:mod:`virtualshards <zsarchive.archive.write.virtualshards>` entries) whose
        shard index to keep, if they are shards."""
        return entries

    def to_writer(self, lists: Iterable[list[bytes]]) -> Iterable[list[bytes]]:
        """The record lists on their way to the writer."""
        return lists

    def header(self, version: int, spec_version: int, export_time: int, counts: dict[str, int]) -> bytes:
        """The archive header record (``counts``: records written per family name)."""
        return ArchiveHeader(version, spec_version, export_time, exporter_version(), counts).record()

    def metadata(self, version: int, spec_version: int) -> dict:
        """The ZS header metadata."""
        return marker_metadata(version, spec_version)


# -- 1. plan -------------------------------------------------------------------------------------

@dataclass(frozen=True)
class ArrayChange:
    """An array whose chunk refs a snapshot may change: its manifests there and in the parent."""

    snapshot_id: str
    node_id: str
    manifests: tuple
    """(manifest id, extents) of the array in the snapshot."""
    base: tuple
    """The same in the parent snapshot; () where the array's timeline starts (no such array there)."""
    refs: int
    """Chunk refs the snapshot's manifests hold (all arrays), an upper bound for splitting tasks."""
    shard: str | None = None
    """The array's shard layout in the snapshot (ShardLayout.encode), if it is sharded."""


@dataclass
class ExportPlan:
    """What an export reads: every file of the repository it needs, named before any is decoded."""

    snapshots: list[SnapshotInfo]
    """Every snapshot, in id order."""
    txlogs: list[tuple[str, int]]
    """(snapshot id, flushed_at) of each transaction log to read: all but the initial snapshot's
    (that log is empty; V1 repositories may lack it)."""
    changes: list[ArrayChange]
    """Every array whose manifests differ from its parent's, by (node id, snapshot id)."""
    since: dict[str, dict[str, str]]
    """Snapshot id -> array node id -> the snapshot its chunk ref timeline starts at."""
    left_out: dict[str, str]
    """Snapshot id -> why the export leaves it out (see :func:`unreadable_snapshots`)."""

    def change_tasks(self, task_refs: int) -> list[tuple[ArrayChange, int, int | None]]:
        """(change, first ref, stop ref or None) in file order: an array's manifest, when it is the only
        one (and the parent's too, if any), splits into ranges of refs so that several workers decode it
        (and diff it against the parent's) and writing starts on the first range while later ones are
        decoded. The ranges of a diff are :data:`_DIFF_TASK_SHARE` times larger: each decompresses both
        whole manifests (a zstd frame is read from its start), which costs about what comparing a
        million refs of them does."""
        out: list[tuple[ArrayChange, int, int | None]] = []
        for change in self.changes:
            # the count comes from the snapshot file: however large it claims, a manifest is cut at most
            # _MAX_SPLIT ways (ranges past its real end decode to nothing)
            step = max(task_refs * (_DIFF_TASK_SHARE if change.base else 1), -(-change.refs // _MAX_SPLIT))
            cuts = list(range(0, change.refs, step))[1:] if len(change.manifests) == 1 and len(change.base) <= 1 else []
            out += [(change, lo, hi) for lo, hi in zip([0] + cuts, cuts + [None])]
        return out


def _parents_first(snapshots: list[SnapshotInfo]) -> list[SnapshotInfo]:
    """The snapshots, each after its parent (ZSCorrupt if parent links loop)."""
    by_id = {s.id: s for s in snapshots}
    done: set[str] = set()
    out: list[SnapshotInfo] = []
    for info in snapshots:
        chain: list[SnapshotInfo] = []
        for sid in parent_chain(info.id, lambda sid: by_id[sid].parent_id,
                                lambda _: ZSCorrupt(f"the parent chain of snapshot {info.id} loops")):
            if sid in done or sid not in by_id:
                break
            chain.append(by_id[sid])
        done.update(item.id for item in chain)
        out += reversed(chain)
    return out


def unreadable_snapshots(repo: Repository, snapshots: list[SnapshotInfo]) -> dict[str, str]:
    """Snapshots no branch or tag reaches whose manifests garbage collection removed (icechunk 1.1
    leaves such snapshot files behind; icechunk cannot open them either), with the reason."""
    parents = {info.id: info.parent_id for info in snapshots}
    reachable: set[str] = set()
    for tip in {*repo.branches().values(), *repo.tags().values()}:
        for sid in parent_chain(tip, parents.get):  # each snapshot walked once
            if sid in reachable:
                break
            reachable.add(sid)
    stray = [info.id for info in snapshots if info.id not in reachable]
    if not stray or not repo.storage.can_list:
        return {}
    stored = set(repo.storage.list("manifests"))
    out = {}
    for sid in stray:
        gone = [m.id for m in repo.snapshot(sid).manifest_files if m.id not in stored]
        if gone:
            out[sid] = f"no branch or tag reaches it and its manifest {gone[0]} is no longer in the repository"
    return out


def plan_export(repo: Repository, skip: frozenset[str] = frozenset(),
                known: dict[str, tuple[dict[str, tuple], dict[str, str]]] | None = None) -> ExportPlan:
    """Read the snapshot files and list what else the export must read: the transaction logs, and
    each array whose manifests differ from those it had in the parent snapshot. A fragment's plan
    ``skip``s the snapshots its base holds; ``known`` gives those that are parents of new ones, each
    as (array node id -> manifests, array node id -> timeline start)."""
    snapshots = sorted(repo.snapshots(), key=lambda s: s.id)
    fresh = [info for info in snapshots if info.id not in skip]
    repo.prefetch("snapshots", [info.id for info in _parents_first(fresh)])
    left_out = unreadable_snapshots(repo, fresh)
    snapshots = [info for info in fresh if info.id not in left_out]
    order = _parents_first(snapshots)
    known = known or {}
    arrays: dict[str, dict[str, tuple]] = {sid: here for sid, (here, _) in known.items()}
    since: dict[str, dict[str, str]] = {sid: starts for sid, (_, starts) in known.items()}
    planned = {s.id for s in snapshots} | set(known)
    changes: list[ArrayChange] = []
    for info in order:
        snap = repo.snapshot(info.id)
        # no ref takes fewer than 4 bytes of its manifest file (its offset in the refs vector)
        refs = sum(min(m.num_chunk_refs, m.size_bytes // 4) for m in snap.manifest_files)
        array_nodes = [node for node in snap.nodes if node.node_type is NodeType.ARRAY]
        here = arrays[info.id] = {node.id: tuple((m.id, tuple(tuple(e) for e in m.extents)) for m in node.manifests)
                                  for node in array_nodes}
        layouts = {node.id: shard_layout(node.user_data) for node in array_nodes}
        parent = info.parent_id if info.parent_id in planned else None
        before, starts = arrays.get(parent, {}), since.get(parent, {})
        since[info.id] = {}
        for node_id, manifests in here.items():
            base = before.get(node_id, ())
            since[info.id][node_id] = starts[node_id] if node_id in before else info.id
            if manifests != base:
                layout = layouts[node_id]
                changes.append(ArrayChange(info.id, node_id, manifests, base, refs,
                                           None if layout is None else layout.encode()))
    txlogs = [(info.id, info.flushed_at) for info in snapshots if info.parent_id is not None]
    changes.sort(key=lambda c: (c.node_id, c.snapshot_id))
    return ExportPlan(snapshots, txlogs, changes, since, left_out)


# -- 2. gather -----------------------------------------------------------------------------------

def gather_metadata(repo: Repository, plan: ExportPlan, sorter: ExternalSorter, scope: Scope | None = None) -> list[bytes]:
    """Return the refs (they precede the chunk refs in the file); put repository facts, snapshots,
    nodes and the ops log into ``sorter`` (they follow them)."""
    scope = scope or Scope()
    sorter.extend(scope.small_family(schema.REPO, repo_records.repo_fact_records(repo, scope.view_format)))
    for info in plan.snapshots:
        sorter.extend(repo_records.snapshot_records(repo, info, plan.since[info.id]))
    sorter.extend(scope.small_family(schema.OPS, repo_records.ops_records(repo)))
    return scope.small_family(schema.REFS, repo_records.ref_records(repo, scope.view_format))


def file_form_records(repo: Repository, plan: ExportPlan, scope: Scope) -> list[bytes]:
    """The ``Y`` records (format 6) of every metadata file the plan's snapshots need that the archive
    lacks (a fragment's base holds the others: the files are immutable); made last, when this process
    has read the files it reads and every task has handed back the forms of those its worker read
    (:mod:`zsarchive.archive.write.engine`), so that only files no one read yet are read now."""
    if not keeps_file_forms(scope.view_format):
        return []
    logged = {sid for sid, _ in plan.txlogs}  # the logs an export reads: not the first snapshot's
    keys = []
    for info in plan.snapshots:
        keys.append(f"snapshots/{info.id}")
        if info.id in logged:
            keys += [f"transactions/{sid}" for sid in (*info.pruned_tx_logs, info.id)]
        keys += [f"manifests/{m.id}" for m in repo.snapshot(info.id).manifest_files]
    return scope.unheld(schema.FILES, repo_records.file_records(repo, dict.fromkeys(keys)))


def prefetch_inputs(repo: Repository, plan: ExportPlan, engine: Engine) -> None:
    """When this process decodes, name the manifests and transaction logs in the order it will read
    them, each once, so that remote storage downloads ahead of decoding."""
    if not isinstance(engine, InProcess):
        return  # worker processes read their own inputs, in parallel
    manifests = dict.fromkeys(m for change in plan.changes for m, _ in (*change.manifests, *change.base))
    repo.prefetch("manifests", manifests)
    pruned = {info.id: info.pruned_tx_logs for info in plan.snapshots}
    repo.prefetch("transactions", [log for sid, _ in plan.txlogs for log in (*pruned[sid], sid)])


def _txlog_task(repo: Repository, sid: str, flushed_at: int) -> Iterator[tuple[list[bytes], dict[str, Digest]]]:
    summary, logged = repo_records.txlog_summary(repo, sid)
    yield [summary], log_digests(logged)


def gather_txlogs(engine: Engine, plan: ExportPlan) -> list[Batches]:
    """Start reading every transaction log: per log, its summary record and the digests of the chunks it
    names per array (:mod:`zsarchive.archive.write.history`)."""
    return engine.start(_txlog_task, plan.txlogs)


# -- 3. decode -----------------------------------------------------------------------------------

@dataclass(frozen=True)
class BlockPlan:
    """How a task cuts its chunk ref records into data blocks of its own — the writer's rule, restarted
    at every task, so the cuts do not depend on where the task runs — and, given a codec, compresses
    them itself (worker processes, a cluster) instead of leaving that to the writer's threads."""

    approx_block_size: int
    codec: str | None = None
    compress_level: int | str | None = None

    def compressor(self) -> Callable[[bytes], bytes] | None:
        """The task's compression function, or None where the writer compresses."""
        return None if self.codec is None else codecs.get_codec(self.codec, self.compress_level).compress

    @staticmethod
    def blocks(records: list[bytes], cutter: BlockCutter, compress: Callable[[bytes], bytes] | None) -> list:
        """The blocks ``records`` complete (all that is left, with an empty list)."""
        cut = list(cutter.cut(records)) if records else [cutter.flush()]
        if compress is None:
            return [OneBlock(block) for block in cut if block]
        return [build_data_block(block, None, compress) for block in cut if block]


class OneBlock(list):
    """Records the writer writes as exactly one data block (a task cut them)."""


def _change_task(repo: Repository, change: ArrayChange, first: int, stop: int | None,
                 want_ids: bool, cut: BlockPlan | None = None,
                 virtual: bool = False) -> Iterator[tuple[list, list[bytes], Digest]]:
    """(chunk ref records, chunk file entries, digest of their coordinates) batches of what ``change``
    adds, changes and removes (refs ``first`` to ``stop`` of its one manifest when ``stop`` is given);
    the entries name the native chunk files and the virtual ranges of a sharded array (``virtual``: of
    every array). With ``cut``, the records come as data blocks (:class:`OneBlock` or ``BuiltBlock``)."""
    where = f"snapshot {change.snapshot_id} (array {change.node_id})"
    cutter = None if cut is None else BlockCutter(cut.approx_block_size)
    compress = None if cut is None else cut.compressor()
    for changed, removed in array_changes(repo, change.node_id, change.manifests, change.base, where, first, stop):
        ids: list[bytes] | None = [] if want_ids else None
        records = repo_records.change_records(change.node_id, change.snapshot_id, changed, removed, ids)
        if changed is not None and (change.shard is not None or virtual):
            ids += virtualshards.entries(changed)
        coords = (digest(changed.coords) if changed is not None else Digest()) + digest(removed)
        yield (records if cutter is None else BlockPlan.blocks(records, cutter, compress)), ids or [], coords
    if cutter is not None:
        yield BlockPlan.blocks([], cutter, compress), [], Digest()


def decode_changes(engine: Engine, plan: ExportPlan, include_chunks: bool, cut: BlockPlan | None = None,
                   include_virtual: bool = False) -> list[tuple[ArrayChange, Batches]]:
    """Start computing every array change (batches of chunk ref records, and the native chunk files
    and virtual ranges they name where those are embedded or are shards). The records of an array that one snapshot
    changes are written as computed; with ``cut``, the tasks of such an array in a large manifest
    cut (and compress) them into blocks (small arrays' records share blocks, as the writer cuts them)."""
    tasks = plan.change_tasks(_TASK_REFS)
    changed_by = collections.Counter(change.node_id for change in plan.changes)

    def block_plan(change: ArrayChange) -> BlockPlan | None:
        return cut if changed_by[change.node_id] == 1 and change.refs >= _TASK_REFS else None
    return list(zip([change for change, _, _ in tasks],
                    engine.start(_change_task, [(*task, include_chunks or include_virtual or task[0].shard is not None,
                                                 block_plan(task[0]), include_virtual) for task in tasks])))


# -- 4. sort and merge ---------------------------------------------------------------------------

class _Tally:
    """Records written per family tag, and progress reports as they pass."""

    def __init__(self, total: int, progress: Callable[[int, int], None] | None):
        self.counts: collections.Counter[int] = collections.Counter()
        self.total = total
        self.done = 0
        self.progress = progress

    def counted(self, lists: Iterable[list[bytes]], unplanned: bool = False) -> Iterator[list[bytes]]:
        """``lists`` as they pass, counted (``unplanned``: records the planned total left out)."""
        first_byte = operator.itemgetter(0)
        for batch in lists:
            if isinstance(batch, BuiltBlock):  # records of one family
                n = batch.count
                self.counts[batch.first[0]] += n
            else:
                n = len(batch)
                self.counts.update(map(first_byte, batch))
            if unplanned:
                self.total += n
            yield batch
            self.done += n
            if self.progress is not None:
                self.progress(self.done, self.total)

    def by_name(self) -> dict[str, int]:
        return {schema.FAMILY_NAMES[bytes((tag,))]: n for tag, n in sorted(self.counts.items())}


def _batched(records: Iterable[bytes], size: int = 65536) -> Iterator[list[bytes]]:
    """``records`` in lists of at most ``size``."""
    records = iter(records)
    while batch := list(itertools.islice(records, size)):
        yield batch


def _chunk_refs(changes: list[tuple[ArrayChange, Batches]], chunk_ids: ExternalSorter | None,
                sorter: Callable[[], ExternalSorter], history: HistoryTally) -> Iterator[list[bytes]]:
    """The chunk ref timeline in key order (node id, coords, snapshot id): an array changed by one
    snapshot streams as computed; the changes of an array changed by several are sorted together.
    Each batch's digest goes to ``history``."""
    for _node, group in itertools.groupby(changes, key=lambda item: item[0].node_id):
        group = list(group)
        merged = sorter() if len({change.snapshot_id for change, _ in group}) > 1 else None
        for change, batches in group:
            suffix = with_layout(b"", change.shard)
            for records, ids, coords in batches():
                history.add_timeline(change.snapshot_id, change.node_id, coords)
                if merged is None:
                    yield from ([records] if records and isinstance(records[0], bytes) else records)
                else:
                    merged.extend(records)
                if chunk_ids is not None and ids:
                    chunk_ids.extend([entry + suffix for entry in ids] if suffix else ids)
        if merged is not None:
            yield from _batched(merged.sorted())
            merged.close()


def _later_families(sorter: ExternalSorter, txlogs: list[Batches], tally: _Tally,
                    exceptions: Callable[[], list[bytes]]) -> Iterator[bytes]:
    """Families after the chunk data: the sorter's, once the transaction logs and the history's
    exceptions (which need every log's and every array's digests) are in it."""
    before = sorter.count
    for batches in txlogs:
        for batch in batches():
            sorter.extend(batch)
    sorter.extend(exceptions())
    tally.total += sorter.count - before
    return sorter.sorted()


def merge_families(refs: list[bytes], changes: list[tuple[ArrayChange, Batches]],
                   chunk_data: Callable[[], Iterator[list[bytes]]], sorter: ExternalSorter,
                   txlogs: list[tuple[tuple[str, int], Batches]], chunk_ids: ExternalSorter | None,
                   header: Callable[[dict[str, int]], bytes], tally: _Tally,
                   change_sorter: Callable[[], ExternalSorter], repo: Repository,
                   snapshots: list[SnapshotInfo],
                   file_forms: Callable[[], list[bytes]] = list) -> Iterator[list[bytes]]:
    """Every record of the archive in file order, in lists (per-record work stays in C: counting,
    cutting into blocks). Each family starts only when the one before it is written. ``txlogs``:
    per transaction log read, (snapshot id, flushed_at) and its batches; ``file_forms``: the ``Y``
    records, asked for once every transaction log is read."""
    history = HistoryTally()

    def summaries() -> Iterator[Batches]:
        for (sid, _), batches in txlogs:
            yield lambda sid=sid, batches=batches: _logged(sid, batches, history)

    def exceptions() -> list[bytes]:
        flushed_at = {info.id: info.flushed_at for info in snapshots}
        arrays = {(change.snapshot_id, change.node_id): (change.manifests, change.base) for change, _ in changes}
        return exception_records(repo, history.disagreements(), flushed_at, {sid for (sid, _), _ in txlogs}, arrays)
    yield from tally.counted(_batched(refs))
    yield from tally.counted(_chunk_refs(changes, chunk_ids, change_sorter, history), unplanned=True)
    yield from tally.counted(chunk_data(), unplanned=True)
    yield from tally.counted(_batched(_later_families(sorter, list(summaries()), tally, exceptions)))
    yield from tally.counted(_batched(sorted(file_forms())), unplanned=True)
    yield [header(tally.by_name())]


def _logged(sid: str, batches: Batches, history: HistoryTally) -> Iterator[list[bytes]]:
    """A transaction log task's records, its digests counted in ``history``."""
    for records, digests in batches():
        history.add_log(sid, digests)
        yield records


# -- 5. write ------------------------------------------------------------------------------------

@dataclass
class WriteOptions:
    """How the ZS file is written."""

    codec: str = "deflate"
    compress_level: int | str | None = None
    chunk_codec: str = "none"
    """``none``: blocks of embedded chunk bytes are stored uncompressed (zarr compressed them
    already); ``same``: they are compressed with ``codec`` like every other block."""
    parallelism: int = 1
    approx_block_size: int = 256 * 1024
    branching_factor: int = 1024

    @classmethod
    def checked(cls, codec: str, compress_level: int | str | None, chunk_codec: str, parallelism: int | str,
                approx_block_size: int, branching_factor: int) -> WriteOptions:
        """Options as a caller gives them: one-line ZSErrors for an unknown codec, ``parallelism``
        resolved (``"guess"``: one per core)."""
        if codec not in CODECS:
            raise ZSError(f"unknown codec {codec!r}: choose one of {', '.join(CODECS)}")
        if chunk_codec not in CHUNK_CODECS:
            raise ZSError(f"unknown chunk codec {chunk_codec!r}: choose one of {', '.join(CHUNK_CODECS)}")
        return cls(codec, compress_level, chunk_codec, resolve_parallelism(parallelism), approx_block_size,
                   branching_factor)


def _spooled(items: Iterable[bytes], keep: Callable[[bytes], None]) -> Iterator[bytes]:
    """``items`` as they pass, each handed to ``keep`` too."""
    for item in items:
        keep(item)
        yield item


def write_archive(target: Path, lists: Iterable[list[bytes]], metadata: dict, options: WriteOptions,
                  what: str = "export") -> None:
    """Write the record lists into a partial file beside ``target``, fsync it, rename it over
    ``target``: a failed or interrupted write leaves nothing that looks like an archive (``what``
    names the work in the error)."""
    with whole_file(target, what) as tmp, \
            ZSWriter(os.fspath(tmp), metadata, codec=options.codec, compress_level=options.compress_level,
                     parallelism=options.parallelism, approx_block_size=options.approx_block_size,
                     branching_factor=options.branching_factor, include_default_metadata=False,
                     name=str(target)) as writer:
        for records in lists:
            if isinstance(records, PieceBlock):
                writer.add_data_block(records, stored=records.stored, key_length=records.key_length)
            elif isinstance(records, OneBlock):
                writer.add_data_block(records)
            elif isinstance(records, BuiltBlock):
                writer.add_built_block(records)
            else:
                writer.add_record_lists((records,))
        writer.finish()  # fsyncs the file, then marks it complete


def _engine(repo: Repository, location, plan: ExportPlan, parallelism: int, workdir: str, client) -> Engine:
    """The cluster's engine when a ``distributed.Client`` is given, else worker processes or this one."""
    if client is not None:
        from zsarchive.archive.write.cluster import ClusterEngine

        return ClusterEngine(repo, client, location)
    # Tasks that could run side by side: a transaction log is small beside the changes of its own commit
    # (it names the chunks they decode), so one commit's log and one array's diff (the usual fragment)
    # are one process's work, and worker processes would only add their start-up.
    tasks = max(len(plan.change_tasks(_TASK_REFS)), len(plan.txlogs))
    return open_engine(repo, location, parallelism, tasks, workdir, sum(change.refs for change in plan.changes))


def target_path(archive_path: str | os.PathLike) -> tuple[Path, Path]:
    """The archive's path as given (for messages) and its directory, which must exist."""
    target = Path(archive_path)
    if target.is_dir():
        raise ZSError(f"{target}: is a directory, not an archive file name")
    directory = target.resolve().parent
    if not directory.is_dir():
        raise ZSError(f"{target}: directory {directory} does not exist")
    return target, directory


@dataclass(frozen=True)
class ExportOptions:
    """What an export writes and how: the keyword arguments of :func:`zsarchive.archive.export`.

    ``progress(done, total)`` is called now and then with counts of records (chunk refs dominate).
    ``export_time`` (microseconds since 1970 UTC) defaults to now: it is the only field of the
    archive that differs between two exports of the same repository. ``parallelism``: worker
    processes decoding (for a repository in object storage, only from
    :data:`~zsarchive.archive.write.engine.SPAWN_REFS` chunk refs on) and threads compressing, or
    ``"guess"`` (one per core, the default, as for ``zs export``). ``chunk_codec``: ``none`` stores
    embedded chunk bytes uncompressed, ``same`` compresses them with ``codec``. ``client``: a
    ``distributed.Client`` whose cluster decodes instead (the archive is the same byte for byte).
    ``base``: an archive of the same repository (or a fragment): write a fragment holding only what
    it lacks (:mod:`zsarchive.archive.write.incremental`). ``authorize``: location prefixes (or prefix ->
    storage options) under which the indexes of virtual shards are read and kept (a reader then
    reads an inner chunk of such a shard with one request). ``include_virtual``: keep the bytes of every
    virtual chunk ref under those prefixes (format 7), each range read once and checked against the ref's
    checksum; ``max_virtual_bytes`` refuses, before reading any, an export that would keep more;
    ``virtual_progress(done, total)`` counts their bytes. ``storage_options`` and ``anon`` say how to
    reach a remote repository.
    """

    codec: str = "deflate"
    compress_level: int | str | None = None
    include_chunks: bool = False
    chunk_codec: str = "none"
    parallelism: int | str = "guess"
    approx_block_size: int = 256 * 1024
    branching_factor: int = 1024
    export_time: int | None = None
    progress: Callable[[int, int], None] | None = None
    sort_memory: int = 128 << 20
    storage_options: dict[str, str] | None = None
    anon: bool = False
    client: object = None
    base: str | os.PathLike | None = None
    authorize: Iterable[str] | Mapping[str, Mapping[str, str]] = ()
    include_virtual: bool = False
    max_virtual_bytes: int | None = None
    virtual_progress: Callable[[int, int], None] | None = None

    def write_options(self) -> WriteOptions:
        """How the ZS file is written; one-line ZSErrors for an unknown codec."""
        return WriteOptions.checked(self.codec, self.compress_level, self.chunk_codec, self.parallelism,
                                    self.approx_block_size, self.branching_factor)


@dataclass
class ExportJob:
    """One export's repository, target and options: :meth:`run` writes the archive a plan and a scope say."""

    repo: Repository
    location: Location
    target: Path
    directory: Path
    options: WriteOptions
    choices: ExportOptions
    """What the caller asked for (``choices.base`` is read by the fragment's export, not here)."""
    export_time: int

    @property
    def include_chunks(self) -> bool:
        """Whether the archive holds the bytes of native chunk files."""
        return self.choices.include_chunks

    def sorter(self, share: int, unique: bool) -> ExternalSorter:
        """An external sorter spilling next to the archive, with ``1/share`` of the sort memory."""
        return ExternalSorter(max_bytes=self.choices.sort_memory // share, tmpdir=str(self.directory), unique=unique)

    def chunk_files(self, entries: Iterable[bytes], index_records: list[bytes], scope: Scope,
                    summary: ExportSummary) -> Iterator[PieceBlock]:
        """The blocks of embedded chunk files and kept virtual ranges, and into ``index_records`` the
        shard indexes, of the sorted chunk file entries: native files first, then the virtual ranges
        (read under the authorized prefixes; what is left out is counted in ``summary``)."""
        entries = iter(entries)
        virtual: list[bytes] = []

        def native() -> Iterator[bytes]:
            for entry in entries:
                if is_virtual(entry):  # the virtual ranges follow
                    virtual.append(entry)
                    return
                yield entry
        yield from repo_records.chunk_file_blocks(self.repo.storage, scope.chunk_files_to_write(native()),
                                                  self.include_chunks, self.options.chunk_codec == "none",
                                                  index_records)
        reader = ChunkReader(str(summary.path), self.choices.authorize, lambda *_: None)
        try:
            with contextlib.ExitStack() as spooled:
                ranges = itertools.chain(virtual, entries)
                if self.choices.include_virtual:  # read twice: shard indexes, then the ranges' bytes
                    spool = spooled.enter_context(contextlib.closing(self.sorter(4, unique=False)))
                    ranges = _spooled(ranges, spool.add)
                index_records += virtualshards.index_records(reader, scope.shards_to_index(ranges), summary.unindexed)
                if self.choices.include_virtual:
                    yield from self.virtual_ranges(spool.sorted(), reader, scope, summary)
        finally:
            reader.close()

    def virtual_ranges(self, entries: Iterable[bytes], reader: ChunkReader, scope: Scope,
                       summary: ExportSummary) -> Iterator[PieceBlock]:
        """The blocks of the ``E`` records of the virtual ranges ``entries`` name (sorted, unique): those
        under an authorized prefix that the archive lacks, each read once, checked against each checksum."""
        report = summary.virtual = VirtualReport()
        kept = scope.kept_virtual()
        with contextlib.closing(self.sorter(4, unique=False)) as spool:
            total = 0
            for plan in virtualdata.plan_ranges(virtualdata.range_groups(entries), reader, kept, report):
                total += plan.wanted.length if plan.wanted.pins else 0
                spool.add(plan.encode())
            virtualdata.check_budget(total, self.choices.max_virtual_bytes)
            done = 0

            def progress(size: int) -> None:
                nonlocal done
                done += size
                if self.choices.virtual_progress is not None:
                    self.choices.virtual_progress(done, total)
            yield from virtualdata.virtual_blocks(map(virtualdata.Planned.decode, spool.sorted()), reader,
                                                  kept, report, self.options.chunk_codec == "none", progress)

    def run(self, plan: ExportPlan, scope: Scope, target: Path | None = None) -> ExportSummary:
        """Write ``plan``'s records, as far as ``scope`` keeps them, into ``target`` (default: the job's)."""
        repo, options, include_chunks = self.repo, self.options, self.include_chunks
        target = target or self.target
        # Small families hold no duplicate records; chunk ids repeat (one file, many refs) and are deduplicated.
        with contextlib.ExitStack() as opened:
            sorter = opened.enter_context(contextlib.closing(self.sorter(1, unique=False)))
            chunk_ids: ExternalSorter | None = None
            sharded = any(change.shard is not None for change in plan.changes)
            if include_chunks or sharded or self.choices.include_virtual:
                chunk_ids = opened.enter_context(contextlib.closing(self.sorter(4, unique=True)))
            version = scope.view_format
            refs = gather_metadata(repo, plan, sorter, scope)
            engine = opened.enter_context(contextlib.closing(
                _engine(repo, self.location, plan, options.parallelism, str(self.directory), self.choices.client)))
            prefetch_inputs(repo, plan, engine)
            txlogs = gather_txlogs(engine, plan)  # started first: they are consumed last, after the chunk refs
            cut = None
            if scope.blocks_allowed:
                cut = BlockPlan(options.approx_block_size, *((options.codec, options.compress_level)
                                                             if engine.builds_blocks else ()))
            changes = decode_changes(engine, plan, include_chunks, cut, self.choices.include_virtual)
            # started now, read when the header is written: after any worker process is forked (a fork
            # while the thread imports could leave the child an import lock no thread of it holds)
            _version_lookup()

            def chunk_data() -> Iterator[list[bytes]]:
                if chunk_ids is not None:
                    index_records: list[bytes] = []
                    yield from self.chunk_files(chunk_ids.sorted(), index_records, scope, summary)
                    sorter.extend(index_records)
                    tally.total += len(index_records)

            def header(counts: dict[str, int]) -> bytes:
                summary.counts = counts
                return scope.header(version, repo.repo_info().spec_version, self.export_time, counts)

            summary = ExportSummary(path=target, left_out=plan.left_out)
            tally = _Tally(len(refs) + sorter.count, self.choices.progress)
            lists = merge_families(refs, changes, chunk_data, sorter, list(zip(plan.txlogs, txlogs)), chunk_ids,
                                   header, tally, lambda: self.sorter(2, unique=False), repo, plan.snapshots,
                                   lambda: file_form_records(repo, plan, scope))
            write_archive(target, scope.to_writer(lists), scope.metadata(version, repo.spec_version),
                          options)
        return summary
