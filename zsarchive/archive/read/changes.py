"""Queries of change: one chunk's history, the diff between two snapshots, the ops log."""

from __future__ import annotations

from typing import Any, Iterable, Iterator

from zsarchive.archive.format import schema
from zsarchive.archive.format.views import NODE_SETS, HistoryKey, NodeKey, NodeValue, OpsKey, OpsValue, TxlogValue
from zsarchive.archive.read import chunkhistory
from zsarchive.archive.read.nodes import NodeQueries
from zsarchive.archive.read.reader import NotFound
from zsarchive.archive.read.refspec import TimeBound, chunk_coords, time_bound
from zsarchive.errors import ZSCorrupt, ZSError
from zsarchive.times import format_time
from zsarchive.limits import load_json


class ChangeQueries(NodeQueries):
    """What changed: per chunk (from the transaction logs), between snapshots, and in the repository's ops log."""

    def chunk_history(self, path: str, coords: Iterable[int], ref: str | None = None) -> list[dict]:
        """The commits in REF's history (default ``main``) that changed that chunk, newest first."""
        ref = ref or "main"
        coords = chunk_coords(coords)
        sid = self.resolve(ref)
        node = self._node_at(sid, path, ref)
        history = {sid for sid, _ in self._ancestry(sid)}
        changes = sorted(
            ((change.flushed_at, change.snapshot_id) for change in self.history_entries(node.id, coords)), reverse=True
        )
        return [
            self._snapshot_dict(change_sid, self._snapshot_value(change_sid))
            for _, change_sid in changes
            if change_sid in history
        ]

    def history_entries(self, node_id: str, coords: tuple | None = None) -> Iterator[HistoryKey]:
        """``(node_id, coords, flushed_at, snapshot_id)`` of every commit whose transaction log names a chunk
        of the array ``node_id`` (only of ``coords`` when given), in no particular order
        (:func:`zsarchive.archive.read.chunkhistory.chunk_changes`)."""
        key = (node_id,) if coords is None else (node_id, coords)
        return chunkhistory.chunk_changes(self.zs, self.records_format, self._flushed_at, key)

    def _flushed_at(self, snapshot_id: str) -> int:
        value = self._snapshot_value(snapshot_id)
        if value is None:
            raise ZSCorrupt(f"{self.name}: a chunk ref record names snapshot {snapshot_id}, which has no S record")
        return value.flushed_at

    def diff(self, from_ref: str, to_ref: str) -> dict:
        """What changed from FROM to TO (FROM must be in TO's history), as icechunk's ``diff`` says it
        (nothing when both name the same snapshot)."""
        from_id, to_id = self.resolve(from_ref), self.resolve(to_ref)
        between = []
        for sid, value in self._ancestry(to_id):
            if sid == from_id:
                break
            between.append((sid, value))
        else:
            if any(sid == to_id for sid, _ in self._ancestry(from_id)):
                raise ZSError(
                    f"{self.name}: cannot diff: {from_ref!r} is not in the history of {to_ref!r}, "
                    f"but {to_ref!r} is in the history of {from_ref!r}: swap them (FROM is the older: "
                    f"diff {to_ref!r} {from_ref!r})"
                )
            raise ZSError(
                f"{self.name}: cannot diff: {from_ref!r} is not in the history of {to_ref!r} (nor the "
                "reverse): FROM must be an ancestor of TO"
            )
        sets: dict[str, set] = {name: set() for name in NODE_SETS}
        chunk_nodes: set[str] = set()
        moved: list[list[str]] = []
        changed = set()
        for sid, value in between:
            if value.parent_id is None:
                continue  # the initial snapshot: icechunk leaves its (empty) log out too
            changed.add(sid)
            found = self._one(schema.TXLOG, (sid,))
            if found is None:
                raise ZSCorrupt(f"{self.name}: snapshot {sid} has no transaction log record")
            tx = TxlogValue.decode(found)
            if sid in tx.lost_logs:
                raise ZSError(
                    f"{self.name}: cannot diff across snapshot {sid}: its transaction log was no "
                    f"longer in the repository when it was archived"
                )
            for name, ids in zip(sets, tx.sets):
                sets[name].update(ids)
            chunk_nodes.update(node_id for node_id, _ in tx.updated_chunks)
            moved.extend([m[0], m[1]] for m in tx.moves)  # unjoined, as icechunk
        paths: dict[str, str] = {}
        for snapshot_id in (from_id, to_id):
            for k, v in self._records(schema.NODE, (snapshot_id,)):
                paths[NodeValue.decode(v).node_id] = NodeKey.decode(k).path
        out: dict[str, Any] = {name: sorted(paths[i] for i in ids if i in paths) for name, ids in sets.items()}
        updated: dict[str, list[list[int]]] = {}
        for node_id in sorted(chunk_nodes):
            if node_id not in paths:
                continue
            # A node a log lists with no chunks (icechunk 1.1 writes such entries) is in the diff too.
            coords = sorted(
                {change.coords for change in self.history_entries(node_id) if change.snapshot_id in changed}
            )
            updated[paths[node_id]] = [list(c) for c in coords]
        out["updated_chunks"] = dict(sorted(updated.items()))
        out["moved_nodes"] = moved
        return out

    def ops_log(self, since: TimeBound = None, until: TimeBound = None) -> list[dict]:
        """Ops-log entries updated in ``[since, until]`` (inclusive bounds as for :meth:`log`), newest first."""
        since, until = time_bound(since, False), time_bound(until, True)
        if until is not None:
            first = next((OpsKey.decode(k) for k, _ in self._range(schema.OPS, (), None)), None)
            if first is not None and until < first.updated_at:
                raise NotFound(
                    f"{self.name}: {format_time(until)} is before the first operation ({format_time(first.updated_at)})"
                )
        start = () if since is None else (since,)
        stop = None if until is None else (until + 1,)
        out = []
        for k, value in self._range(schema.OPS, start, stop):
            updated_at, op = OpsKey.decode(k).updated_at, OpsValue.decode(value)
            entry = {"type": op.type, "updated_at": format_time(updated_at), "backup_path": op.backup_path}
            entry.update(_present_details(load_json(op.details, f"{self.name}: archive ops record {updated_at}")))
            out.append(entry)
        out.reverse()
        return out


def _present_details(details: dict) -> dict:
    """Ops-log details as icechunk's ``ops_log()`` shows them: times as text, unset flags as null."""
    status = details.get("status")
    if isinstance(status, dict):
        status = dict(status)
        if isinstance(status.get("set_at"), int):
            status["set_at"] = format_time(status["set_at"])
        if isinstance(status.get("availability"), str):
            status["availability"] = status["availability"].replace("-", "_")
        details["status"] = status
    if details.get("is_set") is False:
        details["new_value"] = None  # the flag went back to its default: icechunk says None
    return details
