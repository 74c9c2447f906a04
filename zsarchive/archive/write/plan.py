"""Stage 1 of an export (:mod:`exporter <zsarchive.archive.write.exporter>`): what to read. The snapshots,
their transaction logs, and each array whose manifests differ from the ones it had in the parent snapshot
(an *array change*), named before any file beyond the snapshots is decoded."""

from __future__ import annotations

from dataclasses import dataclass

from zsarchive.archive.format.shards import shard_layout
from zsarchive.errors import ZSCorrupt
from zsarchive.icechunk import Repository
from zsarchive.icechunk.model import NodeType, SnapshotInfo
from zsarchive.walk import parent_chain

_MAX_SPLIT = 64  # decoding tasks one manifest becomes at most
_DIFF_TASK_SHARE = 4  # a diff against the parent's manifest: ranges this many times larger (see change_tasks)


@dataclass(frozen=True)
class ArrayChange:
    """An array whose chunk refs a snapshot may change: its manifests there and in the parent."""

    snapshot_id: str
    node_id: str
    manifests: tuple
    """(manifest id, extents) of the array in the snapshot."""
    base: tuple
    """The same in the parent snapshot; () where the array's timeline starts (no such array there)."""
    refs: int
    """Chunk refs the snapshot's manifests hold (all arrays), an upper bound for splitting tasks."""
    shard: str | None = None
    """The array's shard layout in the snapshot (ShardLayout.encode), if it is sharded."""


@dataclass
class ExportPlan:
    """What an export reads: every file of the repository it needs, named before any is decoded."""

    snapshots: list[SnapshotInfo]
    """Every snapshot, in id order."""
    txlogs: list[tuple[str, int]]
    """(snapshot id, flushed_at) of each transaction log to read: all but the initial snapshot's
    (that log is empty; V1 repositories may lack it)."""
    changes: list[ArrayChange]
    """Every array whose manifests differ from its parent's, by (node id, snapshot id)."""
    since: dict[str, dict[str, str]]
    """Snapshot id -> array node id -> the snapshot its chunk ref timeline starts at."""
    left_out: dict[str, str]
    """Snapshot id -> why the export leaves it out (see :func:`unreadable_snapshots`)."""

    def change_tasks(self, task_refs: int) -> list[tuple[ArrayChange, int, int | None]]:
        """(change, first ref, stop ref or None) in file order: an array's manifest, when it is the only
        one (and the parent's too, if any), splits into ranges of refs so that several workers decode it
        (and diff it against the parent's) and writing starts on the first range while later ones are
        decoded. The ranges of a diff are :data:`_DIFF_TASK_SHARE` times larger: each decompresses both
        whole manifests (a zstd frame is read from its start), which costs about what comparing a
        million refs of them does."""
        out: list[tuple[ArrayChange, int, int | None]] = []
        for change in self.changes:
            # the count comes from the snapshot file: however large it claims, a manifest is cut at most
            # _MAX_SPLIT ways (ranges past its real end decode to nothing)
            step = max(task_refs * (_DIFF_TASK_SHARE if change.base else 1), -(-change.refs // _MAX_SPLIT))
            cuts = list(range(0, change.refs, step))[1:] if len(change.manifests) == 1 and len(change.base) <= 1 else []
            out += [(change, lo, hi) for lo, hi in zip([0] + cuts, cuts + [None])]
        return out


def parents_first(snapshots: list[SnapshotInfo]) -> list[SnapshotInfo]:
    """The snapshots, each after its parent (ZSCorrupt if parent links loop)."""
    by_id = {s.id: s for s in snapshots}
    done: set[str] = set()
    out: list[SnapshotInfo] = []
    for info in snapshots:
        chain: list[SnapshotInfo] = []
        for sid in parent_chain(
            info.id,
            lambda sid: by_id[sid].parent_id,
            lambda _: ZSCorrupt(f"the parent chain of snapshot {info.id} loops"),
        ):
            if sid in done or sid not in by_id:
                break
            chain.append(by_id[sid])
        done.update(item.id for item in chain)
        out += reversed(chain)
    return out


def unreadable_snapshots(repo: Repository, snapshots: list[SnapshotInfo]) -> dict[str, str]:
    """Snapshots no branch or tag reaches whose manifests garbage collection removed (icechunk 1.1
    leaves such snapshot files behind; icechunk cannot open them either), with the reason."""
    parents = {info.id: info.parent_id for info in snapshots}
    reachable: set[str] = set()
    for tip in {*repo.branches().values(), *repo.tags().values()}:
        for sid in parent_chain(tip, parents.get):  # each snapshot walked once
            if sid in reachable:
                break
            reachable.add(sid)
    stray = [info.id for info in snapshots if info.id not in reachable]
    if not stray or not repo.storage.can_list:
        return {}
    stored = set(repo.storage.list("manifests"))
    out = {}
    for sid in stray:
        gone = [m.id for m in repo.snapshot(sid).manifest_files if m.id not in stored]
        if gone:
            out[sid] = f"no branch or tag reaches it and its manifest {gone[0]} is no longer in the repository"
    return out


def plan_export(
    repo: Repository,
    skip: frozenset[str] = frozenset(),
    known: dict[str, tuple[dict[str, tuple], dict[str, str]]] | None = None,
) -> ExportPlan:
    """Read the snapshot files and list what else the export must read: the transaction logs, and
    each array whose manifests differ from those it had in the parent snapshot. A fragment's plan
    ``skip``s the snapshots its base holds; ``known`` gives those that are parents of new ones, each
    as (array node id -> manifests, array node id -> timeline start)."""
    snapshots = sorted(repo.snapshots(), key=lambda s: s.id)
    fresh = [info for info in snapshots if info.id not in skip]
    repo.prefetch("snapshots", [info.id for info in parents_first(fresh)])
    left_out = unreadable_snapshots(repo, fresh)
    snapshots = [info for info in fresh if info.id not in left_out]
    order = parents_first(snapshots)
    known = known or {}
    arrays: dict[str, dict[str, tuple]] = {sid: here for sid, (here, _) in known.items()}
    since: dict[str, dict[str, str]] = {sid: starts for sid, (_, starts) in known.items()}
    planned = {s.id for s in snapshots} | set(known)
    changes: list[ArrayChange] = []
    for info in order:
        snap = repo.snapshot(info.id)
        # no ref takes fewer than 4 bytes of its manifest file (its offset in the refs vector)
        refs = sum(min(m.num_chunk_refs, m.size_bytes // 4) for m in snap.manifest_files)
        array_nodes = [node for node in snap.nodes if node.node_type is NodeType.ARRAY]
        here = arrays[info.id] = {
            node.id: tuple((m.id, tuple(tuple(e) for e in m.extents)) for m in node.manifests) for node in array_nodes
        }
        layouts = {node.id: shard_layout(node.user_data) for node in array_nodes}
        parent = info.parent_id if info.parent_id in planned else None
        before, starts = ({}, {}) if parent is None else (arrays.get(parent, {}), since.get(parent, {}))
        since[info.id] = {}
        for node_id, manifests in here.items():
            base = before.get(node_id, ())
            since[info.id][node_id] = starts[node_id] if node_id in before else info.id
            if manifests != base:
                layout = layouts[node_id]
                changes.append(
                    ArrayChange(info.id, node_id, manifests, base, refs, None if layout is None else layout.encode())
                )
    txlogs = [(info.id, info.flushed_at) for info in snapshots if info.parent_id is not None]
    changes.sort(key=lambda c: (c.node_id, c.snapshot_id))
    return ExportPlan(snapshots, txlogs, changes, since, left_out)
