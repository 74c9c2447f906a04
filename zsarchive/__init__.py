"""zsarchive: a ZS v0.10 engine, and whole Icechunk histories archived as one ZS file."""

from zsarchive.errors import ZSCorrupt, ZSError
from zsarchive.reader import ZS
from zsarchive.writer import ZSWriter
from zsarchive.validate import ValidationReport, validate
from zsarchive.archive import RepoArchive, export
from zsarchive.icechunk import Repository as IcechunkRepository

__all__ = ["ZSError", "ZSCorrupt", "ZS", "ZSWriter", "validate", "ValidationReport", "RepoArchive", "export",
           "IcechunkRepository",
           "open_store", "ArchiveStore"]


def __getattr__(name: str):
    # the zarr store needs the optional ``zarr`` extra: import it only when asked for
    if name in ("open_store", "ArchiveStore"):
        from zsarchive import zarrstore

        return getattr(zarrstore, name)
    raise AttributeError(f"module 'zsarchive' has no attribute {name!r}")
