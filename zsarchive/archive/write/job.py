"""One export's repository, target and options (:class:`ExportJob`), which runs the stages of
:mod:`exporter <zsarchive.archive.write.exporter>` for a plan and a scope, and what it reports
(:class:`ExportSummary`)."""

from __future__ import annotations

import contextlib
import functools
import itertools
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Iterator

from zsarchive.archive.read.chunkdata import ChunkReader
from zsarchive.archive.write import records as repo_records
from zsarchive.archive.format.pieces import PieceBlock
from zsarchive.archive.write import virtualdata, virtualshards
from zsarchive.archive.write.virtualdata import VirtualReport
from zsarchive.archive.write.chunkfiles import is_virtual
from zsarchive.archive.write.exporter import (
    BlockPlan,
    Families,
    decode_changes,
    file_form_records,
    gather_metadata,
    gather_txlogs,
    history_exceptions,
    merge_families,
    plan_engine,
    prefetch_inputs,
    write_archive,
)
from zsarchive.archive.write.options import ExportOptions, WriterSettings
from zsarchive.archive.write.plan import ExportPlan
from zsarchive.archive.write.scope import Scope
from zsarchive.archive.write.sorter import ExternalSorter
from zsarchive.archive.write.stream import Batch, PiecesBlock, Tally
from zsarchive.errors import ZSError
from zsarchive.icechunk import Repository
from zsarchive.io.location import Location


@dataclass
class ExportSummary:
    """What an export wrote."""

    path: Path
    counts: dict[str, int] = field(default_factory=dict)
    """Records written per family name."""
    size: int = 0
    seconds: float = 0.0
    left_out: dict[str, str] = field(default_factory=dict)
    """Snapshot id -> why it is not in the archive (see :func:`~zsarchive.archive.write.plan.unreadable_snapshots`)."""
    unindexed: virtualshards.Skipped = field(default_factory=virtualshards.Skipped)
    """Virtual shards whose index the archive does not keep, and why (the first)."""
    virtual: VirtualReport | None = None
    """What the export did with the bytes of virtual chunk refs (``include_virtual``)."""


def target_path(archive_path: str | os.PathLike) -> tuple[Path, Path]:
    """The archive's path as given (for messages) and its directory, which must exist."""
    target = Path(archive_path)
    if target.is_dir():
        raise ZSError(f"{target}: is a directory, not an archive file name")
    directory = target.resolve().parent
    if not directory.is_dir():
        raise ZSError(f"{target}: directory {directory} does not exist")
    return target, directory


@dataclass
class ExportJob:
    """One export's repository, target and options: :meth:`run` writes the archive a plan and a scope say."""

    repo: Repository
    location: Location
    target: Path
    directory: Path
    options: WriterSettings
    """How the ZS file is written."""
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

    def chunk_files(
        self, entries: Iterable[bytes], index_records: list[bytes], scope: Scope, summary: ExportSummary
    ) -> Iterator[PiecesBlock]:
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

        for block in repo_records.chunk_file_blocks(
            self.repo.storage,
            iter(scope.chunk_files_to_write(native())),
            self.include_chunks,
            self.options.chunk_codec == "none",
            index_records,
        ):
            yield PiecesBlock.of(block)
        reader = ChunkReader(str(summary.path), self.choices.authorize, lambda *_: None)
        try:
            with contextlib.ExitStack() as spooled:
                ranges: Iterable[bytes] = itertools.chain(virtual, entries)
                if self.choices.include_virtual:  # read twice: shard indexes, then the ranges' bytes
                    spool = spooled.enter_context(contextlib.closing(self.sorter(4, unique=False)))
                    ranges = _spooled(ranges, spool.add)
                index_records += virtualshards.index_records(reader, scope.shards_to_index(ranges), summary.unindexed)
                if self.choices.include_virtual:
                    for block in self.virtual_ranges(spool.sorted(), reader, scope, summary):
                        yield PiecesBlock.of(block)
        finally:
            reader.close()

    def virtual_ranges(
        self, entries: Iterable[bytes], reader: ChunkReader, scope: Scope, summary: ExportSummary
    ) -> Iterator[PieceBlock]:
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

            yield from virtualdata.virtual_blocks(
                map(virtualdata.Planned.decode, spool.sorted()),
                reader,
                kept,
                report,
                self.options.chunk_codec == "none",
                progress,
            )

    def _chunk_data(
        self, scope: Scope, chunk_ids: ExternalSorter | None, sorter: ExternalSorter, summary: ExportSummary
    ) -> Iterator[Batch]:
        """The blocks of the chunk files the chunk refs name, as far as ``scope`` writes them; their shard
        indexes into ``sorter``."""
        if chunk_ids is not None:
            index_records: list[bytes] = []
            yield from self.chunk_files(chunk_ids.sorted(), index_records, scope, summary)
            sorter.extend(index_records)

    def run(self, plan: ExportPlan, scope: Scope, target: Path | None = None) -> ExportSummary:
        """Write ``plan``'s records, as far as ``scope`` keeps them, into ``target`` (default: the job's)."""
        repo, options, include_chunks = self.repo, self.options, self.include_chunks
        summary = ExportSummary(path=target or self.target, left_out=plan.left_out)
        version = scope.records_format
        # Small families hold no duplicate records; chunk ids repeat (one file, many refs) and are deduplicated.
        with contextlib.ExitStack() as opened:
            sorter = opened.enter_context(contextlib.closing(self.sorter(1, unique=False)))
            chunk_ids: ExternalSorter | None = None
            sharded = any(change.shard is not None for change in plan.changes)
            if include_chunks or sharded or self.choices.include_virtual:
                chunk_ids = opened.enter_context(contextlib.closing(self.sorter(4, unique=True)))
            refs = gather_metadata(repo, plan, sorter, scope)
            engine = opened.enter_context(
                contextlib.closing(
                    plan_engine(
                        repo, self.location, plan, options.parallelism, str(self.directory), self.choices.client
                    )
                )
            )
            prefetch_inputs(repo, plan, engine)
            txlogs = gather_txlogs(engine, plan)  # started first: they are consumed last, after the chunk refs
            cut = None
            if scope.blocks_allowed:
                cut = BlockPlan(
                    options.approx_block_size,
                    *((options.codec, options.compress_level) if engine.builds_blocks else ()),
                )
            changes = decode_changes(engine, plan, include_chunks, cut, self.choices.include_virtual)

            def header(counts: dict[str, int]) -> bytes:
                summary.counts = counts
                return scope.header(version, repo.repo_info().spec_version, self.export_time, counts)

            families = Families(
                refs,
                changes,
                list(zip(plan.txlogs, txlogs)),
                sorter,
                chunk_ids,
                lambda: self.sorter(2, unique=False),
                lambda: self._chunk_data(scope, chunk_ids, sorter, summary),
                functools.partial(history_exceptions, repo, plan, changes),
                lambda: file_form_records(repo, plan, scope),
            )
            tally = Tally(lambda: len(refs) + sorter.count, self.choices.progress)
            write_archive(
                summary.path,
                scope.to_writer(merge_families(families, tally, header)),
                scope.metadata(version, repo.spec_version),
                options,
            )
        return summary


def _spooled(items: Iterable[bytes], keep: Callable[[bytes], None]) -> Iterator[bytes]:
    """``items`` as they pass, each handed to ``keep`` too."""
    for item in items:
        keep(item)
        yield item
