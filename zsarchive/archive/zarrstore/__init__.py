"""A read-only zarr v3 store over one snapshot of an archive."""

from zsarchive.archive.zarrstore.store import ArchiveStore, open_store

__all__ = ["ArchiveStore", "open_store"]
