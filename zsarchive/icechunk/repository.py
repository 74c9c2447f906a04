"""``Repository``: open an Icechunk repository (spec V1 or V2) and read every file of it as the model."""

from __future__ import annotations

from typing import Iterator

from zsarchive.icechunk.model import (
    ChunkRef, Manifest, RepoInfo, RepoStatus, Snapshot, SnapshotId, SnapshotInfo, TransactionLog, Update,
)


class Repository:
    """A read-only view of one Icechunk repository; files are read on demand (and cached)."""

    @classmethod
    def open(cls, location: str) -> "Repository":
        """Open a local directory or ``file://`` URL; ZSError if it is not an Icechunk repository."""
        raise NotImplementedError

    @property
    def spec_version(self) -> int:
        """1 or 2."""
        raise NotImplementedError

    def repo_info(self) -> RepoInfo:
        """The repo info (V2 ``repo`` file; V1 assembled from refs/ and config.yaml)."""
        raise NotImplementedError

    def branches(self) -> dict[str, SnapshotId]:
        """Branch name -> snapshot id, sorted by name."""
        raise NotImplementedError

    def tags(self) -> dict[str, SnapshotId]:
        """Live tag name -> snapshot id, sorted by name."""
        raise NotImplementedError

    def deleted_tags(self) -> list[str]:
        """Names of deleted tags, sorted."""
        raise NotImplementedError

    def config(self) -> dict | None:
        """Repository configuration as JSON-compatible values (V2 FlexBuffers, V1 config.yaml)."""
        raise NotImplementedError

    def metadata(self) -> dict:
        """Repository-level user metadata (V2; empty for V1)."""
        raise NotImplementedError

    def status(self) -> RepoStatus | None:
        """Availability status (V2; None for V1)."""
        raise NotImplementedError

    def snapshots(self) -> list[SnapshotInfo]:
        """Every snapshot the repository knows, sorted by id (V1: those reachable from refs)."""
        raise NotImplementedError

    def resolve(self, ref: str) -> SnapshotId:
        """Snapshot id of a branch name, tag name or snapshot id (in that order of precedence)."""
        raise NotImplementedError

    def ancestry(self, ref: str) -> list[SnapshotInfo]:
        """The commit history from ``ref`` back to the initial snapshot, newest first."""
        raise NotImplementedError

    def snapshot(self, snapshot_id: SnapshotId) -> Snapshot:
        """The snapshot file ``snapshots/<id>``."""
        raise NotImplementedError

    def manifest(self, manifest_id: SnapshotId) -> Manifest:
        """The manifest file ``manifests/<id>``."""
        raise NotImplementedError

    def transaction_log(self, snapshot_id: SnapshotId) -> TransactionLog:
        """The transaction log ``transactions/<id>`` of a snapshot."""
        raise NotImplementedError

    def ops_log(self) -> Iterator[Update]:
        """Every ops-log entry newest first, following ``repo_before_updates`` into overwritten/ (V1: none)."""
        raise NotImplementedError

    def chunk_refs(self, snapshot_id: SnapshotId, path: str) -> Iterator[ChunkRef]:
        """All chunk refs of the array at ``path`` in a snapshot, in ascending coordinate order."""
        raise NotImplementedError
