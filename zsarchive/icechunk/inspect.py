"""JSON views of each repository file, a superset of what icechunk 2.x's ``inspect_*`` methods return.

Same key names and value formats as icechunk (ids in Crockford base32, times RFC 3339 UTC with
microseconds and ``Z``); keys icechunk leaves out (status, config, feature flags, user data ...) are added.
"""

from __future__ import annotations

import base64
import json
from typing import Any

from zsarchive.icechunk.header import inspect_header
from zsarchive.icechunk.model import ChunkRef, Node, NodeType, RepoInfo, RepoStatus, SnapshotInfo, Update, format_time
from zsarchive.icechunk.repository import Repository

# icechunk's inspect output spells availability with the schema's enum names.
_AVAILABILITY = {"online": "Online", "read_only": "ReadOnly", "offline": "Offline"}


def _status(status: RepoStatus) -> dict:
    out: dict[str, Any] = {"availability": _AVAILABILITY[status.availability]}
    if status.set_at is not None:
        out["set_at"] = format_time(status.set_at)
    out["limited_availability_reason"] = status.limited_availability_reason
    return out


def _value(value: Any) -> Any:
    return _status(value) if isinstance(value, RepoStatus) else value


def update_json(update: Update) -> dict:
    """One ops-log entry as icechunk's inspect_repo_info lists it."""
    details = {k: _value(v) for k, v in update.details.items()}
    kind = update.type
    if kind == "FeatureFlagChangedUpdate":
        # icechunk drops the suffix for this one member and reports an unset flag as new_value null.
        kind = "FeatureFlagChanged"
        if not details["is_set"]:
            details["new_value"] = None
    out: dict[str, Any] = {"update_type": {"type": kind, **details}, "updated_at": format_time(update.updated_at)}
    if update.backup_path is not None:
        out["backup_path"] = update.backup_path
    return out


def _snapshot_info(info: SnapshotInfo) -> dict:
    out: dict[str, Any] = {"id": info.id}
    if info.parent_id is not None:
        out["parent_id"] = info.parent_id
    out.update(flushed_at=format_time(info.flushed_at), message=info.message, metadata=info.metadata)
    return out


def inspect_repo_info(repo: Repository) -> dict:
    """The repo info: refs, snapshots, ops log head, plus status, config and feature flags."""
    info: RepoInfo = repo.repo_info()
    out: dict[str, Any] = {}
    if info.header is not None:
        out["header"] = inspect_header(info.header)
    out.update(
        spec_version=f"{info.spec_version}.0",
        branches=info.branches,
        tags=info.tags,
        deleted_tags=info.deleted_tags,
        snapshots=[_snapshot_info(s) for s in info.snapshots],
        metadata=info.metadata,
        latest_updates=[update_json(u) for u in info.latest_updates],
    )
    if info.repo_before_updates is not None:
        out["repo_before_updates"] = info.repo_before_updates
    if info.status is not None:
        out["status"] = _status(info.status)
    out["config"] = info.config
    out["enabled_feature_flags"] = info.enabled_feature_flags
    out["disabled_feature_flags"] = info.disabled_feature_flags
    return out


def _node(node: Node) -> dict:
    out: dict[str, Any] = {"id": node.id, "path": node.path, "node_type": node.node_type.value}
    if node.node_type is NodeType.ARRAY:
        names = node.dimension_names or [None] * len(node.shape or [])
        shape = []
        for dim, name in zip(node.shape or [], names):
            entry: dict[str, Any] = {}
            if name is not None:
                entry["name"] = name
            entry["array_length"] = dim.array_length
            entry["num_chunks"] = dim.num_chunks
            if dim.chunk_length is not None:
                entry["chunk_length"] = dim.chunk_length
            shape.append(entry)
        out["shape"] = shape
        out["manifest_refs"] = [{"id": m.id, "extents": [list(e) for e in m.extents]} for m in node.manifests]
    try:
        out["user_data"] = json.loads(node.user_data)
    except (ValueError, RecursionError):  # not JSON, or nested past the stack: shown as stored
        out["user_data_b64"] = base64.b64encode(node.user_data).decode("ascii")
    return out


def inspect_snapshot(repo: Repository, snapshot_id: str) -> dict:
    """A snapshot file: commit fields, manifest files, every node (with its zarr.json as ``user_data``)."""
    snap = repo.snapshot(snapshot_id)
    out: dict[str, Any] = {"id": snap.id, "header": inspect_header(snap.header)}
    if snap.parent_id is not None:
        out["parent_id"] = snap.parent_id
    out.update(
        flushed_at=format_time(snap.flushed_at),
        commit_message=snap.message,
        metadata=snap.metadata,
        manifests=[
            {"id": m.id, "size_bytes": m.size_bytes, "num_chunk_refs": m.num_chunk_refs} for m in snap.manifest_files
        ],
        nodes=[_node(n) for n in snap.nodes],
    )
    return out


def ref_json(ref: ChunkRef) -> dict:
    """One chunk ref as JSON (inline bytes in base64)."""
    out: dict[str, Any] = {"index": list(ref.index), "kind": ref.kind.value}
    if ref.inline is not None:
        out["inline_b64"] = base64.b64encode(ref.inline).decode("ascii")
    if ref.chunk_id is not None:
        out["chunk_id"] = ref.chunk_id
    if ref.location is not None:
        out["location"] = ref.location
    if ref.chunk_id is not None or ref.location is not None:
        out["offset"], out["length"] = ref.offset, ref.length
    if ref.checksum_etag is not None:
        out["checksum_etag"] = ref.checksum_etag
    if ref.checksum_last_modified is not None:
        out["checksum_last_modified"] = ref.checksum_last_modified
    return out


def inspect_manifest(repo: Repository, manifest_id: str, with_refs: bool = False) -> dict:
    """A manifest's per-array and total ref counts by kind; ``with_refs`` adds every ref."""
    manifest = repo.manifest(manifest_id)
    arrays = []
    totals = [0, 0, 0]
    compressed = 0
    for info in manifest.arrays:
        counts = manifest.kind_counts(info.node_id)
        compressed += manifest.compressed_locations(info.node_id)
        totals = [a + b for a, b in zip(totals, counts)]
        entry: dict[str, Any] = {
            "node_id": info.node_id,
            "num_chunk_refs": info.num_chunk_refs,
            "num_inline": counts[0],
            "num_native": counts[1],
            "num_virtual": counts[2],
        }
        if with_refs:
            entry["refs"] = [ref_json(r) for r in manifest.chunk_refs(info.node_id)]
        arrays.append(entry)
    compression: dict[str, Any] = {
        "uses_location_compression": manifest.location_dictionary is not None,
        "num_compressed_refs": compressed,
        "compression_algorithm": manifest.compression_algorithm,
    }
    if manifest.location_dictionary is not None:
        compression["dictionary_size_bytes"] = len(manifest.location_dictionary)
    return {
        "id": manifest.id,
        "header": inspect_header(manifest.header),
        "size_bytes": manifest.payload_size,
        "file_size_bytes": manifest.size_bytes,
        "num_arrays": len(arrays),
        "total_chunk_refs": sum(totals),
        "total_inline": totals[0],
        "total_native": totals[1],
        "total_virtual": totals[2],
        "arrays": arrays,
        "compression": compression,
    }


def inspect_transaction_log(repo: Repository, snapshot_id: str) -> dict:
    """A snapshot's transaction log: node id lists, updated chunk coordinates, moves (with node ids and
    types); after ``expire_snapshots``, merged with its pruned ancestors' as icechunk shows it."""
    changes = repo.changes(snapshot_id)
    log = changes.log or repo.transaction_log(snapshot_id)  # the latter says which file is missing
    out = {
        "id": log.id,
        "header": inspect_header(log.header),
        "new_groups": log.new_groups,
        "new_arrays": log.new_arrays,
        "deleted_groups": log.deleted_groups,
        "deleted_arrays": log.deleted_arrays,
        "updated_groups": log.updated_groups,
        "updated_arrays": log.updated_arrays,
        "updated_chunks": [
            {"node_id": node_id, "chunks": [list(c) for c in coords]} for node_id, coords in log.updated_chunks.items()
        ],
        "moved_nodes": [
            {
                "from": m.from_path,
                "to": m.to_path,
                "node_id": m.node_id,
                "node_type": None if m.node_type is None else m.node_type.value,
            }
            for m in log.moved_nodes
        ],
    }
    if changes.merged or changes.missing:
        out["synthetic_composite"] = {
            "note": "expire_snapshots removed ancestors of this snapshot: their transaction logs are merged "
            "into its own here; the header is that of its own log",
            "merged_pruned_ancestor_tx_logs": list(changes.merged),
            "missing_tx_logs": list(changes.missing),
        }
    return out
