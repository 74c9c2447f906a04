"""Bringing a repository back: an archive into an Icechunk repository that icechunk opens."""

from zsarchive.lazy import lazy_exports

__getattr__ = lazy_exports(__name__, {"restore": "zsarchive.restore.repository",
                                      "RestoreSummary": "zsarchive.restore.repository"})

__all__ = ["RestoreSummary", "restore"]
