"""zsarchive: a ZS v0.10 engine, and whole Icechunk histories archived as one ZS file."""

from zsarchive.errors import ZSCorrupt, ZSError
from zsarchive.lazy import lazy_exports

__getattr__ = lazy_exports(__name__, {
    "ZS": "zsarchive.zs.reader",
    "ZSWriter": "zsarchive.zs.writer",
    "validate": "zsarchive.zs.validate",
    "ValidationReport": "zsarchive.zs.validate",
    "RepoArchive": "zsarchive.archive",
    "export": "zsarchive.archive",
    "consolidate": "zsarchive.archive",
    "checkout": "zsarchive.restore.checkout",
    "IcechunkRepository": "zsarchive.icechunk:Repository",
    "restore": "zsarchive.restore",
    # the zarr store needs the optional ``zarr`` extra
    "open_store": "zsarchive.archive.zarrstore",
    "ArchiveStore": "zsarchive.archive.zarrstore",
})

__all__ = ["ZSError", "ZSCorrupt", "ZS", "ZSWriter", "validate", "ValidationReport", "RepoArchive", "export",
           "consolidate", "checkout", "IcechunkRepository", "restore", "open_store", "ArchiveStore"]
