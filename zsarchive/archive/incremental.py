"""Incremental export and consolidation (docs/archive-format.rst, "Fragments").

:func:`export_fragment` writes a fragment: what a base archive's view lacks of a full export made now.
When the repository only grew since the base (new snapshots, moved refs, new ops), it reads just the
new snapshots, their manifests and those of their parents, and their transaction logs: the plan of a
full export with the base's snapshots skipped. When the history was rewritten (snapshots expired or
changed), it makes a full export beside the target and writes its difference from the base's view.
:func:`consolidate` writes a chain's view as one standalone archive.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Callable, Iterable, Iterator

from zsarchive.archive import records as R
from zsarchive.archive import schema as S
from zsarchive.archive import virtualshards
from zsarchive.archive.chunkpieces import regroup
from zsarchive.archive.exporter import (ExportJob, ExportSummary, Scope, WriteOptions, _target, exporter_version,
                                        plan_export, write_archive)
from zsarchive.archive.fragments import Chain, HoldingsTally, base_link, diff, is_tombstone, open_chain
from zsarchive.archive.reading import open_archive, records_under
from zsarchive.errors import ZSError
from zsarchive.zs.format import codecs
from zsarchive.zs.pipeline import resolve_parallelism
from zsarchive.zs.reader import ZS

_HISTORY_REWRITES = ("ExpirationRanUpdate", "GCRanUpdate")
"""Ops log entries after which a repository may lack snapshots an older archive of it holds."""


def open_view(location: str | os.PathLike) -> Chain:
    """An archive, full or a fragment with its bases, as a chain (a full archive: a chain of one)."""
    zs, name, _ = open_archive(location)
    if isinstance(zs, Chain):
        return zs
    try:
        return open_chain(zs, name)
    except BaseException:
        zs.close()
        raise


class Base:
    """The archive a fragment builds on, as its view: what the fragment's plan and scope ask of it."""

    def __init__(self, location: str | os.PathLike):
        self.location = os.fspath(location)
        self.chain = open_view(location)
        newest = self.chain.members[0]
        self.header = newest.header
        self.sha256 = self.chain.data_sha256.hex()
        self.counts: dict[str, int] = dict(self.header[4])
        if self.chain.members[-1].header[0] < 3 and self.counts.get(S.FAMILY_NAMES[S.CHUNK_DATA]):
            self.close()
            raise ZSError(f"{self.location}: its chunk bytes are stored whole (format "
                          f"{self.chain.members[-1].header[0]}); export the repository again to build on it")
        self.snapshots = {k[0]: v for k, v in records_under(self.chain, S.SNAPSHOT)}

    @property
    def export_time(self) -> int:
        """When the base (its newest fragment) was made, in microseconds."""
        return self.header[2]

    def records(self, family: bytes) -> list[bytes]:
        """Every record of a small family in the view."""
        return list(self.chain.search(prefix=family))

    def arrays(self, snapshot_id: str) -> tuple[dict[str, tuple], dict[str, str]]:
        """(array node id -> manifests, array node id -> timeline start) of a snapshot the base holds."""
        manifests, since = {}, {}
        for _, value in records_under(self.chain, S.NODE, (snapshot_id,)):
            if value[1] == S.ARRAY:
                manifests[value[0]] = value[5]
                since[value[0]] = value[6]
        return manifests, since

    def holds(self, family: bytes, key: tuple) -> bool:
        """Whether the view holds a record of ``family`` (``D`` or ``I``) whose key begins with ``key``
        (a native chunk file's id, or a virtual shard's whole key)."""
        if not self.counts.get(S.FAMILY_NAMES[family]):
            return False
        return next(iter(self.chain.search(prefix=S.key_prefix(family, key))), None) is not None

    def close(self) -> None:
        self.chain.close()


class FragmentScope(Scope):
    """A fragment's part of an export: the small families as their difference from the base's, chunk
    files the base lacks, tombstones counted, and the header naming the base."""

    blocks_allowed = False

    def __init__(self, base: Base, target: Path, export_time: int, include_chunks: bool):
        self.base = base
        self.link = base_link(target, base.location)
        self.covers = (base.export_time, export_time)
        self.include_chunks = include_chunks
        self.replaced: dict[bytes, int] = {}
        self.tally = HoldingsTally()
        self.view_counts: dict[str, int] | None = None  # given when a full export's counts are the view's

    def small(self, family: bytes, records: list[bytes]) -> list[bytes]:
        return list(diff(sorted(records), self.base.records(family), self.replaced))

    def new_files(self, entries: Iterable[bytes]) -> Iterator[bytes]:
        for entry in entries:
            if entry.startswith(virtualshards.MARK):
                held = self.base.holds(S.SHARD_INDEX, virtualshards.entry_key(entry))
            else:
                chunk_id, _, _, layout = R.chunk_file_entry(entry)
                held = self.base.holds(S.CHUNK_DATA, (chunk_id,)) if self.include_chunks else \
                    layout is None or self.base.holds(S.SHARD_INDEX, (chunk_id,))
            if not held:
                yield entry

    def watch(self, lists: Iterable[list[bytes]]) -> Iterator[list[bytes]]:
        return self.tally.watch(lists)

    def header(self, version: int, spec_version: int, export_time: int, counts: dict[str, int]) -> bytes:
        view = self.view_counts
        if view is None:
            view = dict(self.base.counts)
            for tag, written in self.tally.records.items():
                name = S.FAMILY_NAMES[tag]
                view[name] = view.get(name, 0) + written - self.replaced.get(tag, 0) - 2 * self.tally.tombstones.get(tag, 0)
        info = self.tally.info(self.covers, version)
        return S.record(S.HEADER, (), (S.FRAGMENT_FORMAT, spec_version, export_time, exporter_version(),
                                       tuple(sorted((k, n) for k, n in view.items() if n > 0)), info.encode()))

    def metadata(self, version: int, spec_version: int) -> dict:
        return {S.METADATA_KEY: {"format_version": S.FRAGMENT_FORMAT, "source_spec_version": spec_version,
                                 "fragment": {"base": self.link, "base_sha256": self.base.sha256}}}


def _check_repository(job: ExportJob, base: Base, infos: dict) -> None:
    """A one-line error unless the base is an archive of this repository whose snapshots the
    repository still holds, or lost only to expiration or garbage collection."""
    where = f"{base.location}"
    if not base.snapshots.keys() & infos.keys():
        raise ZSError(f"{where}: not an archive of the repository {job.location}: they share no snapshot")
    first = next(iter(base.chain.search(prefix=S.OPS)), None)
    ops = list(job.repo.ops_log())
    if first is not None and ops and S.split(first)[1][0] != ops[-1].updated_at:
        raise ZSError(f"{where}: not an archive of the repository {job.location}: their ops logs begin differently")
    gone = base.snapshots.keys() - infos.keys()
    if gone and ops and not any(update.type in _HISTORY_REWRITES for update in ops
                                if update.updated_at > base.export_time):
        raise ZSError(f"{where}: the repository {job.location} lacks {len(gone)} of its snapshots (such as "
                      f"{min(gone)}) and has not expired or collected any since; not an archive of this history")


def export_fragment(job: ExportJob, base_location: str | os.PathLike) -> ExportSummary:
    """Write into ``job.target`` a fragment holding what the archive at ``base_location`` lacks."""
    base = Base(base_location)
    try:
        target = os.path.abspath(job.target)
        if any("://" not in m.location and os.path.abspath(m.location) == target for m in base.chain.members):
            raise ZSError(f"{job.target}: is the base archive (or one it builds on); write the fragment to a new file")
        infos = {info.id: info for info in job.repo.snapshots()}
        _check_repository(job, base, infos)
        scope = FragmentScope(base, job.target, job.export_time, job.include_chunks)
        rewritten = [sid for sid, value in base.snapshots.items()
                     if sid not in infos or (infos[sid].parent_id, infos[sid].flushed_at, infos[sid].message,
                                             R.to_json(infos[sid].metadata)) != tuple(value[:4])]
        if rewritten:
            return _by_difference(job, scope)
        skip = frozenset(base.snapshots)
        parents = {info.parent_id for sid, info in infos.items() if sid not in skip} & skip
        plan = plan_export(job.repo, skip, {sid: base.arrays(sid) for sid in parents})
        return job.run(plan, scope)
    finally:
        base.close()


def _by_difference(job: ExportJob, scope: FragmentScope) -> ExportSummary:
    """The fragment as the difference between a full export made beside the target and the base's view."""
    full = job.directory / f".{job.target.name}.{os.getpid()}.full"
    try:
        done = job.run(plan_export(job.repo), Scope(), target=full)
        with ZS(str(full)) as z:
            header = S.split(next(iter(z.search(prefix=S.key_prefix(S.HEADER)))))[2]
            scope.view_counts = dict(header[4])
            new = (rec for rec in z.search(stop=S.HEADER))
            old = scope.base.chain.search(stop=S.HEADER)
            records = diff(new, old, scope.replaced)
            counts: dict[str, int] = {}

            def header_list() -> Iterator[list[bytes]]:
                for tag, n in scope.tally.records.items():
                    counts[S.FAMILY_NAMES[tag]] = n
                yield [scope.header(header[0], header[1], job.export_time, counts)]

            lists = scope.watch(_record_lists(records, job.options.chunk_codec == "none", str(full)))
            write_archive(job.target, job.partial(), _then(lists, header_list), scope.metadata(0, header[1]), job.options)
    finally:
        full.unlink(missing_ok=True)
    return ExportSummary(path=job.target, counts=counts, left_out=done.left_out, unindexed=done.unindexed)


def _then(first: Iterable, more: Callable[[], Iterable]) -> Iterator:
    yield from first
    yield from more()


def _record_lists(records: Iterable[bytes], stored: bool, where: str, size: int = 65536) -> Iterator[list[bytes]]:
    """Records in lists for the writer: the pieces of chunk files in blocks of their own, cut as an export
    cuts them; everything else (tombstones of pieces too) in lists of at most ``size``."""
    batch: list[bytes] = []
    pieces: list[bytes] = []
    for rec in records:
        if rec[:1] == S.CHUNK_DATA and not is_tombstone(rec):
            if batch:
                yield batch
                batch = []
            pieces.append(rec)
            continue
        if pieces:
            yield from regroup(pieces, stored, where)
            pieces = []
        batch.append(rec)
        if len(batch) >= size:
            yield batch
            batch = []
    if pieces:
        yield from regroup(pieces, stored, where)
    if batch:
        yield batch


def consolidate(fragment: str | os.PathLike, archive_path: str | os.PathLike, *, codec: str | None = None,
                compress_level: int | str | None = None, chunk_codec: str = "none",
                parallelism: int | str = "guess",
                approx_block_size: int = 256 * 1024, branching_factor: int = 1024) -> ExportSummary:
    """Write the view of the chain whose newest archive is ``fragment`` as one standalone archive at
    ``archive_path``: the records of a full export made at the fragment's time. ``codec`` defaults to
    the fragment's."""
    started = time.monotonic()
    target, directory = _target(archive_path)
    chain = open_view(fragment)
    try:
        if any("://" not in m.location and os.path.abspath(m.location) == os.path.abspath(target)
               for m in chain.members):
            raise ZSError(f"{target}: is an archive of the chain; write the consolidated archive to a new file")
        codec = codec or chain.codec
        if codec not in codecs.NAMES:
            raise ZSError(f"unknown codec {codec!r}: choose one of {', '.join(codecs.NAMES)}")
        options = WriteOptions(codec, compress_level, chunk_codec, resolve_parallelism(parallelism),
                               approx_block_size, branching_factor)
        newest = chain.members[0]
        header = newest.header
        counts = dict(header[4])
        version = header[0] if newest.info is None else newest.info.view_format
        record = S.record(S.HEADER, (), (version, header[1], header[2], header[3], tuple(sorted(counts.items()))))
        lists = _record_lists(chain.search(stop=S.HEADER), chunk_codec == "none", chain.name)
        metadata = {S.METADATA_KEY: {"format_version": version, "source_spec_version": header[1]}}
        write_archive(target, directory / f".{target.name}.{os.getpid()}.partial", _then(lists, lambda: [[record]]),
                      metadata, options)
    finally:
        chain.close()
    return ExportSummary(path=target, counts=counts, size=target.stat().st_size, seconds=time.monotonic() - started)
