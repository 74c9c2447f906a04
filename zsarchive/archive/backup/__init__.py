"""Backups that run themselves: a backup set (a directory or object-store prefix) kept up to date with a
repository by :func:`backup`, above exporting, fragments, consolidation and validation."""

from zsarchive.archive.backup.run import BackupOptions, BackupResult, Written, backup

__all__ = ["BackupOptions", "BackupResult", "Written", "backup"]
