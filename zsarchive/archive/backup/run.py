"""``zs backup REPO DEST``: keep a backup set up to date with a repository, one run at a time.

A run is a pipeline of named stages (docs/backup.rst):

1. :func:`take_lock` -- the set's lock, created only if absent; another run refuses or waits;
2. :func:`settle` -- the options: those given, else those the set remembers (``zsbackup.json``), else the
   defaults; a change of what the records hold starts a new chain, and the settings file is replaced once
   the run's archive is in the set;
3. :func:`export_next` -- into a work directory, a full archive (first run, new chain) or a fragment
   holding what the newest chain lacks; a fragment holding nothing means "up to date" and is dropped;
4. :func:`publish` -- the archive put into the set under its final name, create-only (a hard link in a
   directory, a conditional or multipart put in an object store): it appears whole or not at all;
5. :func:`consolidate_if_due` -- a chain deeper than ``max_chain`` fragments, or whose fragments
   outgrow ``max_fragments_size`` times its full archive, is written as one full archive, validated in
   the work directory, then published: a later run builds on it only once it has been checked.

A run killed at any point leaves the set as it was, or with one more complete archive (two when it
consolidated); the lock it leaves is broken by a later run given ``break_lock`` (``--break-lock``).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable, Iterator, Mapping

from zsarchive.archive.format import schema
from zsarchive.archive.format.backupset import FRAGMENT, FULL, LOCK, SETTINGS, Settings, next_name
from zsarchive.archive.format.header import ArchiveHeader
from zsarchive.archive.read.backupset import BackupSet
from zsarchive.archive.read.chain import Chain
from zsarchive.archive.read.reader import open_archive
from zsarchive.archive.read.validate import validate_file
from zsarchive.archive.write.api import export
from zsarchive.archive.write.job import ExportSummary
from zsarchive.archive.write.incremental import consolidate
from zsarchive.errors import ZSError
from zsarchive.icechunk.kinds import REPOSITORY, local_kind
from zsarchive.io.location import parse_location
from zsarchive.io.lock import Lock
from zsarchive.io.sink import LocalSink
from zsarchive.zs.reader import ZS

WORK = ".zsbackup-work"
"""The work directory inside a local set (on its file system, so publishing is a hard link)."""


@dataclass(frozen=True)
class BackupOptions:
    """What :func:`backup` does. The archive options left None are those the set remembers, or the
    defaults of :class:`~zsarchive.archive.format.backupset.Settings` on the first run.

    ``wait``: seconds to wait for another run's lock (None: refuse at once; ``float('inf')``: wait as long
    as it takes). ``break_lock``: break a stale lock (its holder gone from this machine, or older than
    ``stale_after`` seconds by the set's own clock). ``lock=False`` runs without a lock, where nothing else
    can run at the same time (an object store ignoring create-only writes). ``storage_options`` and
    ``anon`` reach the repository; the set is reached with the environment's credentials. ``workdir``:
    where an object-store set's archives are written before they are uploaded (default: the system's
    temporary directory). ``prune``: also list the archives no chain of the set needs.
    """

    include_chunks: bool | None = None
    codec: str | None = None
    compress_level: int | str | None = None
    chunk_codec: str | None = None
    authorize: Mapping[str, Mapping[str, str]] | None = None
    max_chain: int | None = None
    max_fragments_size: float | None = None
    parallelism: int | str = "guess"
    storage_options: Mapping[str, str] | None = None
    anon: bool = False
    wait: float | None = None
    break_lock: bool = False
    stale_after: float = 86400.0
    lock: bool = True
    workdir: str | os.PathLike | None = None
    prune: bool = False
    progress: Callable[[int, int], None] | None = None
    report: Callable[[str], None] | None = None
    """Hears what a run waits for, in one line."""


@dataclass
class Written:
    """An archive a run added to the set."""

    name: str
    location: str
    kind: str
    records: int
    size: int
    consolidated: int = 0
    """For a consolidated full archive: the archives of the chain it replaces."""


@dataclass
class BackupResult:
    """What a run did: the archives it wrote (none: the set was up to date), the newest chain after it
    (its locations, newest first) and, when asked, the archives no chain needs."""

    dest: str
    written: list[Written] = field(default_factory=list)
    chain: list[str] = field(default_factory=list)
    prunable: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def up_to_date(self) -> bool:
        """True when the run found nothing new and wrote nothing."""
        return not self.written

    def describe(self) -> str:
        """What the run did, in one line (``zs backup`` prints it)."""
        if self.up_to_date:
            return f"up to date: {self.chain[0]} (a chain of {len(self.chain)})"
        parts = []
        for w in self.written:
            what = f"consolidating the chain of {w.consolidated}, validated" if w.consolidated else w.kind
            parts.append(f"{w.location} ({what}): {w.records} records, {w.size} bytes")
        return f"wrote {' and '.join(parts)} in {self.seconds:.2f} s"


def backup(
    repo: str | os.PathLike, dest: str | os.PathLike, options: BackupOptions | None = None, **choices
) -> BackupResult:
    """Bring the backup set at ``dest`` (a directory or an ``s3://``, ``gs://``, ``az://`` prefix) up to date
    with the repository at ``repo``: a full archive on the first run, then a fragment of what is new, a
    consolidated full archive when the chain is due; nothing when nothing changed. Options as
    :class:`BackupOptions` (or its fields as keyword arguments)."""
    if options is None:
        options = BackupOptions(**choices)
    elif choices:
        raise ZSError(f"backup: give options or keyword arguments, not both ({', '.join(sorted(choices))})")
    started = time.monotonic()
    dest_set = BackupSet(dest)
    if "repo" in dest_set.directory.listing() or (
        dest_set.location.is_local and local_kind(dest_set.name) == REPOSITORY
    ):
        raise ZSError(
            f"{dest_set.name}: holds an Icechunk repository; give the backups a directory or prefix of their own"
        )
    result = BackupResult(dest_set.name)
    with take_lock(dest_set, options), work_directory(dest_set, options) as work:
        remembered = dest_set.settings()
        settings = settle(remembered, _repository_name(repo), options)
        staged = export_next(dest_set, repo, settings, options, work, new_chain=_new_chain(settings, remembered))
        if staged is not None:
            result.written.append(publish(dest_set, staged, work))
        if settings != remembered:  # only now: a run killed before leaves the old settings, and starts again
            dest_set.directory.put(SETTINGS, settings.encode())
        consolidated = consolidate_if_due(dest_set, settings, options, work)  # also a chain left due before
        if consolidated is not None:
            result.written.append(consolidated)
        result.chain, result.prunable = chain_and_prunable(dest_set)
    if not options.prune:
        result.prunable = []
    result.seconds = time.monotonic() - started
    return result


# -- 1. the lock -----------------------------------------------------------------------------------


@contextlib.contextmanager
def take_lock(dest_set: BackupSet, options: BackupOptions) -> Iterator[None]:
    """Hold the set's lock while the block runs (none with ``lock=False``)."""
    if not options.lock:
        yield
        return
    lock = Lock(dest_set.directory, LOCK)
    lock.acquire(options.wait, options.break_lock, options.stale_after, options.report)
    try:
        yield
    finally:
        lock.release()


@contextlib.contextmanager
def work_directory(dest_set: BackupSet, options: BackupOptions) -> Iterator[Path]:
    """Where the run writes before publishing: ``.zsbackup-work`` inside a local set (what a killed run
    left there is removed first: the lock says no other run uses it), a temporary directory otherwise."""
    if isinstance(dest_set.directory, LocalSink):
        work = dest_set.directory.root / WORK
        shutil.rmtree(work, ignore_errors=True)
        try:
            work.mkdir(parents=True)
        except OSError as exc:
            raise ZSError(f"{work}: cannot make the work directory: {exc.strerror}") from None
    else:
        work = Path(tempfile.mkdtemp(prefix="zsbackup-", dir=options.workdir))
    try:
        yield work
    finally:
        shutil.rmtree(work, ignore_errors=True)


# -- 2. the options --------------------------------------------------------------------------------

_ARCHIVE_OPTIONS = (
    "include_chunks",
    "codec",
    "compress_level",
    "chunk_codec",
    "authorize",
    "max_chain",
    "max_fragments_size",
)


def settle(remembered: Settings | None, repo: str, options: BackupOptions) -> Settings:
    """The run's settings: each option given, else remembered, else the default."""
    given = {name: getattr(options, name) for name in _ARCHIVE_OPTIONS if getattr(options, name) is not None}
    if "authorize" in given:
        given["authorize"] = {
            str(k): {str(a): str(b) for a, b in dict(v).items()} for k, v in given["authorize"].items()
        }
    settings = replace(remembered or Settings(repository=repo), **given)
    settings.check()
    return settings


def _repository_name(repo: str | os.PathLike) -> str:
    """The repository as the settings remember it: a local one by its absolute path (cron runs elsewhere)."""
    location = parse_location(repo)
    return os.path.abspath(location.url) if location.is_local else location.url


def _new_chain(settings: Settings, remembered: Settings | None) -> bool:
    """Whether the run must start a new chain: the records an archive holds change with the settings
    (or the set's archives were made with settings it does not remember)."""
    return remembered is None or any(getattr(settings, k) != getattr(remembered, k) for k in Settings.RECORDS)


# -- 3. export -------------------------------------------------------------------------------------


@dataclass
class Staged:
    """An archive written in the work directory, not yet in the set."""

    path: Path
    kind: str
    records: int


def export_next(
    dest_set: BackupSet,
    repo: str | os.PathLike,
    settings: Settings,
    options: BackupOptions,
    work: Path,
    new_chain: bool,
) -> Staged | None:
    """The next archive of the set, in ``work``: a fragment of what the newest chain lacks, or a full
    archive when there is no chain or ``new_chain``; None when the fragment holds nothing."""
    names = dest_set.archives()
    base = None if new_chain or not names else _newest(dest_set)
    kind = FULL if base is None else FRAGMENT
    target = work / next_name(names, int(time.time()), kind)
    summary = export(
        repo,
        target,
        include_chunks=settings.include_chunks,
        codec=settings.codec,
        compress_level=settings.compress_level,
        chunk_codec=settings.chunk_codec,
        authorize=settings.authorize,
        parallelism=options.parallelism,
        storage_options=options.storage_options,
        anon=options.anon,
        progress=options.progress,
        base=None if base is None else dest_set.where(base),
        base_link=base,
    )
    if kind == FRAGMENT and not _holds_anything(target):
        target.unlink()
        return None
    return Staged(target, kind, _records(summary))


def _newest(dest_set: BackupSet) -> str:
    """The name of the newest archive of the set's newest whole chain."""
    chain = _newest_chain(dest_set)
    try:
        return os.path.basename(chain.members[0].location if isinstance(chain, Chain) else chain.name)
    finally:
        chain.close()


def _newest_chain(dest_set: BackupSet) -> ZS | Chain:
    """The set's newest whole chain, as a reader opens it."""
    return open_archive(dest_set.name)[0]


def _holds_anything(fragment: Path) -> bool:
    with ZS(str(fragment)) as z:
        info = ArchiveHeader.read(z, str(fragment)).fragment
    return info is not None and bool(info.holdings)


def _records(summary: ExportSummary) -> int:
    return sum(n for name, n in summary.counts.items() if name != schema.FAMILY_NAMES[schema.HEADER])


# -- 4. publish ------------------------------------------------------------------------------------


def publish(dest_set: BackupSet, staged: Staged, work: Path) -> Written:
    """Put a staged archive into the set under its name, create-only, and drop it from ``work``."""
    size = staged.path.stat().st_size
    dest_set.directory.put_file_new(staged.path.name, staged.path)
    staged.path.unlink()
    return Written(staged.path.name, dest_set.where(staged.path.name), staged.kind, staged.records, size)


# -- 5. consolidation ------------------------------------------------------------------------------


def consolidate_if_due(dest_set: BackupSet, settings: Settings, options: BackupOptions, work: Path) -> Written | None:
    """When the newest chain has more than ``max_chain`` fragments, or their bytes exceed
    ``max_fragments_size`` times its full archive's: its view as one full archive, validated, published."""
    chain = _newest_chain(dest_set)
    try:
        if not isinstance(chain, Chain):
            return None
        members = chain.members
        fragments = sum(m.zs.total_file_length for m in members[:-1])
        due = (
            len(members) - 1 > settings.max_chain
            or fragments > settings.max_fragments_size * members[-1].zs.total_file_length
        )
        newest = members[0].location
        count = len(members)
    finally:
        chain.close()
    if not due:
        return None
    name = next_name(dest_set.archives(), int(time.time()), FULL)
    target = work / name
    summary = consolidate(
        newest,
        target,
        codec=settings.codec,
        compress_level=settings.compress_level,
        chunk_codec=settings.chunk_codec,
        parallelism=options.parallelism,
    )
    try:
        validate_file(str(target), parallelism=options.parallelism)
    except ZSError as exc:
        raise ZSError(
            f"{dest_set.where(name)}: the consolidated archive failed validation, so it was not added: {exc}"
        ) from None
    written = publish(dest_set, Staged(target, FULL, _records(summary)), work)
    written.consolidated = count
    return written


def chain_and_prunable(dest_set: BackupSet) -> tuple[list[str], list[str]]:
    """The newest chain's archives (newest first), and every other archive of the set: none of it is
    read for the set any more."""
    chain = _newest_chain(dest_set)
    try:
        members = [m.location for m in chain.members] if isinstance(chain, Chain) else [chain.name]
    finally:
        chain.close()
    kept = {os.path.basename(m) for m in members}
    return members, [dest_set.where(a.name) for a in dest_set.archives() if a.name not in kept]
