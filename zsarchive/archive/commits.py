"""Queries of commits as git shows them: the snapshot tree with ref names (``log --graph``) and one
commit with what it changed per node (``show --stat``)."""

from __future__ import annotations

from typing import Any

from zsarchive.archive import schema as S
from zsarchive.archive.changes import ChangeQueries
from zsarchive.archive.loggraph import layout, topo_order
from zsarchive.errors import ZSCorrupt

_CHANGE_KINDS = (("new_groups", "new group", "group"), ("new_arrays", "new array", "array"),
                 ("deleted_groups", "deleted group", "group"), ("deleted_arrays", "deleted array", "array"),
                 ("updated_groups", "updated group", "group"), ("updated_arrays", "updated array", "array"))
"""Transaction-log id sets in their record order: (set, change, node type)."""


class CommitQueries(ChangeQueries):
    """The snapshot tree and single commits, decorated with the branch and tag names at them."""

    def ref_names(self) -> dict[str, list[str]]:
        """Snapshot id -> the ``branch:NAME`` / ``tag:NAME`` refs at it, branches first, each sorted."""
        out: dict[str, list[str]] = {}
        for ref in sorted(self.refs(), key=lambda r: (r["type"] != "branch", r["name"])):
            if "snapshot_id" in ref:
                out.setdefault(ref["snapshot_id"], []).append(f"{ref['type']}:{ref['name']}")
        return out

    def graph(self, ref: str | None = None, all_refs: bool = False) -> list[dict]:
        """The history of REF (default ``main``), or with ``all_refs`` of every branch and tag, as the
        lines of a git-style graph: each snapshot once, children above parents; each line a dict with
        ``graph`` (its text), and for a snapshot's line the snapshot's fields, ``refs`` and ``column``."""
        tips = ([r["snapshot_id"] for r in self.refs() if "snapshot_id" in r] if all_refs
                else [self.resolve(ref or "main")])
        snapshots: dict[str, dict] = {}
        for tip in tips:
            for sid, value in self._ancestry(tip):
                if sid in snapshots:
                    break  # the rest of this history is drawn already
                snapshots[sid] = self._snapshot_dict(sid, value)
        names = self.ref_names()
        lines = []
        for text, snapshot in layout(topo_order(snapshots.values())):
            if snapshot is None:
                lines.append({"graph": text})
            else:
                lines.append({"graph": text, **snapshot, "refs": names.get(snapshot["id"], [])})
        return lines

    def show(self, ref: str) -> dict:
        """One commit: its snapshot's fields, ``refs`` at it, and ``changes``: per node changed, its path,
        type, change and ``chunks`` (chunk refs written or removed); ``moves`` ``[from, to]``; and
        ``log_missing`` when its transaction log was gone before it was archived."""
        sid = self.resolve(ref)
        out: dict[str, Any] = self._snapshot_dict(sid, self._snapshot_value(sid))
        out["refs"] = self.ref_names().get(sid, [])
        out["changes"], out["moves"], out["log_missing"] = [], [], False
        tx = self._one(S.TXLOG, (sid,))
        if out["parent_id"] is None or tx is None:
            if out["parent_id"] is not None:
                raise ZSCorrupt(f"{self.name}: snapshot {sid} has no transaction log record")
            return out  # the initial snapshot: icechunk writes no log for it
        out["log_missing"] = len(tx) > 9 and sid in tx[9]
        paths = {**self._paths(out["parent_id"]), **self._paths(sid)}  # a deleted node: its path in the parent
        changes: dict[str, dict] = {}
        for (_, change, node_type), ids in zip(_CHANGE_KINDS, tx[:6]):
            for node_id in ids:
                changes.setdefault(node_id, {"path": paths.get(node_id), "id": node_id, "node_type": node_type,
                                             "change": change, "chunks": 0})
        for node_id, count in tx[6]:
            entry = changes.setdefault(node_id, {"path": paths.get(node_id), "id": node_id, "node_type": "array",
                                                 "change": "updated chunks", "chunks": 0})
            entry["chunks"] = count
        out["changes"] = sorted(changes.values(), key=lambda c: (c["path"] is None, c["path"] or "", c["id"]))
        out["moves"] = [[m[0], m[1]] for m in tx[7]]
        return out

    def _paths(self, snapshot_id: str) -> dict[str, str]:
        return {v[0]: S.path_of(k[1]) for k, v in self._records(S.NODE, (snapshot_id,))}
