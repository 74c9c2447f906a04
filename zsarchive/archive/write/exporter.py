"""Export an Icechunk repository's whole history into one ZS archive, streaming, in bounded memory.

An export is a pipeline of named stages, read top to bottom (:class:`~zsarchive.archive.write.job.ExportJob`
runs them):

1. :func:`~zsarchive.archive.write.plan.plan_export` — what to read: the snapshots, their transaction logs,
   and each array whose manifests differ from the ones it had in the parent snapshot (an *array change*);
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

Stages hand each other typed batches (:mod:`stream <zsarchive.archive.write.stream>`). The bytes written
do not depend on the engine or on ``parallelism``.
"""

from __future__ import annotations

import collections
import itertools
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, NamedTuple

from zsarchive.archive.format import schema
from zsarchive.archive.format.header import keeps_file_forms
from zsarchive.archive.write import records as repo_records
from zsarchive.archive.write import virtualshards
from zsarchive.archive.write.chunkfiles import with_layout
from zsarchive.archive.write.engine import Batches, Engine, InProcess, open_engine
from zsarchive.archive.write.history import Digest, HistoryTally, digest, exception_records, log_digests
from zsarchive.archive.write.options import WriterSettings
from zsarchive.archive.write.plan import ArrayChange, ExportPlan
from zsarchive.archive.write.refdelta import array_changes
from zsarchive.archive.write.scope import Scope
from zsarchive.archive.write.sorter import ExternalSorter
from zsarchive.archive.write.stream import Batch, CompressedBlock, RecordList, TaskBlock, Tally, batched
from zsarchive.icechunk import Repository
from zsarchive.io.location import Location
from zsarchive.io.outfile import whole_file
from zsarchive.zs.format import codecs
from zsarchive.zs.writer import BlockCutter, ZSWriter, build_data_block

_TASK_REFS = 250_000  # chunk refs per decoding task: an array's large first manifest becomes several tasks


# -- 2. gather -----------------------------------------------------------------------------------


def gather_metadata(
    repo: Repository, plan: ExportPlan, sorter: ExternalSorter, scope: Scope | None = None
) -> list[bytes]:
    """Return the refs (they precede the chunk refs in the file); put repository facts, snapshots,
    nodes and the ops log into ``sorter`` (they follow them)."""
    scope = scope or Scope()
    sorter.extend(scope.small_family(schema.REPO, repo_records.repo_fact_records(repo, scope.records_format)))
    for info in plan.snapshots:
        sorter.extend(repo_records.snapshot_records(repo, info, plan.since[info.id]))
    sorter.extend(scope.small_family(schema.OPS, repo_records.ops_records(repo)))
    return scope.small_family(schema.REFS, repo_records.ref_records(repo, scope.records_format))


def file_form_records(repo: Repository, plan: ExportPlan, scope: Scope) -> list[bytes]:
    """The ``Y`` records (format 6) of every metadata file the plan's snapshots need that the archive
    lacks (a fragment's base holds the others: the files are immutable); made last, when this process
    has read the files it reads and every task has handed back the forms of those its worker read
    (:mod:`zsarchive.archive.write.engine`), so that only files no one read yet are read now."""
    if not keeps_file_forms(scope.records_format):
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


class LogBatch(NamedTuple):
    """What a transaction log task hands back: the log's summary record and the digests of the chunks
    it names per array node id (:mod:`zsarchive.archive.write.history`)."""

    records: list[bytes]
    digests: dict[str, Digest]


def _txlog_task(repo: Repository, sid: str, flushed_at: int) -> Iterator[LogBatch]:
    summary, logged = repo_records.txlog_summary(repo, sid)
    yield LogBatch([summary], log_digests(logged))


def gather_txlogs(engine: Engine, plan: ExportPlan) -> list[Batches]:
    """Start reading every transaction log: per log, its :class:`LogBatch`."""
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
    def blocks(records: list[bytes], cutter: BlockCutter, compress: Callable[[bytes], bytes] | None) -> list[Batch]:
        """The blocks ``records`` complete (all that is left, with an empty list)."""
        cut = list(cutter.cut(records)) if records else [cutter.flush()]
        if compress is None:
            return [TaskBlock(block) for block in cut if block]
        return [CompressedBlock(build_data_block(block, None, compress)) for block in cut if block]


class ChangeBatch(NamedTuple):
    """What an array change's task hands back, a batch at a time: chunk ref records (as one record list,
    or as blocks the task cut), the chunk file entries they name, and the digest of their coordinates."""

    batches: list[Batch]
    chunk_ids: list[bytes]
    coords: Digest


def _change_task(
    repo: Repository,
    change: ArrayChange,
    first: int,
    stop: int | None,
    want_ids: bool,
    cut: BlockPlan | None = None,
    virtual: bool = False,
) -> Iterator[ChangeBatch]:
    """The batches of what ``change`` adds, changes and removes (refs ``first`` to ``stop`` of its one
    manifest when ``stop`` is given); the entries name the native chunk files and the virtual ranges of a
    sharded array (``virtual``: of every array). With ``cut``, the records come as data blocks."""
    where = f"snapshot {change.snapshot_id} (array {change.node_id})"
    cutter = None if cut is None else BlockCutter(cut.approx_block_size)
    compress = None if cut is None else cut.compressor()
    for changed, removed in array_changes(repo, change.node_id, change.manifests, change.base, where, first, stop):
        ids: list[bytes] | None = [] if want_ids else None
        records = repo_records.change_records(change.node_id, change.snapshot_id, changed, removed, ids)
        if changed is not None and ids is not None and (change.shard is not None or virtual):  # wanted
            ids += virtualshards.entries(changed)
        coords = (digest(changed.coords) if changed is not None else Digest()) + digest(removed)
        batches: list[Batch] = [RecordList(records)] if cutter is None else BlockPlan.blocks(records, cutter, compress)
        yield ChangeBatch(batches, ids or [], coords)
    if cutter is not None:
        yield ChangeBatch(BlockPlan.blocks([], cutter, compress), [], Digest())


def decode_changes(
    engine: Engine, plan: ExportPlan, include_chunks: bool, cut: BlockPlan | None = None, include_virtual: bool = False
) -> list[tuple[ArrayChange, Batches]]:
    """Start computing every array change (its :class:`ChangeBatch` es). The records of an array that one
    snapshot changes are written as computed; with ``cut``, the tasks of such an array in a large manifest
    cut (and compress) them into blocks (small arrays' records share blocks, as the writer cuts them)."""
    tasks = plan.change_tasks(_TASK_REFS)
    changed_by = collections.Counter(change.node_id for change in plan.changes)

    def block_plan(change: ArrayChange) -> BlockPlan | None:
        return cut if changed_by[change.node_id] == 1 and change.refs >= _TASK_REFS else None

    return list(
        zip(
            [change for change, _, _ in tasks],
            engine.start(
                _change_task,
                [
                    (
                        *task,
                        include_chunks or include_virtual or task[0].shard is not None,
                        block_plan(task[0]),
                        include_virtual,
                    )
                    for task in tasks
                ],
            ),
        )
    )


def plan_engine(
    repo: Repository, location: Location, plan: ExportPlan, parallelism: int, workdir: str, client: object
) -> Engine:
    """The cluster's engine when a ``distributed.Client`` is given, else worker processes or this one."""
    if client is not None:
        from zsarchive.archive.write.cluster import ClusterEngine

        return ClusterEngine(repo, client, location)
    # Tasks that could run side by side: a transaction log is small beside the changes of its own commit
    # (it names the chunks they decode), so one commit's log and one array's diff (the usual fragment)
    # are one process's work, and worker processes would only add their start-up.
    tasks = max(len(plan.change_tasks(_TASK_REFS)), len(plan.txlogs))
    return open_engine(repo, location, parallelism, tasks, workdir, sum(change.refs for change in plan.changes))


# -- 4. sort and merge ---------------------------------------------------------------------------


@dataclass
class Families:
    """What the merge writes, each stage's output: the refs (stage 2), the array changes and transaction
    logs being computed (stage 3), the sorted small families, the native chunk files' sorter, and what
    only the end of the stream can make."""

    refs: list[bytes]
    changes: list[tuple[ArrayChange, Batches]]
    txlogs: list[tuple[tuple[str, int], Batches]]
    """Per transaction log read: (snapshot id, flushed_at) and its batches."""
    sorter: ExternalSorter
    """The small families (repository facts, snapshots, nodes, ops log), joined by the transaction logs'
    summaries, the shard indexes and the history's exceptions as they are made."""
    chunk_ids: ExternalSorter | None
    """The chunk file entries the chunk refs name (None: nothing reads the files)."""
    change_sorter: Callable[[], ExternalSorter]
    """A sorter for the changes of an array that several snapshots change."""
    chunk_data: Callable[[], Iterator[Batch]]
    """The blocks of embedded chunk files, asked for once every chunk ref is written."""
    exceptions: Callable[[HistoryTally], list[bytes]]
    """The ``H`` records where the logs and the timeline disagree, asked for once every digest is in."""
    file_forms: Callable[[], list[bytes]] = field(default=list)
    """The ``Y`` records, asked for once every transaction log is read."""


def history_exceptions(
    repo: Repository, plan: ExportPlan, changes: list[tuple[ArrayChange, Batches]], history: HistoryTally
) -> list[bytes]:
    """The ``H`` records of the plan's snapshots where the transaction logs and the chunk ref timeline
    disagree, from the digests ``history`` took of both."""
    flushed_at = {info.id: info.flushed_at for info in plan.snapshots}
    arrays = {(change.snapshot_id, change.node_id): (change.manifests, change.base) for change, _ in changes}
    return exception_records(repo, history.disagreements(), flushed_at, {sid for sid, _ in plan.txlogs}, arrays)


def merge_families(families: Families, tally: Tally, header: Callable[[dict[str, int]], bytes]) -> Iterator[Batch]:
    """Every record of the archive in file order, in batches (per-record work stays in C: counting,
    cutting into blocks), counted by ``tally``; the header record (of the counts) last. Each family starts
    only when the one before it is written."""
    history = HistoryTally()
    yield from tally.counted(batched(families.refs))
    yield from tally.counted(_chunk_refs(families, history), unplanned=True)
    yield from tally.counted(families.chunk_data(), unplanned=True)
    yield from tally.counted(batched(_later_families(families, history)))
    yield from tally.counted(batched(sorted(families.file_forms())), unplanned=True)
    yield RecordList([header(tally.by_name())])


def _chunk_refs(families: Families, history: HistoryTally) -> Iterator[Batch]:
    """The chunk ref timeline in key order (node id, coords, snapshot id): an array changed by one
    snapshot streams as computed; the changes of an array changed by several are sorted together.
    Each batch's digest goes to ``history``, its chunk file entries to ``families.chunk_ids``."""
    chunk_ids = families.chunk_ids
    for _node, grouped in itertools.groupby(families.changes, key=lambda item: item[0].node_id):
        group = list(grouped)
        merged = families.change_sorter() if len({change.snapshot_id for change, _ in group}) > 1 else None
        for change, tasks in group:
            suffix = with_layout(b"", change.shard)
            for batches, ids, coords in tasks():
                history.add_timeline(change.snapshot_id, change.node_id, coords)
                if merged is None:
                    yield from batches
                else:  # record lists: only an array one snapshot changes is cut into blocks
                    for batch in batches:
                        merged.extend(batch.records)
                if chunk_ids is not None and ids:
                    chunk_ids.extend([entry + suffix for entry in ids] if suffix else ids)
        if merged is not None:
            yield from batched(merged.sorted())
            merged.close()


def _later_families(families: Families, history: HistoryTally) -> Iterator[bytes]:
    """Families after the chunk data: the sorter's, once the transaction logs' summaries and the
    history's exceptions (which need every log's and every array's digests) are in it."""
    sorter = families.sorter
    for (sid, _), tasks in families.txlogs:
        for records, digests in tasks():
            history.add_log(sid, digests)
            sorter.extend(records)
    sorter.extend(families.exceptions(history))
    return sorter.sorted()


# -- 5. write ------------------------------------------------------------------------------------


def write_archive(
    target: Path, batches: Iterable[Batch], metadata: dict[str, Any], options: WriterSettings, what: str = "export"
) -> None:
    """Write the batches into a partial file beside ``target``, fsync it, rename it over ``target``: a
    failed or interrupted write leaves nothing that looks like an archive (``what`` names the work in
    the error)."""
    with (
        whole_file(target, what, overwrite=options.overwrite) as tmp,
        ZSWriter(
            os.fspath(tmp),
            metadata,
            codec=options.codec,
            compress_level=options.compress_level,
            parallelism=options.parallelism,
            approx_block_size=options.approx_block_size,
            branching_factor=options.branching_factor,
            include_default_metadata=False,
            name=str(target),
        ) as writer,
    ):
        for batch in batches:
            batch.write(writer)
        writer.finish()  # fsyncs the file, then marks it complete
