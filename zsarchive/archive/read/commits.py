"""Queries of commits as git shows them: the snapshot tree with ref names (``log --graph``) and one
commit with what it changed per node (``show --stat``)."""

from __future__ import annotations

import itertools
from typing import Any

from zsarchive.archive.format import keys, schema
from zsarchive.archive.format.views import NODE_SETS, NodeValue, SnapshotValue, TxlogValue
from zsarchive.archive.read.changes import ChangeQueries
from zsarchive.archive.read.loggraph import layout, topo_order
from zsarchive.errors import ZSCorrupt, ZSError

_BATCH = 1 << 16
"""Chunk history records decoded at a time by :meth:`CommitQueries.chunk_changes`."""

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
        if max_count is not None and (not isinstance(max_count, int) or isinstance(max_count, bool) or max_count < 0):
            raise ZSError(f"max_count must be an integer >= 0, not {max_count!r}")
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
                changes.setdefault(node_id, {"path": paths.get(node_id), "id": node_id, "node_type": node_type,
                                             "change": change, "chunks": 0})
        for node_id, count in tx.updated_chunks:
            entry = changes.setdefault(node_id, {"path": paths.get(node_id), "id": node_id, "node_type": "array",
                                                 "change": "updated chunks", "chunks": 0})
            entry["chunks"] = count
        out["changes"] = sorted(changes.values(), key=lambda c: (c["path"] is None, c["path"] or "", c["id"]))
        out["moves"] = [[m[0], m[1]] for m in tx.own_moves]  # of a merged log: its moves joined
        return out

    def chunk_changes(self, ref: str, path: str) -> dict:
        """Which chunks of the array PATH (as REF has it) each commit in REF's history changed: ``commits``
        (snapshots, oldest first), ``coords`` (an (n, ndim) int64 array) and ``commit`` (n indexes into
        ``commits``), one row per chunk a commit changed; ``num_chunks`` of the array at REF.

        Millions of changes decode in bulk (numpy over a batch of records at a time, not a record at a time).
        """
        import numpy as np

        node = self._array_at(ref, path)
        depths = self._history_depths(self.resolve(ref))
        prefix = schema.key_prefix(schema.CHUNK_HISTORY, (node["id"],))
        commits: dict[bytes, str | None] = {}  # key tail (flushed_at, snapshot) -> snapshot id, if in history
        found: dict[str, SnapshotValue] = {}
        parts: list[tuple] = []
        records = self.zs.search(prefix=prefix)
        while batch := list(itertools.islice(records, _BATCH)):
            parts.append(self._decode_history(batch, len(prefix), len(node["shape"]), commits, found, depths))
        order = sorted(found, key=lambda sid: (found[sid].flushed_at, sid))
        column = {sid: i for i, sid in enumerate(order)}
        coords = np.concatenate([p[0] for p in parts]) if parts else np.zeros((0, len(node["shape"])), np.int64)
        which = (np.concatenate([np.array([column.get(sid, -1) for sid in p[1]], np.int64)[p[2]] for p in parts])
                 if parts else np.zeros(0, np.int64))
        keep = which >= 0
        return {"path": node["path"], "node_id": node["id"], "num_chunks": node["num_chunks"],
                "commits": [self._snapshot_dict(sid, found[sid]) for sid in order],
                "coords": coords[keep], "commit": which[keep]}

    def _decode_history(self, batch: list[bytes], at: int, ndim: int, commits: dict[bytes, str | None],
                        found: dict[str, SnapshotValue], depths: dict[str, int]) -> tuple:
        """Coordinates of a batch of ``H`` records of one node, the snapshot ids their key tails name
        (None: not in the history), and each record's index into those."""
        import numpy as np

        lengths = np.fromiter(map(len, batch), np.int64, len(batch))
        ends = np.cumsum(lengths)
        starts = ends - lengths
        joined = b"".join(batch) + bytes(8)  # 8 more: a word may be read from any byte below the end
        buf = np.frombuffer(joined, np.uint8)[:-8]
        opens = buf[np.minimum(starts + at, len(buf) - 1)] == keys.TUPLE
        coords, pos = keys.decode_rows(buf, starts + at + 1, ends, ndim)
        closes = buf[np.minimum(pos, len(buf) - 1)] == keys.END
        bad = ~(opens & closes & (pos < ends)) | (coords[:, 0] < 0 if ndim else False)
        if bad.any():
            rec = batch[int(np.argmax(bad))]
            key = schema.split(rec)[1]  # names a malformed record in its own words, or:
            raise ZSCorrupt(f"{self.name}: chunk history record {key!r} does not hold {ndim} coordinates of "
                            f"the array")
        # Records of one commit end alike (flushed_at, snapshot id, value): one distinct tail per commit,
        # found by a hash of its bytes read as 64-bit words, each record's words then compared with those
        # of the first record of its hash.
        tail_at = pos + 1
        size = ends - tail_at
        words = np.ndarray((len(joined) - 7,), "<u8", joined, 0, (1,))  # the word at every byte offset
        tail_words = np.empty((len(batch), -(-int(size.max()) // 8) + 1), np.uint64)
        tail_words[:, 0] = size
        for k in range(1, tail_words.shape[1]):
            left = np.clip(size - 8 * (k - 1), 0, 8).astype(np.uint64)
            mask = np.where(left == 8, np.uint64(0xFFFFFFFFFFFFFFFF), (np.uint64(1) << (left * np.uint64(8))) - 1)
            tail_words[:, k] = words[np.minimum(tail_at + 8 * (k - 1), len(words) - 1)] & mask
        digest = np.zeros(len(batch), np.uint64)
        for column in tail_words.T:
            digest = (digest ^ column) * np.uint64(0x100000001B3)
        _, first, index = np.unique(digest, return_index=True, return_inverse=True)
        index = index.reshape(-1)
        tails = [batch[i][p:] for i, p in zip(first.tolist(), (tail_at - starts)[first].tolist())]
        for i in np.flatnonzero(~(tail_words == tail_words[first[index]]).all(axis=1)).tolist():
            tail = batch[i][int(tail_at[i] - starts[i]):]  # two tails of one hash: rare, one by one
            if tail not in tails:
                tails.append(tail)
                first = np.append(first, i)
            index[i] = tails.index(tail)
        sids = []
        for tail, i in zip(tails, first.tolist()):
            if tail not in commits:
                key = schema.split(batch[i])[1]
                sid = key[3] if len(key) == 4 and isinstance(key[3], str) else None
                commits[tail] = sid if sid in depths else None
                if commits[tail] is not None and sid not in found:
                    found[sid] = self._snapshot_value(sid)
            sids.append(commits[tail])
        return coords, sids, index

    def _paths(self, snapshot_id: str) -> dict[str, str]:
        return {NodeValue.decode(v).node_id: schema.path_of(k[1]) for k, v in self._records(schema.NODE, (snapshot_id,))}
