"""The snapshot tree drawn as text, git style: one line per snapshot, lanes of ``|`` between them.

Pure layout over ``(id, parent_id, flushed_at)`` rows (each history walked with a visited set, so
parents form no loop). A snapshot's parent is always below it; a lane (a column) runs from a
snapshot down to its parent, and where several children share a parent their lanes join it on a
line of ``/`` (and ``_`` across other lanes).
"""

from __future__ import annotations

import heapq
from typing import Iterable, Iterator

CELL = 2
"""Characters per lane."""


def topo_order(snapshots: Iterable[dict]) -> list[dict]:
    """Snapshots with every child before its parent, the newest ready one first (git's --topo-order
    on a tree). A parent outside ``snapshots`` counts as none."""
    rows = {s["id"]: s for s in snapshots}
    children = {sid: 0 for sid in rows}
    for s in rows.values():
        if s["parent_id"] in rows:
            children[s["parent_id"]] += 1
    # flushed_at is RFC 3339 text of one width and zone: text order is time order
    ready = [(_newest_first(s), sid) for sid, s in rows.items() if children[sid] == 0]
    heapq.heapify(ready)
    out = []
    while ready:
        _, sid = heapq.heappop(ready)
        out.append(rows[sid])
        parent = rows[sid]["parent_id"]
        if parent in rows:
            children[parent] -= 1
            if children[parent] == 0:
                heapq.heappush(ready, (_newest_first(rows[parent]), parent))
    return out


def _newest_first(snapshot: dict) -> tuple:
    return tuple(-ord(c) for c in snapshot["flushed_at"] or "")


def layout(ordered: list[dict]) -> Iterator[tuple[str, dict | None]]:
    """``(graph text, snapshot)`` per line, for snapshots in :func:`topo_order`; a line joining lanes
    has no snapshot (None). The graph text of a snapshot's line has ``*`` in the snapshot's lane,
    and its ``column`` is set in the snapshot's dict."""
    present = {s["id"] for s in ordered}
    lanes: list[str | None] = []  # the snapshot id each lane waits for
    for snapshot in ordered:
        sid = snapshot["id"]
        waiting = [i for i, want in enumerate(lanes) if want == sid]
        if len(waiting) > 1:
            yield _join(lanes, waiting), None
            for i in waiting[1:]:
                lanes[i] = None
        if waiting:
            column = waiting[0]
        else:  # a tip: the first free lane
            column = lanes.index(None) if None in lanes else len(lanes)
            if column == len(lanes):
                lanes.append(None)
        snapshot["column"] = column
        yield _line(lanes, column), snapshot
        parent = snapshot["parent_id"]
        lanes[column] = parent if parent in present else None
        while lanes and lanes[-1] is None:
            lanes.pop()


def _line(lanes: list[str | None], column: int) -> str:
    cells = ["*" if i == column else ("|" if want is not None else " ") for i, want in enumerate(lanes)]
    return " ".join(cells).rstrip()


def _join(lanes: list[str | None], waiting: list[int]) -> str:
    """The line where the lanes ``waiting[1:]`` bend into lane ``waiting[0]``."""
    chars = [" "] * (CELL * len(lanes))
    for i, want in enumerate(lanes):
        if want is not None and i not in waiting[1:]:
            chars[CELL * i] = "|"
    target = waiting[0]
    for i in waiting[1:]:
        for pos in range(CELL * target + 1, CELL * i - 1):
            if chars[pos] == " ":
                chars[pos] = "_"
        chars[CELL * i - 1] = "/"
    return "".join(chars).rstrip()
