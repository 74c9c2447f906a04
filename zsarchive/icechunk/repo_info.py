"""Decode the V2 repo info file (``$ROOT/repo`` and its backups under ``overwritten/``)."""

from __future__ import annotations

import importlib
from typing import Any

from zsarchive.icechunk.common import (
    decoding,
    id12,
    id_struct,
    ids_vector,
    metadata_items,
    metadata_vector,
    offsets_vector,
    timestamp,
)
from zsarchive.icechunk.flatbuf import FlatBufferError, byte_vector, check_sorted, require, root, table_of, text
from zsarchive.icechunk.generated.Repo import Repo
from zsarchive.icechunk.generated.UpdateType import UpdateType
from zsarchive.icechunk.header import IMPLEMENTATION, open_file, wrap_file
from zsarchive.icechunk.model import FileType, RepoInfo, RepoStatus, SnapshotInfo, Update
from zsarchive.icechunk.values import from_flexbuffer, to_flexbuffer

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
    "CommitAmendedUpdate": [
        ("branch", "Branch", "str"),
        ("previous_snap_id", "PreviousSnapId", "id"),
        ("new_snap_id", "NewSnapId", "id"),
    ],
    "NewDetachedSnapshotUpdate": [("new_snap_id", "NewSnapId", "id")],
    "GCRanUpdate": [],
    "ExpirationRanUpdate": [],
    "FeatureFlagChangedUpdate": [("id", "Id", "int"), ("new_value", "NewValue", "bool"), ("is_set", "IsSet", "bool")],
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
    return RepoStatus(
        AVAILABILITY[availability],
        set_at or None,
        text(obj.LimitedAvailabilityReason(), f"{what}.limited_availability_reason"),
    )


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
    return Update(
        kind, timestamp(obj.UpdatedAt(), f"{what}.updated_at"), text(obj.BackupPath(), f"{what}.backup_path"), details
    )


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
            snapshots.append(
                SnapshotInfo(
                    snap_ids[j],
                    None if parent == -1 else snap_ids[parent],
                    timestamp(info.FlushedAt(), f"snapshots[{j}].flushed_at"),
                    text(require(info.Message(), f"snapshots[{j}].message"), f"snapshots[{j}].message"),
                    metadata_items(info, spec, f"snapshots[{j}].metadata", must_sort=False),
                    tuple(
                        id12(info.PrunedAncestorTxLogs(k), f"snapshots[{j}].pruned_ancestor_tx_logs[{k}]")
                        for k in range(info.PrunedAncestorTxLogsLength())
                    ),
                )
            )
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


# -- encoding ------------------------------------------------------------------------------------

_AVAILABILITY_CODES = {name: code for code, name in AVAILABILITY.items()}


def _encode_status(b, status: RepoStatus | None) -> int:
    from zsarchive.icechunk.generated import RepoStatus as RS

    status = status or RepoStatus("online", None, None)
    reason = None if status.limited_availability_reason is None else b.CreateString(status.limited_availability_reason)
    RS.Start(b)
    RS.AddAvailability(b, _AVAILABILITY_CODES[status.availability])
    if status.set_at:
        RS.AddSetAt(b, status.set_at)
    if reason is not None:
        RS.AddLimitedAvailabilityReason(b, reason)
    return RS.End(b)


def _encode_update(b, update: Update) -> int:
    from zsarchive.icechunk.generated import Update as U

    module = importlib.import_module(f"zsarchive.icechunk.generated.{update.type}")
    strings = {
        field: b.CreateString(update.details[field]) for field, _, how in _UPDATE_FIELDS[update.type] if how == "str"
    }
    statuses = {
        field: _encode_status(b, update.details[field])
        for field, _, how in _UPDATE_FIELDS[update.type]
        if how == "status"
    }
    module.Start(b)
    for field, accessor, how in _UPDATE_FIELDS[update.type]:
        add = getattr(module, "Add" + accessor)
        value = update.details[field]
        if how == "str":
            add(b, strings[field])
        elif how == "status":
            add(b, statuses[field])
        elif how == "id":
            add(b, id_struct(b, value, 12))
        else:
            add(b, int(value))
    body = module.End(b)
    backup = None if update.backup_path is None else b.CreateString(update.backup_path)
    U.Start(b)
    U.AddUpdateTypeType(b, getattr(UpdateType, update.type))
    U.AddUpdateType(b, body)
    U.AddUpdatedAt(b, update.updated_at)
    if backup is not None:
        U.AddBackupPath(b, backup)
    return U.End(b)


def _encode_refs(b, refs: dict[str, str], index: dict[str, int]) -> int:
    from zsarchive.icechunk.generated import Ref as R

    tables = []
    for name in sorted(refs, key=lambda n: n.encode("utf-8")):
        name_off = b.CreateString(name)
        R.Start(b)
        R.AddName(b, name_off)
        R.AddSnapshotIndex(b, index[refs[name]])
        tables.append(R.End(b))
    return offsets_vector(b, tables)


def _u16_vector(b, values: list[int]) -> int:
    b.StartVector(2, len(values), 2)
    for value in reversed(sorted(values)):
        b.PrependUint16(value)
    return b.EndVector()


def encode_repo_info(info: RepoInfo, implementation: str = IMPLEMENTATION) -> bytes:
    """A V2 ``repo`` file holding ``info``: snapshots sorted by id, refs and deleted tags by name bytes,
    parents and refs as indexes into the snapshots, the ops log as given (newest first)."""
    import flatbuffers

    from zsarchive.icechunk.generated import Repo as R, SnapshotInfo as SI

    b = flatbuffers.Builder(1 << 14)
    snapshots = sorted(info.snapshots, key=lambda s: s.id)
    index = {s.id: j for j, s in enumerate(snapshots)}
    infos = []
    for snap in snapshots:
        message = b.CreateString(snap.message)
        metadata = metadata_vector(b, snap.metadata, 2)
        pruned = ids_vector(b, list(snap.pruned_tx_logs), 12) if snap.pruned_tx_logs else None
        SI.Start(b)
        SI.AddId(b, id_struct(b, snap.id, 12))
        SI.AddParentOffset(b, -1 if snap.parent_id is None else index[snap.parent_id])
        SI.AddFlushedAt(b, snap.flushed_at)
        SI.AddMessage(b, message)
        SI.AddMetadata(b, metadata)
        if pruned is not None:
            SI.AddPrunedAncestorTxLogs(b, pruned)
        infos.append(SI.End(b))
    snapshots_vector = offsets_vector(b, infos)
    tags = _encode_refs(b, info.tags, index)
    branches = _encode_refs(b, info.branches, index)
    deleted = offsets_vector(b, [b.CreateString(t) for t in sorted(info.deleted_tags, key=lambda t: t.encode())])
    status = _encode_status(b, info.status)
    metadata = metadata_vector(b, info.metadata, 2)
    updates = offsets_vector(b, [_encode_update(b, u) for u in info.latest_updates])
    before = None if info.repo_before_updates is None else b.CreateString(info.repo_before_updates)
    config = None if info.config is None else b.CreateByteVector(to_flexbuffer(info.config))
    enabled, disabled = _u16_vector(b, info.enabled_feature_flags), _u16_vector(b, info.disabled_feature_flags)
    R.Start(b)
    R.AddSpecVersion(b, info.spec_version)
    R.AddTags(b, tags)
    R.AddBranches(b, branches)
    R.AddDeletedTags(b, deleted)
    R.AddSnapshots(b, snapshots_vector)
    R.AddStatus(b, status)
    R.AddMetadata(b, metadata)
    R.AddLatestUpdates(b, updates)
    if before is not None:
        R.AddRepoBeforeUpdates(b, before)
    if config is not None:
        R.AddConfig(b, config)
    R.AddEnabledFeatureFlags(b, enabled)
    R.AddDisabledFeatureFlags(b, disabled)
    b.Finish(R.End(b))
    return wrap_file(FileType.REPO_INFO, 2, bytes(b.Output()), implementation)
