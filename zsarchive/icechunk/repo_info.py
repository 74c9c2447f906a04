"""Decode the V2 repo info file (``$ROOT/repo`` and its backups under ``overwritten/``)."""

from __future__ import annotations

import importlib
from typing import Any

from zsarchive.icechunk.common import decoding, id12, metadata_items, timestamp
from zsarchive.icechunk.flatbuf import FlatBufferError, byte_vector, check_sorted, require, root, table_of, text
from zsarchive.icechunk.generated.Repo import Repo
from zsarchive.icechunk.generated.UpdateType import UpdateType
from zsarchive.icechunk.header import open_file
from zsarchive.icechunk.model import FileType, RepoInfo, RepoStatus, SnapshotInfo, Update
from zsarchive.icechunk.values import from_flexbuffer

AVAILABILITY = {0: "online", 1: "read_only", 2: "offline"}  # as icechunk's Python enum spells them

# Union member -> the fields it carries, as (schema field name, generated accessor, kind).
_UPDATE_FIELDS: dict[str, list[tuple[str, str, str]]] = {
    "RepoInitializedUpdate": [],
    "RepoMigratedUpdate": [("from_version", "FromVersion", "int"), ("to_version", "ToVersion", "int")],
    "ConfigChangedUpdate": [],
    "MetadataChangedUpdate": [],
    "TagCreatedUpdate": [("name", "Name", "str")],
    "TagDeletedUpdate": [("name", "Name", "str"), ("previous_snap_id", "PreviousSnapId", "id")],
    "BranchCreatedUpdate": [("name", "Name", "str")],
    "BranchDeletedUpdate": [("name", "Name", "str"), ("previous_snap_id", "PreviousSnapId", "id")],
    "BranchResetUpdate": [("name", "Name", "str"), ("previous_snap_id", "PreviousSnapId", "id")],
    "NewCommitUpdate": [("branch", "Branch", "str"), ("new_snap_id", "NewSnapId", "id")],
    "CommitAmendedUpdate": [("branch", "Branch", "str"), ("previous_snap_id", "PreviousSnapId", "id"),
                            ("new_snap_id", "NewSnapId", "id")],
    "NewDetachedSnapshotUpdate": [("new_snap_id", "NewSnapId", "id")],
    "GCRanUpdate": [],
    "ExpirationRanUpdate": [],
    "FeatureFlagChangedUpdate": [("id", "Id", "int"), ("new_value", "NewValue", "bool"),
                                 ("is_set", "IsSet", "bool")],
    "RepoStatusChangedUpdate": [("status", "Status", "status")],
}
_UPDATE_NAMES = {getattr(UpdateType, name): name for name in _UPDATE_FIELDS}
_UPDATE_CLASSES = {
    name: getattr(importlib.import_module(f"zsarchive.icechunk.generated.{name}"), name) for name in _UPDATE_FIELDS
}


def _status(obj, what: str) -> RepoStatus:
    availability = obj.Availability()
    if availability not in AVAILABILITY:
        raise FlatBufferError(f"{what}.availability has unknown value {availability}")
    set_at = timestamp(obj.SetAt(), f"{what}.set_at")
    return RepoStatus(AVAILABILITY[availability], set_at or None,
                      text(obj.LimitedAvailabilityReason(), f"{what}.limited_availability_reason"))


def _update(obj, j: int) -> Update:
    what = f"latest_updates[{j}]"
    tag = obj.UpdateTypeType()
    kind = _UPDATE_NAMES.get(tag)
    if kind is None:
        raise FlatBufferError(f"{what}.update_type has unknown union tag {tag}")
    member = table_of(_UPDATE_CLASSES[kind], require(obj.UpdateType(), f"{what}.update_type"))
    details: dict[str, Any] = {}
    for field, accessor, how in _UPDATE_FIELDS[kind]:
        value = getattr(member, accessor)()
        where = f"{what}.{kind}.{field}"
        if how == "str":
            details[field] = text(require(value, where), where)
        elif how == "id":
            details[field] = id12(value, where)
        elif how == "status":
            details[field] = _status(require(value, where), where)
        else:
            details[field] = value
    return Update(kind, timestamp(obj.UpdatedAt(), f"{what}.updated_at"),
                  text(obj.BackupPath(), f"{what}.backup_path"), details)


def _refs(count: int, get, snapshots: list[SnapshotInfo], what: str) -> dict[str, str]:
    names: list[bytes] = []
    out: dict[str, str] = {}
    for j in range(count):
        ref = get(j)
        raw = require(ref.Name(), f"{what}[{j}].name")
        index = ref.SnapshotIndex()
        if index >= len(snapshots):
            raise FlatBufferError(f"{what}[{j}] points at snapshot #{index}, but there are {len(snapshots)}")
        out[text(raw, f"{what}[{j}].name")] = snapshots[index].id
        names.append(raw)
    check_sorted(names, f"{what} names")
    return out


def _u16_list(obj, accessor: str, what: str) -> list[int]:
    values = [getattr(obj, accessor)(j) for j in range(getattr(obj, accessor + "Length")())]
    check_sorted(values, what)
    return values


def decode_repo_info(raw: bytes, name: str) -> RepoInfo:
    """Decode a repo info file (``name`` is used in error messages)."""
    header, payload = open_file(raw, name, FileType.REPO_INFO)
    with decoding(name):
        repo = root(Repo, payload)
        for field in ("Tags", "Branches", "DeletedTags", "Snapshots", "LatestUpdates"):
            if getattr(repo, field + "IsNone")():
                raise FlatBufferError(f"required field {field} is missing")
        spec = header.spec_version
        raw_infos = [repo.Snapshots(j) for j in range(repo.SnapshotsLength())]
        snap_ids = [id12(info.Id(), f"snapshots[{j}].id") for j, info in enumerate(raw_infos)]
        check_sorted(snap_ids, "snapshots ids")
        snapshots = []
        for j, info in enumerate(raw_infos):
            parent = info.ParentOffset()
            if not -1 <= parent < len(snap_ids) or parent == j:
                raise FlatBufferError(f"snapshots[{j}].parent_offset {parent} is not a valid snapshot index")
            snapshots.append(SnapshotInfo(
                snap_ids[j], None if parent == -1 else snap_ids[parent],
                timestamp(info.FlushedAt(), f"snapshots[{j}].flushed_at"),
                text(require(info.Message(), f"snapshots[{j}].message"), f"snapshots[{j}].message"),
                metadata_items(info, spec, f"snapshots[{j}].metadata", must_sort=False),
                tuple(id12(info.PrunedAncestorTxLogs(k), f"snapshots[{j}].pruned_ancestor_tx_logs[{k}]")
                      for k in range(info.PrunedAncestorTxLogsLength())),
            ))
        deleted_raw = [require(repo.DeletedTags(j), f"deleted_tags[{j}]") for j in range(repo.DeletedTagsLength())]
        check_sorted(deleted_raw, "deleted_tags")
        config_raw = byte_vector(repo, 22)
        return RepoInfo(
            header=header,
            spec_version=repo.SpecVersion(),
            branches=_refs(repo.BranchesLength(), repo.Branches, snapshots, "branches"),
            tags=_refs(repo.TagsLength(), repo.Tags, snapshots, "tags"),
            deleted_tags=[text(t, "deleted_tags") for t in deleted_raw],
            snapshots=snapshots,
            status=_status(require(repo.Status(), "status"), "status"),
            metadata=metadata_items(repo, spec, "metadata", must_sort=False),
            latest_updates=[_update(repo.LatestUpdates(j), j) for j in range(repo.LatestUpdatesLength())],
            repo_before_updates=text(repo.RepoBeforeUpdates(), "repo_before_updates"),
            config=None if config_raw is None else from_flexbuffer(config_raw, "config"),
            enabled_feature_flags=_u16_list(repo, "EnabledFeatureFlags", "enabled_feature_flags"),
            disabled_feature_flags=_u16_list(repo, "DisabledFeatureFlags", "disabled_feature_flags"),
            extra=byte_vector(repo, 28),
        )
