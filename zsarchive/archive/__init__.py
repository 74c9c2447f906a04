"""Repo archives: an Icechunk repository's whole history as one ZS file of sorted records."""

from zsarchive.archive.exporter import ExportSummary, export
from zsarchive.archive.query import NotFound, RepoArchive, archive_metadata, header_summary
from zsarchive.archive.refspec import parse_ref, parse_time

__all__ = ["ExportSummary", "NotFound", "RepoArchive", "archive_metadata", "export", "header_summary",
           "parse_ref", "parse_time"]
