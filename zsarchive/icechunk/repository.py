"""``Repository``: open an Icechunk repository (spec V1 or V2) and read every file of it as the model."""

from __future__ import annotations

import collections
import heapq
import itertools
from dataclasses import dataclass
from typing import Iterable, Iterator, Mapping
from urllib.parse import unquote

from zsarchive.errors import ZSCorrupt, ZSError
from zsarchive.icechunk import ids
from zsarchive.icechunk.config import load_config
from zsarchive.icechunk.header import HEADER_LENGTH, parse_header
from zsarchive.icechunk.manifest.decode import decode_manifest
from zsarchive.icechunk.model import (
    ChunkRef,
    CommitChanges,
    Manifest,
    Node,
    NodeType,
    RepoInfo,
    RepoStatus,
    Snapshot,
    SnapshotId,
    SnapshotInfo,
    TransactionLog,
    Update,
)
from zsarchive.icechunk.repo_info import decode_repo_info
from zsarchive.icechunk.snapshot import decode_snapshot
from zsarchive.io.location import Location
from zsarchive.icechunk.storage import Storage, open_storage
from zsarchive.limits import ceiling, load_json
from zsarchive.walk import parent_chain
from zsarchive.icechunk.txlog import decode_transaction_log, merge_transaction_logs

_MANIFEST_CACHE = 4  # manifests can hold millions of refs: keep only the last few decoded


def _ref_name(stored: str, where: str) -> str:
    """A V1 ref's name from its directory name: icechunk's storage paths percent-encode characters
    such as ``{``, ``~``, ``%`` and non-ASCII ones (``%7B``), as UTF-8."""
    try:
        return unquote(stored, errors="strict")
    except UnicodeDecodeError:
        raise ZSCorrupt(f"{where}: ref name {stored!r} is not percent-encoded UTF-8") from None


@dataclass(frozen=True)
class FileForm:
    """What a metadata file's model does not say about how it was written: the implementation name in
    its header and, for a V2 manifest, how its virtual locations are compressed."""

    implementation: str
    compression_algorithm: int | None = None
    """0: plain locations, 1: zstd with ``location_dictionary`` (manifests of spec V2); None otherwise."""
    location_dictionary: bytes | None = None


class Repository:
    """A read-only view of one Icechunk repository; the repo info is read once, at ``open``."""

    def __init__(self, storage: Storage):
        self.storage = storage
        self._snapshots: dict[SnapshotId, Snapshot] = {}
        self._nodes: dict[SnapshotId, dict[str, Node]] = {}
        self._manifests: collections.OrderedDict[str, Manifest] = collections.OrderedDict()
        self._v1_info: RepoInfo | None = None
        self._v1_deleted: dict[str, SnapshotId] = {}
        self._forms: dict[str, FileForm] = {}  # in the order learned: file_forms_since hands on the new ones
        raw = storage.read("repo")
        if raw is not None:
            self._v2_info: RepoInfo | None = decode_repo_info(raw, self._name("repo"))
            self._spec = 2
        elif storage.read("refs/branch.main/ref.json") is not None:
            self._spec = 1
            self._v2_info = None
            if not storage.can_list:
                raise ZSError(
                    f"{storage.name}: an Icechunk spec-V1 repository needs a store that can list "
                    f"(S3, GCS, Azure or a local directory); a plain HTTP server cannot"
                )
        else:
            raise ZSError(
                f"{storage.name}: not an Icechunk repository (no 'repo' file and no 'refs/branch.main/ref.json')"
            )

    @classmethod
    def open(
        cls, location: "str | Location", storage_options: Mapping[str, object] | None = None, anon: bool = False
    ) -> "Repository":
        """Open a local directory or a ``file://``, ``s3://``, ``gs://``, ``az://`` or ``http(s)://`` URL;
        ZSError (one line) if it cannot be reached or is not an Icechunk repository."""
        return cls(open_storage(location, storage_options, anon))

    def prefetch(self, kind: str, ids_: Iterable[str]) -> None:
        """Hint that the ``kind`` files (``snapshots``, ``manifests``, ``transactions``) of these ids
        are read next, in this order: remote storage fetches them concurrently."""
        self.storage.prefetch(f"{kind}/{i}" for i in ids_)

    def _name(self, key: str) -> str:
        return f"{self.storage.name.rstrip('/')}/{key}"

    def _read(self, key: str, referenced_by: str | None = None) -> bytes:
        raw = self.storage.read(key)
        if raw is None:
            if referenced_by:
                raise ZSCorrupt(f"{self._name(key)}: missing, but {referenced_by} references it")
            raise ZSError(f"{self._name(key)}: no such file in the repository")
        return raw

    # ---- spec V1: refs/ files, config.yaml, snapshots listed from snapshots/ ----

    def _v1_ref(self, key: str) -> SnapshotId:
        raw = self._read(key)
        try:
            target = load_json(raw, self._name(key))["snapshot"]
        except (ZSCorrupt, KeyError, TypeError):
            raise ZSCorrupt(f"{self._name(key)}: not a ref file (expected JSON {{\"snapshot\": ID}})") from None
        if not isinstance(target, str) or not ids.is_id(target):
            raise ZSCorrupt(f"{self._name(key)}: {target!r} is not a snapshot id")
        return target

    def _v1_repo_info(self) -> RepoInfo:
        branches: dict[str, SnapshotId] = {}
        tags: dict[str, SnapshotId] = {}
        deleted: list[str] = []
        files = set(self.storage.list("refs/"))
        for key in sorted(files):
            ref_dir, _, leaf = key.partition("/")
            kind, _, stored = ref_dir.partition(".")
            if leaf != "ref.json" or kind not in ("branch", "tag"):
                continue
            name = _ref_name(stored, self._name("refs/" + ref_dir))
            if kind == "branch":
                branches[name] = self._v1_ref("refs/" + key)
            elif f"{ref_dir}/ref.json.deleted" in files:
                deleted.append(name)
                self._v1_deleted[name] = self._v1_ref("refs/" + key)
            else:
                tags[name] = self._v1_ref("refs/" + key)
        infos = []
        listed = self.storage.list("snapshots/")
        self.prefetch("snapshots", listed)
        for key in listed:
            snap = self.snapshot(key)
            infos.append(SnapshotInfo(snap.id, snap.parent_id, snap.flushed_at, snap.message, snap.metadata))
        config_raw = self.storage.read("config.yaml")
        config = None
        if config_raw is not None and len(config_raw) > ceiling("ZSARCHIVE_MAX_YAML"):
            raise ZSCorrupt(
                f"{self._name('config.yaml')}: {len(config_raw)} bytes, more than the ceiling "
                f"ZSARCHIVE_MAX_YAML ({ceiling('ZSARCHIVE_MAX_YAML')}; raise it for input you trust)"
            )
        if config_raw is not None:
            config = load_config(config_raw, self._name("config.yaml"))
        return RepoInfo(
            None,
            1,
            dict(sorted(branches.items())),
            dict(sorted(tags.items())),
            sorted(deleted),
            sorted(infos, key=lambda i: i.id),
            None,
            {},
            [],
            None,
            config,
            [],
            [],
        )

    # ---- the repo info ----

    @property
    def _info(self) -> RepoInfo:
        # V1 has no repo file: its equivalent needs every snapshot file, so it is built on first use.
        if self._v2_info is not None:
            return self._v2_info
        if self._v1_info is None:
            self._v1_info = self._v1_repo_info()
        return self._v1_info

    @property
    def spec_version(self) -> int:
        """1 or 2."""
        return self._spec

    def repo_info(self) -> RepoInfo:
        """The repo info (V2 ``repo`` file; V1 assembled from refs/ and config.yaml)."""
        return self._info

    def branches(self) -> dict[str, SnapshotId]:
        """Branch name -> snapshot id, sorted by name."""
        return dict(self._info.branches)

    def tags(self) -> dict[str, SnapshotId]:
        """Live tag name -> snapshot id, sorted by name."""
        return dict(self._info.tags)

    def deleted_tags(self) -> list[str]:
        """Names of deleted tags, sorted."""
        return list(self._info.deleted_tags)

    def deleted_tag_snapshot(self, name: str) -> SnapshotId | None:
        """The snapshot a deleted tag's ``ref.json`` still names (V1; V2 keeps none: None)."""
        _ = self._info  # a V1 repository's refs are read with its repo info
        return self._v1_deleted.get(name)

    def config(self) -> dict | None:
        """Repository configuration as JSON-compatible values (V2 FlexBuffers, V1 config.yaml)."""
        return self._info.config

    def metadata(self) -> dict:
        """Repository-level user metadata (V2; empty for V1)."""
        return dict(self._info.metadata)

    def status(self) -> RepoStatus | None:
        """Availability status (V2; None for V1)."""
        return self._info.status

    def snapshots(self) -> list[SnapshotInfo]:
        """Every snapshot the repository knows, sorted by id (V1: every file under snapshots/)."""
        return list(self._info.snapshots)

    def _snapshot_info(self, snapshot_id: SnapshotId) -> SnapshotInfo | None:
        if not hasattr(self, "_by_id"):
            self._by_id = {info.id: info for info in self._info.snapshots}
        return self._by_id.get(snapshot_id)

    def resolve(self, ref: str) -> SnapshotId:
        """Snapshot id of a branch name, tag name or snapshot id (in that order of precedence)."""
        if ref in self._info.branches:
            return self._info.branches[ref]
        if ref in self._info.tags:
            return self._info.tags[ref]
        if ids.is_id(ref) and self._snapshot_info(ref) is not None:
            return ref
        raise ZSError(f"{self.storage.name}: no branch, tag or snapshot named {ref!r}")

    def ancestry(self, ref: str) -> list[SnapshotInfo]:
        """The commit history from ``ref`` back to the initial snapshot, newest first."""
        out: list[SnapshotInfo] = []
        for current in parent_chain(
            self.resolve(ref),
            lambda sid: out[-1].parent_id,
            lambda at: ZSCorrupt(f"{self.storage.name}: the parent chain of {ref!r} loops at snapshot {at}"),
        ):
            info = self._snapshot_info(current)
            if info is None:
                child = out[-1].id if out else ref
                raise ZSCorrupt(f"{self.storage.name}: snapshot {current} (parent of {child}) is missing")
            out.append(info)
        return out

    # ---- immutable files ----

    def snapshot(self, snapshot_id: SnapshotId) -> Snapshot:
        """The snapshot file ``snapshots/<id>``."""
        snap = self._snapshots.get(snapshot_id)
        if snap is None:
            key = f"snapshots/{snapshot_id}"
            snap = decode_snapshot(self._read(key), self._name(key))
            if snap.id != snapshot_id:
                raise ZSCorrupt(f"{self._name(key)}: holds snapshot {snap.id}, not {snapshot_id}")
            self._snapshots[snapshot_id] = snap
            self._forms[key] = FileForm(snap.header.implementation)
        return snap

    def manifest(self, manifest_id: SnapshotId, referenced_by: str | None = None) -> Manifest:
        """The manifest file ``manifests/<id>`` (``referenced_by`` names the referrer in errors)."""
        manifest = self._manifests.get(manifest_id)
        if manifest is None:
            key = f"manifests/{manifest_id}"
            manifest = decode_manifest(self._read(key, referenced_by), self._name(key))
            if manifest.id != manifest_id:
                raise ZSCorrupt(f"{self._name(key)}: holds manifest {manifest.id}, not {manifest_id}")
            self._manifests[manifest_id] = manifest
            v2 = manifest.header.spec_version >= 2  # a V1 manifest has no location compression
            self._forms[key] = FileForm(
                manifest.header.implementation,
                manifest.compression_algorithm if v2 else None,
                manifest.location_dictionary if v2 else None,
            )
            while len(self._manifests) > _MANIFEST_CACHE:
                self._manifests.popitem(last=False)
        return manifest

    def transaction_log(self, snapshot_id: SnapshotId) -> TransactionLog:
        """The transaction log ``transactions/<id>`` of a snapshot, as stored (see :meth:`changes`)."""
        return self._transaction_log(snapshot_id, self._read(f"transactions/{snapshot_id}"))

    def _transaction_log(self, snapshot_id: SnapshotId, raw: bytes) -> TransactionLog:
        key = f"transactions/{snapshot_id}"
        log = decode_transaction_log(raw, self._name(key))
        if log.id != snapshot_id:
            raise ZSCorrupt(f"{self._name(key)}: holds the transaction log of {log.id}, not {snapshot_id}")
        self._forms[key] = FileForm(log.header.implementation)
        return log

    def file_form(self, key: str) -> FileForm | None:
        """How the immutable metadata file ``key`` (``snapshots/ID``, ``manifests/ID``, ``transactions/ID``)
        is written: known from reading it, or read now (a manifest decoded, another file's header parsed);
        None when it is not there (garbage collection removes transaction logs)."""
        form = self._forms.get(key)
        if form is not None:
            return form
        if key.startswith("manifests/"):
            try:
                self.manifest(key.partition("/")[2])
            except ZSError:
                return None
            return self._forms.get(key)
        raw = self.storage.read(key)  # whole: a range read of a missing object is not an answer everywhere
        if raw is None:
            return None
        form = FileForm(parse_header(raw[:HEADER_LENGTH], self._name(key)).implementation)
        self._forms[key] = form
        return form

    def file_forms_since(self, mark: int) -> tuple[dict[str, FileForm], int]:
        """The forms of the files read since ``mark`` (0: since opening), by key, and the mark of now: for
        :meth:`add_file_forms` of another Repository of the same storage, which then reads none of them."""
        return dict(itertools.islice(self._forms.items(), mark, None)), len(self._forms)

    def add_file_forms(self, forms: Mapping[str, FileForm]) -> None:
        """Take the forms another Repository of the same storage learned (:meth:`file_forms_since`) as known:
        the files are immutable, so :meth:`file_form` answers them without reading."""
        self._forms.update(forms)

    def changes(self, snapshot_id: SnapshotId) -> CommitChanges:
        """What a snapshot changed since its parent: its own transaction log, merged (V2) with the logs
        of the ancestors ``expire_snapshots`` pruned from under it. A log no longer stored (garbage
        collection removes some) is left out and named in ``missing``, as icechunk does."""
        info = self._snapshot_info(snapshot_id)
        logs, merged, missing = [], [], []
        for sid in info.pruned_tx_logs if info is not None else ():
            raw = self.storage.read(f"transactions/{sid}")
            if raw is None:
                missing.append(sid)
            else:
                logs.append(self._transaction_log(sid, raw))
                merged.append(sid)
        raw = self.storage.read(f"transactions/{snapshot_id}")
        if raw is None:
            return CommitChanges(None, tuple(merged), (*missing, snapshot_id))
        logs.append(self._transaction_log(snapshot_id, raw))
        log = logs[0] if len(logs) == 1 else merge_transaction_logs(logs)
        return CommitChanges(log, tuple(merged), tuple(missing), tuple(m for one in logs for m in one.moved_nodes))

    def ops_log_files(self) -> list[int]:
        """How many ops-log entries each repo info file holds, following ``repo_before_updates`` from
        ``repo`` (V2; V1: none), as :meth:`ops_log` reads them."""
        counts: list[int] = []
        info, seen = self._info, set()
        while info.spec_version >= 2:
            counts.append(len(info.latest_updates))
            previous = info.repo_before_updates
            if previous is None or previous in seen:
                break
            seen.add(previous)
            raw = self.storage.read(f"overwritten/{previous}")
            if raw is None:
                break
            info = decode_repo_info(raw, self._name(f"overwritten/{previous}"))
        return counts

    def ops_log(self) -> Iterator[Update]:
        """Every ops-log entry newest first, following ``repo_before_updates`` into overwritten/ (V1: none).

        As icechunk does, an older file's first entry (stored without a backup path) gets the name of
        that file, and a backup that no longer exists ends the log.
        """
        info = self._info
        yield from info.latest_updates
        for previous in parent_chain(
            info.repo_before_updates,
            lambda _: info.repo_before_updates,
            lambda at: ZSCorrupt(f"{self.storage.name}: repo_before_updates chain loops at {at}"),
        ):
            raw = self.storage.read(f"overwritten/{previous}")
            if raw is None:
                return
            info = decode_repo_info(raw, self._name(f"overwritten/{previous}"))
            for update in info.latest_updates:
                yield (
                    update
                    if update.backup_path is not None
                    else Update(update.type, update.updated_at, previous, update.details)
                )

    # ---- navigation ----

    def node(self, snapshot_id: SnapshotId, path: str) -> Node:
        """The node at ``path`` in a snapshot; ZSError if there is none."""
        nodes = self._nodes.get(snapshot_id)
        if nodes is None:
            nodes = self._nodes[snapshot_id] = {n.path: n for n in self.snapshot(snapshot_id).nodes}
        try:
            return nodes[path]
        except KeyError:
            raise ZSError(f"{self.storage.name}: snapshot {snapshot_id} has no node {path!r}") from None

    def chunk_refs(self, snapshot_id: SnapshotId, path: str) -> Iterator[ChunkRef]:
        """All chunk refs of the array at ``path`` in a snapshot, in ascending coordinate order.

        A manifest only answers for the region its ManifestRef extents cover (as in icechunk).
        """
        node = self.node(snapshot_id, path)
        if node.node_type is not NodeType.ARRAY:
            raise ZSError(f"{self.storage.name}: {path!r} in snapshot {snapshot_id} is a group, not an array")
        streams = []
        for mref in node.manifests:
            referrer = f"snapshot {snapshot_id} (array {path!r})"
            manifest = self.manifest(mref.id, referrer)
            streams.append(
                _within(
                    manifest.chunk_refs(node.id),
                    mref.extents,
                    f"{self._name('manifests/' + mref.id)} (used by {referrer})",
                )
            )
        if len(streams) == 1:
            return streams[0]
        return heapq.merge(*streams, key=lambda ref: ref.index)


def _within(refs: Iterator[ChunkRef], extents: list[tuple[int, int]], where: str) -> Iterator[ChunkRef]:
    """The refs whose index lies inside ``extents`` (one half-open range per dimension)."""
    ndim = len(extents)
    lows = tuple(lo for lo, _ in extents)
    highs = tuple(hi for _, hi in extents)

    def inside(ref: ChunkRef) -> bool:
        index = ref.index
        if len(index) != ndim:
            raise ZSCorrupt(
                f"{where}: ref {list(index)} has {len(index)} coordinates, but the "
                f"manifest ref extents have {ndim} dimensions"
            )
        return all(lo <= i < hi for lo, i, hi in zip(lows, index, highs))

    def inside_1d(ref: ChunkRef) -> bool:
        index = ref.index
        if len(index) != 1:
            return inside(ref)
        return lows[0] <= index[0] < highs[0]

    def inside_2d(ref: ChunkRef) -> bool:
        index = ref.index
        if len(index) != 2:
            return inside(ref)
        return lows[0] <= index[0] < highs[0] and lows[1] <= index[1] < highs[1]

    return filter({1: inside_1d, 2: inside_2d}.get(ndim, inside), refs)
