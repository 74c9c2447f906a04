"""Typed model of every Icechunk file (spec V1 and V2): what the reader returns, what the exporter consumes.

Ids are Crockford base32 strings (20 characters for ObjectId12, 13 for ObjectId8): the alphabet is in
ASCII order and the length is fixed, so sorting the strings sorts the raw id bytes. Times are integers,
non-leap microseconds since 1970-01-01 UTC, exactly as stored; ``format_time`` (:mod:`zsarchive.times`) renders them.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterator, NamedTuple, Protocol

from zsarchive.icechunk.nodekinds import NodeType, RefKind  # noqa: F401  (re-exported)
from zsarchive.times import format_time  # noqa: F401  (the model's times render with it; re-exported)

if TYPE_CHECKING:
    import numpy as np

SnapshotId = str
"""Crockford base32 of a 12-byte snapshot id (also manifest, chunk ids: ObjectId12)."""
NodeId = str
"""Crockford base32 of an 8-byte node id (ObjectId8)."""
JSONValue = Any
"""A JSON-compatible value decoded from FlexBuffers (V2) or MessagePack (V1)."""


class FileType(enum.IntEnum):
    """The file type byte of the common binary header."""

    SNAPSHOT = 1
    MANIFEST = 2
    TRANSACTION_LOG = 4
    REPO_INFO = 6


@dataclass(frozen=True, slots=True)
class FileHeader:
    """The common binary header in front of every metadata file."""

    implementation: str
    """The 24-byte implementation name with its padding stripped, e.g. ``ic-2.3.0``."""
    spec_version: int
    file_type: FileType
    compression: int
    """0 = none, 1 = zstd."""


@dataclass(frozen=True, slots=True)
class RepoStatus:
    """Repository availability (V2 repo info)."""

    availability: str
    """``online``, ``read_only`` or ``offline`` (icechunk's Python spelling)."""
    set_at: int | None
    limited_availability_reason: str | None


@dataclass(frozen=True, slots=True)
class SnapshotInfo:
    """One commit as the repo info (V2) or the snapshot file itself (V1) describes it."""

    id: SnapshotId
    parent_id: SnapshotId | None
    flushed_at: int
    message: str
    metadata: dict[str, JSONValue]
    pruned_tx_logs: tuple[SnapshotId, ...] = ()
    """V2: ids of the transaction logs of ancestors that ``expire_snapshots`` removed from under this
    snapshot, oldest first; its changes since its parent are theirs and its own, in that order."""


@dataclass(frozen=True, slots=True)
class Update:
    """One ops-log entry. ``type`` is the union member name (e.g. ``NewCommitUpdate``)."""

    type: str
    updated_at: int
    backup_path: str | None
    details: dict[str, Any]
    """The member's fields by their schema names: ``branch``, ``name``, ``new_snap_id``,
    ``previous_snap_id``, ``from_version``, ``to_version``, ``status`` (a RepoStatus), ``id``,
    ``new_value``, ``is_set``; only those the member has."""


@dataclass(frozen=True, slots=True)
class RepoInfo:
    """The repository's entry point: refs, every snapshot, status, config, ops log head.

    For a V1 repository it is assembled from ``refs/`` and ``config.yaml`` (``header`` is None, the ops
    log is empty, ``snapshots`` are those reachable from branches and tags).
    """

    header: FileHeader | None
    spec_version: int
    branches: dict[str, SnapshotId]
    tags: dict[str, SnapshotId]
    deleted_tags: list[str]
    snapshots: list[SnapshotInfo]
    """Sorted by id (the order of the V2 file)."""
    status: RepoStatus | None
    metadata: dict[str, JSONValue]
    latest_updates: list[Update]
    """Newest first."""
    repo_before_updates: str | None
    config: dict[str, JSONValue] | None
    enabled_feature_flags: list[int]
    disabled_feature_flags: list[int]
    extra: bytes | None = None


@dataclass(frozen=True, slots=True)
class DimensionShape:
    """One dimension of an array: V1 files carry ``chunk_length``, V2 files ``num_chunks``."""

    array_length: int
    chunk_length: int | None
    num_chunks: int | None


@dataclass(frozen=True, slots=True)
class ManifestRef:
    """Which manifest holds an array's refs for a region: one (from inclusive, to exclusive) per dim."""

    id: SnapshotId
    extents: list[tuple[int, int]]


@dataclass(frozen=True, slots=True)
class ManifestFileInfo:
    """Summary of one manifest file a snapshot points to."""

    id: SnapshotId
    size_bytes: int
    num_chunk_refs: int


@dataclass(frozen=True, slots=True)
class Node:
    """A group or an array in a snapshot. Array-only fields are None/empty for groups."""

    id: NodeId
    path: str
    node_type: NodeType
    user_data: bytes
    """The node's zarr.json, as stored (UTF-8 JSON bytes)."""
    shape: list[DimensionShape] | None = None
    dimension_names: list[str | None] | None = None
    manifests: list[ManifestRef] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Snapshot:
    """A snapshot file: one version of the whole hierarchy. ``nodes`` in the file's order: by the
    bytes of the whole path (``/a-b`` before ``/a/b``)."""

    header: FileHeader
    id: SnapshotId
    parent_id: SnapshotId | None
    """Only V1 snapshot files carry it; for V2 use the repo info."""
    flushed_at: int
    message: str
    metadata: dict[str, JSONValue]
    nodes: list[Node]
    manifest_files: list[ManifestFileInfo]
    extra: bytes | None = None


class ChunkRef(NamedTuple):
    """One chunk reference. ``kind`` tells which of the optional fields are meaningful."""

    index: tuple[int, ...]  # type: ignore[assignment]  # a field shadowing tuple.index, which nothing calls
    kind: RefKind
    inline: bytes | None = None
    chunk_id: SnapshotId | None = None
    """Native refs: the chunk file under ``chunks/``."""
    location: str | None = None
    """Virtual refs: absolute URL (already decompressed if it was stored compressed)."""
    offset: int = 0
    length: int = 0
    checksum_etag: str | None = None
    checksum_last_modified: int | None = None
    """Seconds since the Unix epoch."""


@dataclass(frozen=True, slots=True)
class ArrayManifestInfo:
    """One array's share of a manifest (per-kind counts: ``Manifest.kind_counts``)."""

    node_id: NodeId
    num_chunk_refs: int


@dataclass(frozen=True, slots=True)
class MoveOperation:
    """A node that changed path in a transaction (V2 only)."""

    from_path: str
    to_path: str
    node_id: NodeId | None
    node_type: NodeType | None


@dataclass(frozen=True, slots=True)
class TransactionLog:
    """What one commit changed. Node id lists are sorted; ``updated_chunks`` maps node id -> coords."""

    header: FileHeader
    id: SnapshotId
    new_groups: list[NodeId]
    new_arrays: list[NodeId]
    deleted_groups: list[NodeId]
    deleted_arrays: list[NodeId]
    updated_groups: list[NodeId]
    updated_arrays: list[NodeId]
    updated_coords: dict[NodeId, np.ndarray]
    """Node id -> (chunks, ndim) uint32 matrix of the coordinates of the chunks written, in the file's
    order (icechunk 1.1 writes hash-set order, 2.x ascending), no chunk twice."""
    moved_nodes: list[MoveOperation]
    extra: bytes | None = None

    @property
    def updated_chunks(self) -> dict[NodeId, list[tuple[int, ...]]]:
        """Node id -> coordinates (tuples) of the chunks written, in the file's order."""
        return {
            node_id: list(zip(*coords.T.tolist())) if coords.shape[1] else [()] * len(coords)
            for node_id, coords in self.updated_coords.items()
        }


@dataclass(frozen=True, slots=True)
class CommitChanges:
    """What a snapshot changed since its parent (see ``Repository.changes``)."""

    log: TransactionLog | None
    """Its own transaction log, or (V2, after ``expire_snapshots``) that merged with its pruned
    ancestors'; None when its own log is no longer stored."""
    merged: tuple[SnapshotId, ...]
    """Ids of the pruned ancestors whose logs are merged in, oldest first (empty: ``log`` is its own)."""
    missing: tuple[SnapshotId, ...]
    """Ids of logs no longer stored, so left out: pruned ancestors', and last the snapshot's own."""
    moves: tuple[MoveOperation, ...] = ()
    """Every move of the logs merged, oldest first, unjoined (icechunk's ``diff`` lists them so)."""


class ChunkRefSource(Protocol):
    """Decodes one array's refs out of a manifest buffer on demand (see ``manifest.py``)."""

    def chunk_refs(self, node_id: NodeId) -> Iterator[ChunkRef]:
        """Refs of one array in ascending coordinate order."""

    def kind_counts(self, node_id: NodeId) -> tuple[int, int, int]:
        """(inline, native, virtual) ref counts of one array."""

    def compressed_locations(self, node_id: NodeId) -> int:
        """How many virtual refs of one array store a zstd-compressed location."""


@dataclass(frozen=True, slots=True)
class Manifest:
    """A manifest file. Refs are decoded lazily (they can number millions): use ``chunk_refs``."""

    header: FileHeader
    id: SnapshotId
    size_bytes: int
    """Size of the file as stored (header + compressed payload)."""
    arrays: list[ArrayManifestInfo]
    """Sorted by node id."""
    location_dictionary: bytes | None
    compression_algorithm: int
    extra: bytes | None
    source: ChunkRefSource = field(repr=False, compare=False)
    payload_size: int = 0
    """Size of the decompressed FlatBuffer (what icechunk's inspect_manifest calls ``size_bytes``)."""

    def chunk_refs(self, node_id: NodeId) -> Iterator[ChunkRef]:
        """Every ref of one array in this manifest, in ascending coordinate order (none if absent)."""
        return self.source.chunk_refs(node_id)

    def kind_counts(self, node_id: NodeId) -> tuple[int, int, int]:
        """(inline, native, virtual) ref counts of one array (a pass over the refs' vtables only)."""
        return self.source.kind_counts(node_id)

    def compressed_locations(self, node_id: NodeId) -> int:
        """How many virtual refs of one array store a zstd-compressed location."""
        return self.source.compressed_locations(node_id)
