"""Queries of commits as git shows them: the snapshot tree with ref names (``log --graph``) and one
commit with what it changed per node (``show --stat``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from zsarchive.archive.format import schema
from zsarchive.archive.format.header import history_from_timeline
from zsarchive.archive.format.views import NODE_SETS, NodeKey, NodeValue, TxlogValue
from zsarchive.archive.read import chunkhistory
from zsarchive.archive.read.changes import ChangeQueries
from zsarchive.errors import ZSCorrupt, ZSError

if TYPE_CHECKING:
    import numpy as np

_CHANGES = {name: (name.replace("_", " ")[:-1], name.split("_")[1][:-1]) for name in NODE_SETS}
"""A transaction log's node id set -> (the change, as ``show`` names it; the node type)."""


class CommitQueries(ChangeQueries):
    """The snapshot tree and single commits, decorated with the branch and tag names at them."""

    def ref_names(self) -> dict[str, list[str]]:
        """Snapshot id -> the ``branch:NAME`` / ``tag:NAME`` refs at it, branches first, each sorted."""
        out: dict[str, list[str]] = {}
        for ref in sorted(self.refs(), key=lambda r: (r["type"] != "branch", r["name"])):
            if "snapshot_id" in ref:
                out.setdefault(ref["snapshot_id"], []).append(f"{ref['type']}:{ref['name']}")
        return out

    def graph(self, ref: str | None = None, all_refs: bool = False, max_count: int | None = None) -> list[dict]:
        """The history of REF (default ``main``), or with ``all_refs`` of every branch and tag, as the
        lines of a git-style graph: each snapshot once, children above parents; each line a dict with
        ``graph`` (its text), and for a snapshot's line the snapshot's fields, ``refs`` and ``column``.
        ``max_count``: the lines down to the ``max_count``-th snapshot's."""
        from zsarchive.archive.read.loggraph import layout, topo_order  # here: a lookup does not pay for it

        if max_count is not None and (not isinstance(max_count, int) or isinstance(max_count, bool) or max_count < 0):
            raise ZSError(f"max_count must be an integer >= 0, not {max_count!r}")
        tips = (
            [r["snapshot_id"] for r in self.refs() if "snapshot_id" in r] if all_refs else [self.resolve(ref or "main")]
        )
        snapshots: dict[str, dict] = {}
        for tip in tips:
            for sid, value in self._ancestry(tip):
                if sid in snapshots:
                    break  # the rest of this history is drawn already
                snapshots[sid] = self._snapshot_dict(sid, value)
        names = self.ref_names()
        lines: list[dict[str, Any]] = []
        shown = 0
        for text, snapshot in layout(topo_order(snapshots.values())):
            if max_count is not None and shown == max_count:
                break
            if snapshot is None:
                lines.append({"graph": text})
            else:
                lines.append({"graph": text, **snapshot, "refs": names.get(snapshot["id"], [])})
                shown += 1
        return lines

    def show(self, ref: str) -> dict:
        """One commit: its snapshot's fields, ``refs`` at it, and ``changes``: per node changed, its path,
        type, change and ``chunks`` (chunk refs written or removed); ``moves`` ``[from, to]``; and
        ``log_missing`` when its transaction log was gone before it was archived."""
        sid = self.resolve(ref)
        out: dict[str, Any] = self._snapshot_dict(sid, self._snapshot_value(sid))
        out["refs"] = self.ref_names().get(sid, [])
        out["changes"], out["moves"], out["log_missing"] = [], [], False
        if out["parent_id"] is None:
            return out  # the initial snapshot: icechunk writes no log for it
        found = self._one(schema.TXLOG, (sid,))
        if found is None:
            raise ZSCorrupt(f"{self.name}: snapshot {sid} has no transaction log record")
        tx = TxlogValue.decode(found)
        out["log_missing"] = sid in tx.lost_logs
        paths = {**self._paths(out["parent_id"]), **self._paths(sid)}  # a deleted node: its path in the parent
        changes: dict[str, dict] = {}
        for name, ids in zip(NODE_SETS, tx.sets):
            change, node_type = _CHANGES[name]
            for node_id in ids:
                changes.setdefault(
                    node_id,
                    {"path": paths.get(node_id), "id": node_id, "node_type": node_type, "change": change, "chunks": 0},
                )
        for node_id, count in tx.updated_chunks:
            entry = changes.setdefault(
                node_id,
                {
                    "path": paths.get(node_id),
                    "id": node_id,
                    "node_type": "array",
                    "change": "updated chunks",
                    "chunks": 0,
                },
            )
            entry["chunks"] = count
        out["changes"] = sorted(changes.values(), key=lambda c: (c["path"] is None, c["path"] or "", c["id"]))
        out["moves"] = [[m[0], m[1]] for m in tx.own_moves]  # of a merged log: its moves joined
        return out

    def chunk_changes(self, ref: str, path: str) -> dict:
        """Which chunks of the array PATH (as REF has it) each commit in REF's history changed: ``commits``
        (snapshots, oldest first), ``coords`` (an (n, ndim) int64 array) and ``commit`` (n indexes into
        ``commits``), one row per chunk a commit changed, in coordinate order; ``num_chunks`` of the array
        at REF. The changes are the per-chunk history (:meth:`history_entries`)."""
        import numpy as np

        node = self._array_at(ref, path)
        assert node.shape is not None  # an array's node always has its shape
        depths = self._history_depths(self.resolve(ref))
        ndim = len(node.shape)
        if history_from_timeline(self.records_format):  # millions of changes: decoded in bulk
            table, ids = chunkhistory.timeline_rows(self.zs, node.id, ndim, self.name)
        else:
            table, ids = self._history_rows(node.id, ndim)
        # every snapshot of a history has its value (the history ends where one is missing)
        found = {sid: value for sid in ids if sid in depths and (value := self._snapshot_value(sid)) is not None}
        order = sorted(found, key=lambda sid: (found[sid].flushed_at, sid))
        column = {sid: i for i, sid in enumerate(order)}
        which = np.array([column.get(sid, -1) for sid in ids], np.int64)[table[:, -1]]
        rows = table[which >= 0, :-1]
        which = which[which >= 0]
        rank = np.lexsort((which, *rows.T[::-1])) if len(rows) else np.zeros(0, np.int64)
        return {
            "path": node.path,
            "node_id": node.id,
            "num_chunks": node.num_chunks,
            "commits": [self._snapshot_dict(sid, found[sid]) for sid in order],
            "coords": rows[rank],
            "commit": which[rank],
        }

    def _history_rows(self, node_id: str, ndim: int) -> tuple[np.ndarray, list[str]]:
        """:func:`chunkhistory.timeline_rows` for archives that keep every change as an ``H`` record
        (formats up to 3): one record at a time."""
        import numpy as np

        ids: dict[str, int] = {}
        rows = []
        for change in self.history_entries(node_id):
            coords, sid = change.coords, change.snapshot_id
            if len(coords) != ndim or not all(isinstance(c, int) and c >= 0 for c in coords):
                raise ZSCorrupt(
                    f"{self.name}: chunk history record {(node_id, coords, sid)!r} does not hold "
                    f"{ndim} coordinates of the array"
                )
            rows.append((*coords, ids.setdefault(sid, len(ids))))
        return np.array(rows, np.int64).reshape(len(rows), ndim + 1), list(ids)

    def _paths(self, snapshot_id: str) -> dict[str, str]:
        return {
            NodeValue.decode(v).node_id: NodeKey.decode(k).path for k, v in self._records(schema.NODE, (snapshot_id,))
        }
