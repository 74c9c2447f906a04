"""What an export writes of what it reads (:class:`Scope`: everything, a full archive; a fragment's scope
writes what its base lacks), and the exporter's name recorded in every header."""

from __future__ import annotations

from typing import Iterable

from zsarchive.archive.format import schema
from zsarchive.archive.format.header import ArchiveHeader, full_format, marker_metadata
from zsarchive.archive.write.virtualdata import KeptRanges
from zsarchive.archive.write.stream import Batch
from zsarchive.version import VERSION


def exporter_version() -> str:
    """``zsarchive <version>``: the exporter that wrote an archive, recorded in its header."""
    return f"zsarchive {VERSION}"


class Scope:
    """What an export writes of what it reads: here everything, a full archive. A fragment's scope
    (:mod:`zsarchive.archive.write.incremental`) writes what its base lacks."""

    blocks_allowed = True
    """Whether chunk refs may reach the writer as built blocks (a fragment's scope reads every record)."""
    records_format = schema.FULL_FORMAT
    """The format the records follow (a fragment's: its base's)."""

    def __init__(self, include_virtual: bool = False, kept: KeptRanges | None = None) -> None:
        self.records_format = full_format(include_virtual)
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

    def to_writer(self, batches: Iterable[Batch]) -> Iterable[Batch]:
        """The batches of records on their way to the writer."""
        return batches

    def header(self, version: int, spec_version: int, export_time: int, counts: dict[str, int]) -> bytes:
        """The archive header record (``counts``: records written per family name)."""
        return ArchiveHeader(version, spec_version, export_time, exporter_version(), counts).record()

    def metadata(self, version: int, spec_version: int) -> dict:
        """The ZS header metadata."""
        return marker_metadata(version, spec_version)
