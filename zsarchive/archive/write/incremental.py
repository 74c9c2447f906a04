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
from typing import Any, Callable, Iterable, Iterator

from zsarchive.archive.write import records as repo_records
from zsarchive.archive.format import schema
from zsarchive.archive.format.views import NodeValue, OpsKey, OpsValue, SnapshotKey, SnapshotValue
from zsarchive.archive.write.chunkfiles import NativeFileEntry, VirtualShardEntry
from zsarchive.archive.format import tuples
from zsarchive.archive.format.pieces import read_virtual, regroup
from zsarchive.archive.format.header import (
    ArchiveHeader,
    full_format,
    has_chunk_pieces,
    history_from_timeline,
    keeps_file_forms,
    marker_metadata,
)
from zsarchive.archive.format.views import VirtualAliasValue, VirtualPieceKey, VirtualRangeKey, fits
from zsarchive.archive.write.virtualdata import KeptRanges
from zsarchive.archive.write.exporter import write_archive
from zsarchive.archive.write.job import ExportJob, ExportSummary, target_path
from zsarchive.archive.write.options import WriteOptions, given
from zsarchive.archive.write.plan import plan_export
from zsarchive.archive.write.scope import Scope, exporter_version
from zsarchive.archive.write.stream import Batch, PiecesBlock, RecordList
from zsarchive.archive.read.chain import Chain, open_chain
from zsarchive.archive.format.fragments import HoldingsTally, is_tombstone
from zsarchive.archive.write.fragments import base_link, checked_link, diff
from zsarchive.archive.read.reader import open_archive, records_under
from zsarchive.errors import ZSError
from zsarchive.icechunk.model import SnapshotInfo
from zsarchive.io.location import is_url, local_path
from zsarchive.io.outfile import check_new_target
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
        self.newest = newest.location
        """Where the archive a fragment links to is (of a backup set: its newest)."""
        self.header: ArchiveHeader = newest.header
        self.sha256 = self.chain.data_sha256.hex()
        self.counts: dict[str, int] = dict(self.header.counts)
        root = self.chain.members[-1].header
        if not history_from_timeline(root.format_version):
            self.close()
            raise ZSError(
                f"{self.location}: an archive of format {root.format_version} keeps one chunk history "
                "record per change, formats 5 and later derive them from the chunk refs; "
                "export the repository again to build on it"
            )
        if not has_chunk_pieces(root.format_version) and self.counts.get(schema.FAMILY_NAMES[schema.CHUNK_DATA]):
            self.close()
            raise ZSError(
                f"{self.location}: its chunk bytes are stored whole (format "
                f"{root.format_version}); export the repository again to build on it"
            )
        self.snapshots = {SnapshotKey.decode(k).snapshot_id: v for k, v in records_under(self.chain, schema.SNAPSHOT)}
        self.records_format = root.format_version if newest.info is None else newest.info.records_format
        """The format its chain's records follow (a fragment keeps its base's, or moves it to format 7)."""

    @property
    def export_time(self) -> int:
        """When the base (its newest fragment) was made, in microseconds."""
        return self.header.export_time

    def records(self, family: bytes) -> list[bytes]:
        """Every record of a small family in the view."""
        return list(self.chain.search(prefix=family))

    def arrays(self, snapshot_id: str) -> tuple[dict[str, tuple], dict[str, str]]:
        """(array node id -> manifests, array node id -> timeline start) of a snapshot the base holds."""
        manifests, since = {}, {}
        for _, value in records_under(self.chain, schema.NODE, (snapshot_id,)):
            node = NodeValue.decode(value)
            if node.is_array:
                manifests[node.node_id] = node.manifests
                since[node.node_id] = node.since
        return manifests, since

    def holds(self, family: bytes, key: tuple) -> bool:
        """Whether the view holds a record of ``family`` (``D``, ``E``, ``I`` or ``Y``) whose key begins with
        ``key`` (a native chunk file's id, a virtual range's or shard's whole key, a metadata file's path)."""
        if not self.counts.get(schema.FAMILY_NAMES[family]):
            return False
        return next(iter(self.chain.search(prefix=schema.key_prefix(family, key))), None) is not None

    def close(self) -> None:
        self.chain.close()


class BaseRanges(KeptRanges):
    """The virtual ranges a base's view keeps; ``copy``: written again by a full export that is compared
    with the base (so that the difference keeps them, however their sources fared since)."""

    def __init__(self, base: Base, copy: bool = False):
        self.base = base
        self.copy = copy

    def holds(self, key: VirtualRangeKey) -> bool:
        return self.base.holds(schema.VIRTUAL_DATA, key)

    def pins(self, span: tuple[str, int, int]) -> list[tuple]:
        if not self.base.counts.get(schema.FAMILY_NAMES[schema.VIRTUAL_DATA]):
            return []
        found = dict.fromkeys(
            VirtualPieceKey.decode(key).range.pin
            for key, _ in records_under(self.base.chain, schema.VIRTUAL_DATA, span)
            if fits(VirtualPieceKey, key)
        )
        return list(found)

    def read(self, key: VirtualRangeKey) -> bytes:
        data = read_virtual(self.base.chain, key, key.offset, key.stop)
        if data is None:
            raise ZSError(
                f"{self.base.location}: does not keep the virtual range {key.location} [{key.offset}, {key.stop})"
            )
        return bytes(data)

    def records(self, key: VirtualRangeKey) -> list[bytes]:
        prefix = schema.key_prefix(schema.VIRTUAL_DATA, key)
        found = [bytes(rec) for rec in self.base.chain.search(prefix=prefix)]
        if len(found) == 1 and tuples.key_end(found[0]) == len(prefix) + 1:  # an alias: with the pieces it names
            alias = VirtualAliasValue.decode(schema.split(found[0])[2], self.base.location)
            found += self.records(key.under(tuple(alias)))
        return found


class FragmentScope(Scope):
    """A fragment's part of an export: the small families as their difference from the base's, chunk
    files and virtual ranges the base lacks, tombstones counted, and the header naming the base."""

    blocks_allowed = False

    def __init__(
        self,
        base: Base,
        target: Path,
        export_time: int,
        include_chunks: bool,
        link: str | None = None,
        include_virtual: bool = False,
    ):
        self.base = base
        self.link = base_link(target, base.newest) if link is None else checked_link(link)
        self.covers = (base.export_time, export_time)
        self.include_chunks = include_chunks
        self.replaced: dict[bytes, int] = {}
        self.tally = HoldingsTally()
        self.view_counts: dict[str, int] | None = None  # given when a full export's counts are the view's
        # a fragment keeps its base's format, or moves a format 6 chain to 7 when it keeps virtual bytes
        self.records_format = max(base.records_format, full_format(True)) if include_virtual else base.records_format

    def kept_virtual(self) -> KeptRanges:
        return BaseRanges(self.base)

    def small_family(self, family: bytes, records: list[bytes]) -> list[bytes]:
        return list(diff(sorted(records), self.base.records(family), self.replaced))

    def unheld(self, family: bytes, records: list[bytes]) -> list[bytes]:
        return [rec for rec in records if not self.base.holds(family, schema.split(rec)[1])]

    def chunk_files_to_write(self, entries: Iterable[bytes]) -> Iterator[bytes]:
        for entry in entries:
            chunk_id, _, _, layout = NativeFileEntry.parse(entry)
            held = (
                self.base.holds(schema.CHUNK_DATA, (chunk_id,))
                if self.include_chunks
                else layout is None or self.base.holds(schema.SHARD_INDEX, (chunk_id,))
            )
            if not held:
                yield entry

    def shards_to_index(self, entries: Iterable[bytes]) -> Iterator[bytes]:
        for entry in entries:
            shard = VirtualShardEntry.parse(entry)
            if shard.layout is not None and not self.base.holds(schema.SHARD_INDEX, shard.key):
                yield entry

    def to_writer(self, batches: Iterable[Batch]) -> Iterator[Batch]:
        for batch in batches:  # a fragment's records come as lists: blocks_allowed is False
            self.tally.add(batch.records)
            yield batch

    def header(self, version: int, spec_version: int, export_time: int, counts: dict[str, int]) -> bytes:
        view = self.view_counts
        if view is None:
            view = dict(self.base.counts)
            for tag, written in self.tally.records.items():
                name = schema.FAMILY_NAMES[tag]
                view[name] = (
                    view.get(name, 0) + written - self.replaced.get(tag, 0) - 2 * self.tally.tombstones.get(tag, 0)
                )
        info = self.tally.info(self.covers, self.records_format)
        return ArchiveHeader(
            schema.FRAGMENT_FORMAT,
            spec_version,
            export_time,
            exporter_version(),
            {name: n for name, n in view.items() if n > 0},
            info,
        ).record()

    def metadata(self, version: int, spec_version: int) -> dict:
        return marker_metadata(
            schema.FRAGMENT_FORMAT, spec_version, {"base": self.link, "base_sha256": self.base.sha256}
        )


def _check_repository(job: ExportJob, base: Base, infos: dict) -> None:
    """A one-line error unless the base is an archive of this repository whose snapshots the
    repository still holds, or lost only to expiration or garbage collection."""
    where = f"{base.location}"
    if not base.snapshots.keys() & infos.keys():
        raise ZSError(f"{where}: not an archive of the repository {job.location}: they share no snapshot")
    first = next(iter(base.chain.search(prefix=schema.OPS)), None)
    ops = list(job.repo.ops_log())
    if first is not None and ops and OpsKey.decode(schema.split(first)[1]).updated_at != ops[-1].updated_at:
        raise ZSError(f"{where}: not an archive of the repository {job.location}: their ops logs begin differently")
    gone = base.snapshots.keys() - infos.keys()
    # "since the base" is what the repository's own log holds and the base's does not: times from two
    # machines' clocks (the writers' and the exporter's) are never compared
    held = set()
    for k, value in records_under(base.chain, schema.OPS):
        updated_at = OpsKey.decode(k).updated_at
        entry = OpsValue.decode(value)
        held.add((updated_at, entry.type, entry.details))
    if (
        gone
        and ops
        and not any(
            update.type in _HISTORY_REWRITES
            for update in ops
            if (update.updated_at, update.type, repo_records.to_json(update.details)) not in held
        )
    ):
        raise ZSError(
            f"{where}: the repository {job.location} lacks {len(gone)} of its snapshots (such as "
            f"{min(gone)}) and has not expired or collected any since; not an archive of this history"
        )


def _rewritten(info: SnapshotInfo, value: tuple) -> bool:
    """Whether the repository's snapshot differs from the base's ``S`` record of it (manifests aside)."""
    stored = SnapshotValue.decode(value)
    return (info.parent_id, info.flushed_at, info.message, repo_records.to_json(info.metadata)) != (
        stored.parent_id,
        stored.flushed_at,
        stored.message,
        stored.metadata,
    )


def export_fragment(job: ExportJob, base_location: str | os.PathLike) -> ExportSummary:
    """Write into ``job.target`` a fragment holding what the archive at ``base_location`` lacks."""
    base = Base(base_location)
    try:
        if _in_chain(base.chain, job.target):
            raise ZSError(f"{job.target}: is the base archive (or one it builds on); write the fragment to a new file")
        infos = {info.id: info for info in job.repo.snapshots()}
        _check_repository(job, base, infos)
        if job.choices.include_virtual and not keeps_file_forms(base.records_format):
            raise ZSError(
                f"{base.location}: an archive of format {base.records_format} cannot take virtual chunk "
                "bytes in a fragment (format 6 and later can); export the repository again"
            )
        scope = FragmentScope(
            base, job.target, job.export_time, job.include_chunks, job.choices.base_link, job.choices.include_virtual
        )
        rewritten = [sid for sid, value in base.snapshots.items() if sid not in infos or _rewritten(infos[sid], value)]
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
        whole = Scope(kept=BaseRanges(scope.base, copy=True))
        whole.records_format = scope.records_format  # the records the base's chain follows
        done = job.run(plan_export(job.repo), whole, target=full)
        with ZS(str(full)) as z:
            header = ArchiveHeader.read(z, str(full))
            scope.view_counts = dict(header.counts)
            new = (rec for rec in z.search(stop=schema.HEADER))
            old = scope.base.chain.search(stop=schema.HEADER)
            records = diff(new, old, scope.replaced)
            counts: dict[str, int] = {}

            def header_list() -> Iterator[RecordList]:
                for tag, n in scope.tally.records.items():
                    counts[schema.FAMILY_NAMES[tag]] = n
                yield RecordList([scope.header(header.format_version, header.spec_version, job.export_time, counts)])

            lists = scope.to_writer(record_lists(records, job.options.chunk_codec == "none", str(full)))
            write_archive(
                job.target, _followed_by(lists, header_list), scope.metadata(0, header.spec_version), job.options
            )
    finally:
        full.unlink(missing_ok=True)
    return ExportSummary(
        path=job.target, counts=counts, left_out=done.left_out, unindexed=done.unindexed, virtual=done.virtual
    )


def _followed_by(first: Iterable, more: Callable[[], Iterable]) -> Iterator:
    """Everything ``first`` yields, then what ``more()`` (called only then) yields."""
    yield from first
    yield from more()


def record_lists(records: Iterable[bytes], stored: bool, where: str, size: int = 65536) -> Iterator[Batch]:
    """Records in batches for the writer: the pieces of chunk files and of virtual ranges in blocks of their
    own, cut as an export cuts them; everything else (tombstones of pieces too) in lists of at most ``size``."""
    batch: list[bytes] = []
    pieces: list[bytes] = []
    for rec in records:
        if rec[:1] in (schema.CHUNK_DATA, schema.VIRTUAL_DATA) and not is_tombstone(rec):
            if batch:
                yield RecordList(batch)
                batch = []
            if pieces and pieces[-1][:1] != rec[:1]:  # chunk files and virtual ranges share no block
                yield from map(PiecesBlock.of, regroup(pieces, stored, where))
                pieces = []
            pieces.append(rec)
            continue
        if pieces:
            yield from map(PiecesBlock.of, regroup(pieces, stored, where))
            pieces = []
        batch.append(rec)
        if len(batch) >= size:
            yield RecordList(batch)
            batch = []
    if pieces:
        yield from map(PiecesBlock.of, regroup(pieces, stored, where))
    if batch:
        yield RecordList(batch)


def consolidate(
    fragment: str | os.PathLike, archive_path: str | os.PathLike, options: WriteOptions | None = None, **choices: Any
) -> ExportSummary:
    """Write the view of the chain whose newest archive is ``fragment`` as one standalone archive at
    ``archive_path``: the records of a full export made at the fragment's time, written as ``options`` say,
    or the keyword arguments of :class:`~zsarchive.archive.write.options.WriteOptions` when ``options`` is not
    given (``codec`` defaults to the fragment's)."""
    started = time.monotonic()
    chosen = given(WriteOptions, options, choices, "consolidate")
    target, _ = target_path(archive_path)
    check_new_target(target, chosen.overwrite)
    chain = open_view(fragment)
    try:
        if _in_chain(chain, target):
            raise ZSError(f"{target}: is an archive of the chain; write the consolidated archive to a new file")
        checked = chosen.checked(default_codec=chain.codec)
        newest = chain.members[0]
        header = newest.header
        counts = dict(header.counts)
        version = header.format_version if newest.info is None else newest.info.records_format
        record = header._replace(format_version=version, fragment=None).record()
        batches = record_lists(chain.search(stop=schema.HEADER), checked.chunk_codec == "none", chain.name)
        write_archive(
            target,
            _followed_by(batches, lambda: [RecordList([record])]),
            marker_metadata(version, header.spec_version),
            checked,
            "consolidate",
        )
    finally:
        chain.close()
    return ExportSummary(path=target, counts=counts, size=target.stat().st_size, seconds=time.monotonic() - started)


def _in_chain(chain: Chain, target: str | os.PathLike) -> bool:
    """Whether ``target`` is one of the chain's local archives (writing it would destroy the chain)."""
    target = os.path.abspath(target)
    return any(not is_url(m.location) and os.path.abspath(local_path(m.location)) == target for m in chain.members)
