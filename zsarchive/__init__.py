"""zsarchive: a ZS v0.10 engine, and whole Icechunk histories archived as one ZS file.

The ZS engine: :class:`ZS` reads a ZS file (local or a URL), :class:`ZSWriter` writes one, :func:`validate`
checks one. Archives: :func:`export` writes an Icechunk repository's whole history into one ZS file,
:class:`RepoArchive` answers questions about it (refs, log, ls, chunks, diff ...), :func:`open_store`
opens any snapshot as a read-only Zarr store, :func:`consolidate` folds a chain of fragments into one
archive, :func:`backup` keeps a backup set (a directory or bucket prefix of archives) up to date, :func:`restore` writes an archive back as an Icechunk repository, :func:`checkout` writes one
snapshot as plain Zarr, :func:`open_dataset` / :func:`open_datatree` open a snapshot with xarray.
Errors: :class:`ZSError` (usage), :class:`ZSCorrupt` (bad bytes), :class:`NotFound` (a ref, path or
chunk the archive lacks). The names are imported on first use.
"""

from zsarchive.errors import ZSCorrupt, ZSError
from zsarchive.lazy import lazy_exports

_exports = lazy_exports(
    __name__,
    {
        "ZS": "zsarchive.zs.reader",
        "ZSWriter": "zsarchive.zs.writer",
        "validate": "zsarchive.zs.validate",
        "ValidationReport": "zsarchive.zs.validate",
        "RepoArchive": "zsarchive.archive",
        "NotFound": "zsarchive.archive",
        "export": "zsarchive.archive",
        "consolidate": "zsarchive.archive",
        "backup": "zsarchive.archive.backup:backup",
        "checkout": "zsarchive.restore.checkout",
        "IcechunkRepository": "zsarchive.icechunk:Repository",
        "restore": "zsarchive.restore",
        # the zarr store needs the optional ``zarr`` extra
        "open_store": "zsarchive.archive.zarrstore",
        "ArchiveStore": "zsarchive.archive.zarrstore",
        # and xarray, for these two
        "open_dataset": "zsarchive.frontends.xarray_backend",
        "open_datatree": "zsarchive.frontends.xarray_backend",
    },
)

__all__ = [
    "ZSError",
    "ZSCorrupt",
    "NotFound",
    "ZS",
    "ZSWriter",
    "validate",
    "ValidationReport",
    "RepoArchive",
    "export",
    "consolidate",
    "backup",
    "checkout",
    "IcechunkRepository",
    "restore",
    "open_store",
    "ArchiveStore",
    "open_dataset",
    "open_datatree",
    "__version__",
]


def __getattr__(name: str) -> object:
    if name == "__version__":
        from zsarchive.version import VERSION

        return VERSION
    return _exports(name)


def __dir__() -> list[str]:
    """The public API: imported lazily, so not yet in the module's namespace."""
    return sorted(__all__)
