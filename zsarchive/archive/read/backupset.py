"""A backup set read as one archive: of the archives ``zs backup`` keeps in a directory or object-store
prefix (:mod:`zsarchive.archive.format.backupset`), the newest whose chain is whole.

Archives appear in a set only complete (written elsewhere, then linked or uploaded under their name), so
the newest name is nearly always the answer; a chain that does not open (a base deleted by hand) is passed
over for the one before it, down to the newest full archive, and named in :attr:`BackupSet.passed_over`.
"""

from __future__ import annotations

import os
from typing import Callable

from zsarchive.archive.format.backupset import FULL, LOCK, MAX_SETTINGS, SETTINGS, ArchiveName, Settings, archives
from zsarchive.archive.read.chain import Chain
from zsarchive.errors import ZSError
from zsarchive.io.location import Location, parse_location
from zsarchive.io.sink import Directory, open_sink
from zsarchive.zs.reader import ZS


class BackupSet:
    """The archives of a set at a directory or ``s3://``, ``gs://``, ``az://`` prefix."""

    def __init__(self, location: str | os.PathLike | Location, storage_options: dict | None = None, anon: bool = False):
        self.location = parse_location(location, storage_options, anon)
        if self.location.kind == "http":
            raise ZSError(
                f"{self.location.url}: a backup set is read from a directory or an s3://, gs:// or az:// "
                "prefix (a plain HTTP server cannot list it); give the archive file's URL instead"
            )
        self.directory: Directory = open_sink(self.location)
        self.passed_over: list[tuple[str, str]] = []
        """(archive, why) of newer archives whose chain did not open, by :meth:`open_newest`."""

    @property
    def name(self) -> str:
        return self.location.url

    def where(self, archive: str) -> str:
        """The path or URL of an archive of the set."""
        return self.directory.url(archive)

    def archives(self) -> list[ArchiveName]:
        """The set's archives, oldest first."""
        return archives(list(self.directory.listing()))

    def settings(self) -> Settings | None:
        """The remembered settings, None before the first run."""
        raw = self.directory.get(SETTINGS, MAX_SETTINGS)
        return None if raw is None else Settings.decode(raw, self.where(SETTINGS))

    def holds_set(self) -> bool:
        """Whether anything here belongs to a backup set (settings, a lock, an archive)."""
        listed = self.directory.listing()
        return SETTINGS in listed or LOCK in listed or bool(archives(list(listed)))

    def open_newest(self, open_file: Callable[[str], ZS | Chain]) -> ZS | Chain:
        """The newest archive whose chain opens (``open_file`` opens one archive with its bases), read as one
        archive; a one-line error when there is none."""
        names = self.archives()
        if not names:
            what = "holds no archive yet" if self.holds_set() else "is no backup set (no archive, no zsbackup.json)"
            raise ZSError(f"{self.name}: {what}; zs backup REPO {self.name} makes the first")
        self.passed_over = []
        for archive in reversed(names):
            try:
                return open_file(self.where(archive.name))
            except ZSError as exc:
                if archive.kind == FULL:
                    raise ZSError(
                        f"{self.where(archive.name)}: the newest full archive of the set does not open: {exc}"
                    ) from None
                self.passed_over.append((archive.name, str(exc)))
        raise ZSError(f"{self.name}: no chain of the set opens (the newest: {self.passed_over[0][1]})")
