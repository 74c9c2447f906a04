"""The per-chunk history of a format 5 archive: the chunk ref timeline itself, and ``H`` records only
where a snapshot's transaction log and its ``C`` records name different chunks of an array
(docs/archive-format.rst, family ``H``).

Both sides are summarised where they are decoded (worker processes, a cluster) as a digest per
(snapshot, array): the number of coordinates and two order-free 64-bit sums of mixed coordinates.
The exporter compares the digests; only where they differ does it read that log and that array's
refs again to write the exact exceptions, so a commit whose log matches its refs costs no record.
"""

from __future__ import annotations

import collections
from typing import Iterable, NamedTuple

import numpy as np

from zsarchive.archive.format import schema
from zsarchive.archive.write.refdelta import array_changes, coord_keys
from zsarchive.icechunk import Repository

_MASK = (1 << 64) - 1
_M1, _M2 = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)
_SEEDS = (np.uint64(0x9E3779B97F4A7C15), np.uint64(0xD1B54A32D192ED03))


class Digest(NamedTuple):
    """Coordinates summarised without order: how many, and two sums of independently mixed rows."""

    count: int = 0  # type: ignore[assignment]  # a field shadowing tuple.count, which nothing calls
    first: int = 0
    second: int = 0

    def __add__(self, other: Digest) -> Digest:  # type: ignore[override]
        return Digest(
            self.count + other.count, (self.first + other.first) & _MASK, (self.second + other.second) & _MASK
        )


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser, on whole arrays (uint64 arithmetic wraps)."""
    x = x ^ (x >> np.uint64(30))
    x = x * _M1
    x = x ^ (x >> np.uint64(27))
    x = x * _M2
    return x ^ (x >> np.uint64(31))


def digest(coords: np.ndarray) -> Digest:
    """The digest of rows of chunk coordinates (an (n, ndim) array of non-negative integers)."""
    coords = np.asarray(coords)
    if not len(coords):
        return Digest()
    rows = coords.astype(np.uint64).reshape(len(coords), -1)
    sums = []
    for seed in _SEEDS:
        h = np.full(len(rows), seed, np.uint64)
        for column in rows.T:
            h = _mix(h ^ column) + seed
        sums.append(int(h.sum(dtype=np.uint64)))
    return Digest(len(rows), *sums)


def log_digests(logged: dict[str, np.ndarray] | None) -> dict[str, Digest]:
    """Per array node id, the digest of the chunks a transaction log names (None: the log is gone)."""
    return {} if logged is None else {node_id: digest(coords) for node_id, coords in logged.items()}


class HistoryTally:
    """Digests per (snapshot id, node id) of both sides, gathered as the export streams them."""

    def __init__(self) -> None:
        self.timeline: collections.defaultdict[tuple[str, str], Digest] = collections.defaultdict(Digest)
        self.logged: dict[tuple[str, str], Digest] = {}

    def add_timeline(self, snapshot_id: str, node_id: str, part: Digest) -> None:
        """Count ``C`` records of one array in one snapshot (a task's batch of them)."""
        if part.count:
            self.timeline[snapshot_id, node_id] += part

    def add_log(self, snapshot_id: str, digests: dict[str, Digest]) -> None:
        """Count a snapshot's transaction log."""
        for node_id, part in digests.items():
            if part.count:
                self.logged[snapshot_id, node_id] = part

    def disagreements(self) -> list[tuple[str, str]]:
        """The (snapshot id, node id) pairs whose log and timeline differ, sorted."""
        pairs = set(self.timeline) | set(self.logged)
        return sorted(p for p in pairs if self.timeline.get(p, Digest()) != self.logged.get(p, Digest()))


def exception_records(
    repo: Repository,
    pairs: Iterable[tuple[str, str]],
    flushed_at: dict[str, int],
    read_logs: set[str],
    changes: dict[tuple[str, str], tuple[tuple, tuple]],
) -> list[bytes]:
    """The ``H`` records of the (snapshot id, node id) pairs whose log and timeline disagree: each
    chunk the log names without a ``C`` record (value true) and each ``C`` record the log does not
    name (value false). ``read_logs``: the snapshots whose log the export reads; ``changes``:
    (manifests, parent's manifests) of the arrays with ``C`` records."""
    out: list[bytes] = []
    logs: dict[str, dict[str, np.ndarray]] = {}
    for sid, node_id in pairs:
        if sid not in logs:
            log = repo.changes(sid).log if sid in read_logs else None
            logs = {sid: {} if log is None else dict(log.updated_coords)}  # pairs are sorted: one log at a time
        logged = logs[sid].get(node_id)
        timeline = _timeline_coords(repo, sid, node_id, changes.get((sid, node_id)))
        if logged is None:
            logged = np.zeros((0, timeline.shape[1]), np.int64)
        if not len(timeline):
            timeline = np.zeros((0, logged.shape[1]), np.int64)
        logged_keys, timeline_keys = coord_keys(logged), coord_keys(timeline)
        for coords, in_log in (
            (logged[~np.isin(logged_keys, timeline_keys)], True),
            (timeline[~np.isin(timeline_keys, logged_keys)], False),
        ):
            out += [
                schema.record(
                    schema.CHUNK_HISTORY, (node_id, tuple(int(c) for c in row), flushed_at[sid], sid), (in_log,)
                )
                for row in coords
            ]
    return out


def _timeline_coords(repo: Repository, sid: str, node_id: str, change: tuple[tuple, tuple] | None) -> np.ndarray:
    """The coordinates of the ``C`` records of one array in one snapshot, read again."""
    if change is None:
        return np.zeros((0, 0), np.int64)
    manifests, base = change
    where = f"snapshot {sid} (array {node_id})"
    parts = []
    for changed, removed in array_changes(repo, node_id, manifests, base, where):
        if changed is not None:
            parts.append(np.asarray(changed.coords))
        if len(removed):
            parts.append(np.asarray(removed))
    parts = [p.reshape(len(p), -1).astype(np.int64) for p in parts if len(p)]
    return np.concatenate(parts) if parts else np.zeros((0, 0), np.int64)
