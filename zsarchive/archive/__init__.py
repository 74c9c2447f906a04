"""Repo archives: an Icechunk repository's whole history as one ZS file of sorted records."""

from zsarchive.archive.format.header import archive_metadata
from zsarchive.archive.read.model import ChunkInfo, NodeInfo
from zsarchive.archive.read.reader import NotFound, header_summary
from zsarchive.archive.read.refspec import parse_ref
from zsarchive.archive.read.repoarchive import RepoArchive
from zsarchive.times import parse_time
from zsarchive.lazy import lazy_exports

# exporting needs the Icechunk decoders; querying an archive does not
__getattr__ = lazy_exports(
    __name__,
    {
        "ExportOptions": "zsarchive.archive.write.options",
        "ExportSummary": "zsarchive.archive.write.job",
        "export": "zsarchive.archive.write.api",
        "consolidate": "zsarchive.archive.write.incremental",
    },
)

__all__ = [
    "ChunkInfo",
    "ExportOptions",
    "ExportSummary",
    "NodeInfo",
    "NotFound",
    "RepoArchive",
    "archive_metadata",
    "consolidate",
    "export",
    "header_summary",
    "parse_ref",
    "parse_time",
]
