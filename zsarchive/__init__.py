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
    "IcechunkRepository": "zsarchive.icechunk:Repository",
    # the zarr store needs the optional ``zarr`` extra
    "open_store": "zsarchive.archive.zarrstore",
    "ArchiveStore": "zsarchive.archive.zarrstore",
    # and xarray, for these two
    "open_dataset": "zsarchive.views.xarray_backend",
    "open_datatree": "zsarchive.views.xarray_backend",
})

__all__ = ["ZSError", "ZSCorrupt", "ZS", "ZSWriter", "validate", "ValidationReport", "RepoArchive", "export",
           "consolidate", "IcechunkRepository", "open_store", "ArchiveStore", "open_dataset", "open_datatree"]
