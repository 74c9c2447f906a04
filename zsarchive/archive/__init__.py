"""Repo archives: an Icechunk repository's whole history as one ZS file of sorted records."""

from zsarchive.archive.query import RepoArchive
from zsarchive.archive.reading import NotFound, archive_metadata, header_summary
from zsarchive.archive.refspec import parse_ref, parse_time
from zsarchive.lazy import lazy_exports

# exporting needs the Icechunk decoders; querying an archive does not
__getattr__ = lazy_exports(__name__, {"ExportSummary": "zsarchive.archive.exporter",
                                      "export": "zsarchive.archive.exporter",
                                      "consolidate": "zsarchive.archive.incremental"})

__all__ = ["ExportSummary", "NotFound", "RepoArchive", "archive_metadata", "consolidate", "export", "header_summary",
           "parse_ref", "parse_time"]
