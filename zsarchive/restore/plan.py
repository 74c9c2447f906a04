"""The second stage of a restore: which snapshots come back, and each file of the repository as a model.

From an :class:`~zsarchive.restore.source.ArchiveHistory` it decides the snapshots a selection of refs
reaches (or only their tips, ``shallow``), the spec version of each file (a V2 repository that icechunk
migrated from V1 keeps its V1 files: those written before the migration), the refs of a manifest (the
refs of the arrays naming it, at the first snapshot naming it, within its extents) and each snapshot's
transaction log.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Iterable, Iterator

import numpy as np

from zsarchive.archive.format import schema
from zsarchive.archive.format.header import refs_by_manifest
from zsarchive.archive.read.invariants import ops_log_file_names
from zsarchive.archive.read.reader import ArchiveReader, NotFound
from zsarchive.archive.read.refspec import parse_ref
from zsarchive.errors import ZSCorrupt, ZSError
from zsarchive.icechunk.header import IMPLEMENTATION
from zsarchive.icechunk.model import (
    ChunkRef,
    FileHeader,
    FileType,
    MoveOperation,
    Node,
    RepoInfo,
    RepoStatus,
    Snapshot,
    TransactionLog,
)
from zsarchive.icechunk.paths import path_key
from zsarchive.restore.source import ArchiveHistory, SnapshotRecord, Timelines, manifest_refs, timeline_refs
from zsarchive.suggest import hint
from zsarchive.walk import parent_chain

_LIST_FIELDS = ("new_groups", "new_arrays", "deleted_groups", "deleted_arrays", "updated_groups", "updated_arrays")


@dataclass
class ManifestPlan:
    """One manifest file to write: which arrays it serves, at which snapshot, and its size."""

    id: str
    spec_version: int
    size: int
    num_refs: int
    users: list[tuple[str, Node]]
    """(snapshot id, array node) pairs whose refs it holds (the first snapshot naming it)."""
    implementation: str = IMPLEMENTATION
    location_dictionary: bytes | None = None
    """Virtual locations are compressed with it (as the original's were) when given."""


@dataclass
class RestorePlan:
    """Everything a restore writes, as models (manifest refs are made on demand: they can be many)."""

    spec_version: int
    snapshots: dict[str, SnapshotRecord]
    """The snapshots restored, with the parents they get."""
    parents: dict[str, str | None]
    file_spec: dict[str, int]
    """Snapshot id -> the spec version of its snapshot and transaction log files."""
    manifests: dict[str, ManifestPlan]
    branches: dict[str, str]
    tags: dict[str, str]
    deleted_tags: list[str]
    history: ArchiveHistory
    resized: dict[str, int] = field(default_factory=dict)
    """Manifest id -> the size its file got where it could not be the size the snapshots name."""

    def implementation(self, key: str) -> str:
        """The implementation name the header of file ``key`` had (format 6), or zsarchive's own."""
        if key == "repo":
            repo_file = self.history.repo_file
            return IMPLEMENTATION if repo_file is None else repo_file.implementation
        form = self.history.files.get(key)
        return IMPLEMENTATION if form is None else form.implementation

    def snapshot(self, sid: str) -> Snapshot:
        """The snapshot file's model."""
        record = self.snapshots[sid]
        spec = self.file_spec[sid]
        header = FileHeader(self.implementation(f"snapshots/{sid}"), spec, FileType.SNAPSHOT, 1)
        files = [
            replace(m, size_bytes=self.resized[m.id]) if m.id in self.resized else m for m in record.manifest_files
        ]
        return Snapshot(
            header,
            sid,
            self.parents[sid] if spec == 1 else None,
            record.info.flushed_at,
            record.info.message,
            record.info.metadata,
            record.nodes,
            files,
        )

    def transaction_logs(self) -> Iterator[TransactionLog]:
        """Every transaction log file: each restored snapshot's own, and an empty one per pruned id that
        has no log of its own. Where expiration pruned ancestors from under a snapshot the archive keeps
        their logs merged with its own: the merged log becomes its own (icechunk unites them again), with
        the moves of the pruned logs that are not restored here."""
        written: set[str] = set()
        pruned_moves: dict[str, list[MoveOperation]] = {}
        for sid in self.snapshots:
            summary = self.history.txlogs.get(sid)
            if summary is None:
                if self.parents[sid] is None and self.file_spec[sid] >= 2:
                    written.add(sid)
                    yield self._log(sid, self.file_spec[sid], {}, {}, [])  # icechunk writes one for a new repository
                continue
            if sid in summary.missing:
                continue
            coords = summary.coords
            moves = summary.moves
            if summary.merged:
                moves = self._share_moves(summary, pruned_moves)
            written.add(sid)
            yield self._log(sid, self.file_spec[sid], summary.lists, coords, moves)
        for sid in self.snapshots:
            summary = self.history.txlogs.get(sid)
            for pruned in summary.merged if summary is not None else ():
                if pruned not in written and not self._has_own_log(pruned):
                    written.add(pruned)
                    yield self._log(pruned, self.file_spec[sid], {}, {}, pruned_moves.get(pruned, []))

    def _log(self, sid: str, spec: int, lists: dict, coords: dict, moves: list) -> TransactionLog:
        # the first snapshot's log is not in the archive: icechunk wrote it with the snapshot
        key = f"transactions/{sid}" if f"transactions/{sid}" in self.history.files else f"snapshots/{sid}"
        header = FileHeader(self.implementation(key), spec, FileType.TRANSACTION_LOG, 1)
        return TransactionLog(header, sid, *(list(lists.get(f, ())) for f in _LIST_FIELDS[:6]), coords, list(moves))

    def _has_own_log(self, sid: str) -> bool:
        return sid in self.snapshots and sid in self.history.txlogs

    def _share_moves(self, summary, pruned_moves: dict[str, list[MoveOperation]]) -> list[MoveOperation]:
        """The moves of a merged log, unjoined and oldest first, handed back to the logs they came from
        so that icechunk lists them in the same order: a restored pruned ancestor keeps its own, each
        other pruned log takes a run sorted by destination (a log's moves are so sorted), and the
        snapshot's own log the rest. Returns the own log's moves."""
        moves, at = list(summary.unjoined_moves), 0
        mine = [p for p in summary.merged if self._has_own_log(p)]
        for pruned in summary.merged:
            if self._has_own_log(pruned):
                own = list(self.history.txlogs[pruned].moves)
                if moves[at : at + len(own)] == own:
                    at += len(own)
                    mine.remove(pruned)
                continue
            stop = len(moves)
            if mine:  # the next restored ancestor's moves start where its own list is found
                nxt = list(self.history.txlogs[mine[0]].moves)
                stop = next((j for j in range(at, len(moves)) if nxt and moves[j : j + len(nxt)] == nxt), stop)
            end = at
            while end < stop and (end == at or path_key(moves[end - 1].to_path) <= path_key(moves[end].to_path)):
                end += 1
            pruned_moves[pruned] = moves[at:end]
            at = end
        return sorted(moves[at:], key=lambda m: path_key(m.to_path))

    def repo_infos(self) -> list[tuple[str, RepoInfo]]:
        """The V2 repo info files: ``repo`` first, then the ``overwritten/`` files its ops log continues
        in, each holding as many entries as the original's did (format 6: ``repo_file``; the whole log in
        ``repo`` before), each file's first entry without a backup path, as icechunk writes them.
        Every file holds the restored refs and snapshots: icechunk reads only the updates of the others."""
        whole = self.repo_info()
        ops = list(self.history.ops)
        counts = () if self.history.repo_file is None else self.history.repo_file.ops_log_files
        if len(counts) < 2 or 0 in counts:  # one file, or one that held nothing: the whole log in ``repo``
            return [("repo", whole)]
        names = ops_log_file_names(
            counts, [((u.updated_at, len(ops) - 1 - i), u.backup_path) for i, u in enumerate(ops)]
        )
        if None in names or len(set(names)) < len(names):
            return [("repo", whole)]
        out, at = [], 0
        for i, n in enumerate(counts):
            part = [replace(ops[at], backup_path=None), *ops[at + 1 : at + n]]
            key = "repo" if i == 0 else f"overwritten/{names[i - 1]}"
            out.append(
                (key, replace(whole, latest_updates=part, repo_before_updates=names[i] if i < len(names) else None))
            )
            at += n
        return out

    def repo_info(self) -> RepoInfo:
        """The V2 ``repo`` file's model: every restored snapshot, refs, the whole ops log in one file."""
        facts = self.history.facts
        infos = []
        for sid, record in self.snapshots.items():
            summary = self.history.txlogs.get(sid)
            pruned = () if summary is None else tuple(i for i in summary.merged + summary.missing if i != sid)
            infos.append(replace(record.info, parent_id=self.parents[sid], pruned_tx_logs=pruned))
        status = facts.get("status")
        flags = facts.get("feature_flags") or {}
        ops = list(self.history.ops)
        if ops and ops[0].backup_path is not None:
            ops[0] = replace(ops[0], backup_path=None)  # icechunk's next update starts from it
        header = FileHeader(self.implementation("repo"), 2, FileType.REPO_INFO, 1)
        return RepoInfo(
            header,
            2,
            self.branches,
            self.tags,
            self.deleted_tags,
            infos,
            None if status is None else RepoStatus(**status),
            facts.get("metadata") or {},
            ops,
            None,
            facts.get("config"),
            list(flags.get("enabled", [])),
            list(flags.get("disabled", [])),
        )


def _migration_time(history: ArchiveHistory) -> int | None:
    """When icechunk migrated the repository from V1 to V2 (files written before are V1), if it did."""
    times = [u.updated_at for u in history.ops if u.type == "RepoMigratedUpdate"]
    return max(times) if times else None


def _ancestry(history: ArchiveHistory, sid: str) -> Iterator[str]:
    """The snapshot and its ancestors the archive holds (a loop ends where it closes)."""
    for current in parent_chain(sid, lambda at: history.snapshots[at].info.parent_id):
        if current not in history.snapshots:
            return
        yield current


def select(history: ArchiveHistory, refs: Iterable[str] = (), shallow: bool = False) -> RestorePlan:
    """The plan for the whole history, or for what ``refs`` (names of branches and tags, ``branch:``/
    ``tag:`` prefixes allowed) reach; ``shallow``: only their tips, each without a parent. ``main`` is
    always restored (icechunk requires it)."""
    branches, tags = dict(history.branches), dict(history.tags)
    refs = list(refs)
    if refs or shallow:
        wanted_branches, wanted_tags = {"main"} & set(branches), set()
        for ref in refs or [*(f"branch:{b}" for b in branches), *(f"tag:{t}" for t in tags)]:
            spec = parse_ref(ref, suffixes="")  # a name as it stands: a ref's name may hold ~, ^ or @
            if spec.kind in (None, "branch") and spec.name in branches:
                wanted_branches.add(spec.name)
            elif spec.kind in (None, "tag") and spec.name in tags:
                wanted_tags.add(spec.name)
            else:
                raise NotFound(
                    f"{history.name}: no branch or tag {ref!r} in the archive"
                    + hint(spec.name, [*branches, *tags], "branches and tags")
                )
        branches = {b: s for b, s in branches.items() if b in wanted_branches}
        tags = {t: s for t, s in tags.items() if t in wanted_tags}
        tips = set(branches.values()) | set(tags.values())
        if shallow:
            keep = tips
        else:
            keep = {sid for tip in tips for sid in _ancestry(history, tip)}
        chosen = {sid: history.snapshots[sid] for sid in sorted(keep)}
    else:
        chosen = dict(history.snapshots)
    if "main" not in branches:
        raise ZSError(f"{history.name}: the archive has no branch 'main', which every Icechunk repository needs")
    for kind, refs_of_kind in (("branch", branches), ("tag", tags)):
        for name, sid in refs_of_kind.items():
            if sid not in history.snapshots:
                raise ZSCorrupt(f"{history.name}: {kind} {name!r} points at snapshot {sid}, which the archive lacks")
    parents = {sid: (None if shallow else rec.info.parent_id) for sid, rec in chosen.items()}
    parents = {sid: p if p in chosen else None for sid, p in parents.items()}
    migrated = _migration_time(history)
    file_spec = {
        sid: 1 if history.spec_version == 1 or (migrated is not None and rec.info.flushed_at < migrated) else 2
        for sid, rec in chosen.items()
    }
    manifests: dict[str, ManifestPlan] = {}
    for sid in sorted(chosen, key=lambda s: (chosen[s].info.flushed_at, s)):
        record = chosen[sid]
        sizes = {m.id: m for m in record.manifest_files}
        for node in record.nodes:
            for ref in node.manifests:
                plan = manifests.get(ref.id)
                info = sizes.get(ref.id)
                if plan is None:
                    form = history.files.get(f"manifests/{ref.id}")
                    plan = manifests[ref.id] = ManifestPlan(
                        ref.id,
                        file_spec[sid],
                        info.size_bytes if info else 0,
                        info.num_chunk_refs if info else 0,
                        [],
                        IMPLEMENTATION if form is None else form.implementation,
                        form.location_dictionary if form is not None and form.compression_algorithm == 1 else None,
                    )
                if all(user.id != node.id for _, user in plan.users) and (not plan.users or plan.users[0][0] == sid):
                    plan.users.append((sid, node))
    return RestorePlan(
        history.spec_version,
        chosen,
        parents,
        file_spec,
        manifests,
        branches,
        tags,
        sorted(history.deleted_tags),
        history,
    )


class ManifestContents:
    """Makes the refs of each manifest from the archive's chunk ref records (the arrays' timelines, kept
    a few at a time: manifests are made in the order of the arrays they serve)."""

    def __init__(self, reader: ArchiveReader, plan: RestorePlan, timelines: Timelines):
        self.reader = reader
        self.plan = plan
        self.timelines = timelines

    def refs(self, manifest: ManifestPlan) -> list[tuple[str, list[ChunkRef]]]:
        """(node id, refs) of every array the manifest holds refs of."""
        if refs_by_manifest(self.reader.format_version):
            return sorted(manifest_refs(self.reader, manifest.id).items())
        out = []
        for sid, node in manifest.users:
            rows = self.timelines.get(node.id, *self._range(node, manifest.id))
            if not len(rows):
                continue
            rank = self._ranks(sid, node.id)
            depth = np.array([rank.get(s, -1) for s in rows.snapshot_ids], np.int64)[rows.snapshot]
            # a chunk's changes are adjacent rows: keep, of each chunk, the change nearest the snapshot
            starts = np.ones(len(rows), bool)
            starts[1:] = (rows.coords[1:] != rows.coords[:-1]).any(axis=1)
            chunk = np.cumsum(starts)
            inside = np.flatnonzero(depth >= 0)
            inside = inside[np.lexsort((depth[inside], chunk[inside]))]
            nearest = np.ones(len(inside), bool)
            nearest[1:] = chunk[inside[1:]] != chunk[inside[:-1]]
            chosen = inside[nearest]
            chosen = chosen[rows.kind[chosen] != schema.REMOVED]
            chosen = chosen[_first_manifests(node, rows.coords[chosen]) == manifest.id]
            if len(chosen):
                out.append((node.id, timeline_refs(rows, chosen)))
        return out

    def _range(self, node: Node, manifest_id: str) -> tuple[int | None, int | None]:
        """The range of the array's first axis whose timeline holds the refs of ``manifest_id``: the one of
        :meth:`ArchiveHistory.ranges` that holds the manifest's extents (all of it unsplit), else theirs."""
        ranges = self.plan.history.ranges(node.id)
        extents = next((ref.extents for ref in node.manifests or () if ref.id == manifest_id), None)
        if len(ranges) == 1 or not extents:
            return ranges[0] if len(ranges) == 1 else (None, None)
        lo, hi = extents[0]
        return next(((a, b) for a, b in ranges if (a is None or a <= lo) and (b is None or hi <= b)), (lo, hi))

    def _ranks(self, sid: str, node_id: str) -> dict[str, int]:
        """Snapshot id -> distance from ``sid`` on its history, down to the array's ``since``."""
        history = self.plan.history
        since = history.snapshots[sid].since.get(node_id)
        ranks = {}
        for depth, ancestor in enumerate(_ancestry(history, sid)):
            ranks[ancestor] = depth
            if ancestor == since:
                break
        return ranks


def _first_manifests(node: Node, coords: np.ndarray) -> np.ndarray:
    """The id of the first of the node's manifests whose extents hold each row of ``coords`` ('' none)."""
    out = np.full(len(coords), "", dtype=object)
    free = np.ones(len(coords), bool)
    for ref in node.manifests:
        within = free.copy()
        for axis, (lo, hi) in enumerate(ref.extents[: coords.shape[1]]):
            within &= (coords[:, axis] >= lo) & (coords[:, axis] < hi)
        out[within] = ref.id
        free &= ~within
    return out
