"""The JSON answers behind ``zs serve``: one function per page request, over an open :class:`RepoArchive`.

Every answer is plain JSON of the archive's own queries (the same fields ``zs ... --json`` prints), and
every one is bounded: the heatmap of an array's chunk changes is aggregated server-side into at most
``MAX_BINS`` chunk bins by ``MAX_COLUMNS`` commit columns, whatever the array's size.
"""

from __future__ import annotations

import collections
import math
import threading
from typing import Any, Callable

from zsarchive.archive import RepoArchive
from zsarchive.errors import ZSError

MAX_BINS = 512
"""Most chunk bins of a heatmap."""
MAX_COLUMNS = 256
"""Most commit columns of a heatmap (more commits share a column)."""
CELL_CHUNKS = 100
"""Most chunks a heatmap cell lists."""
_CACHED_ARRAYS = 4
"""Arrays whose chunk changes are kept between requests (a cell's list re-reads none)."""


class BadRequest(ZSError):
    """A request missing a parameter or giving one of the wrong form."""


class ArchiveAPI:
    """Answers for the page; queries run one at a time (the reader's caches are shared)."""

    def __init__(self, archive: RepoArchive):
        self.archive = archive
        self._lock = threading.Lock()
        self._changes: collections.OrderedDict[tuple[str, str], dict] = collections.OrderedDict()
        self.routes: dict[str, Callable[[dict[str, str]], Any]] = {
            "summary": self.summary,
            "graph": self.graph,
            "log": self.log,
            "show": self.show,
            "ls": self.ls,
            "heatmap": self.heatmap,
            "cell": self.cell,
            "chunk-log": self.chunk_log,
        }

    def answer(self, name: str, params: dict[str, str]) -> Any:
        """The answer to ``/api/NAME?params``; ZSError (BadRequest, NotFound, ZSCorrupt) if there is none."""
        route = self.routes.get(name)
        if route is None:
            raise BadRequest(f"no such request: {name!r}")
        with self._lock:
            return route(params)

    def summary(self, params: dict[str, str]) -> dict:
        """The archive's name, header and refs."""
        return {"name": self.archive.name, "header": self.archive.header(), "refs": self.archive.refs()}

    def graph(self, params: dict[str, str]) -> list[dict]:
        """``zs log --graph --all``: every branch and tag's history, one line per snapshot."""
        return self.archive.graph(all_refs=True)

    def log(self, params: dict[str, str]) -> list[dict]:
        """``zs log [REF] [--since] [--until]``."""
        return self.archive.log(
            params.get("ref") or None, since=params.get("since") or None, until=params.get("until") or None
        )

    def show(self, params: dict[str, str]) -> dict:
        """``zs show REF``."""
        return self.archive.show(_required(params, "ref"))

    def ls(self, params: dict[str, str]) -> dict:
        """``zs ls REF --json`` with each node's attributes from its zarr.json."""
        ref = _required(params, "ref")
        nodes = []
        for node in self.archive.node_infos(ref):
            row: dict[str, object] = {"path": node.path, "node_type": node.node_type, "id": node.id}
            if node.is_array:
                row.update(
                    shape=node.shape,
                    num_chunks=node.num_chunks,
                    dimension_names=node.dimension_names,
                    dtype=node.dtype,
                    chunk_shape=node.chunk_shape,
                )
            meta = node.zarr_json
            row["attributes"] = meta.get("attributes", {}) if isinstance(meta, dict) else {}
            nodes.append(row)
        return {"snapshot_id": self.archive.resolve(ref), "nodes": nodes}

    def _chunk_changes(self, ref: str, path: str) -> dict:
        key = (self.archive.resolve(ref), path)
        changes = self._changes.pop(key, None) or self.archive.chunk_changes(ref, path)
        self._changes[key] = changes
        while len(self._changes) > _CACHED_ARRAYS:
            self._changes.popitem(last=False)
        return changes

    def _cells(self, params: dict[str, str]) -> tuple[dict, int, list[int], Any, Any]:
        """The chunk changes of the array ``path`` at ``ref``, chunks in the grid, first chunk of each bin,
        and each change's bin (-1 beyond the grid) and column (commits share columns beyond MAX_COLUMNS)."""
        changes = self._chunk_changes(_required(params, "ref"), _required(params, "path"))
        total, starts, bin_of = _chunk_bins(changes, _int(params, "bins", MAX_BINS, 1, MAX_BINS))
        commits = len(changes["commits"])
        return changes, total, starts, bin_of, changes["commit"] * min(commits, MAX_COLUMNS) // max(commits, 1)

    def heatmap(self, params: dict[str, str]) -> dict:
        """Chunk index (C order, in bins) by commit (oldest first, in columns): how many chunks of each bin
        each commit changed, for the array PATH as REF has it."""
        import numpy as np

        changes, total, starts, bin_of, column = self._cells(params)
        bins, commits = len(starts), changes["commits"]
        ncols = min(len(commits), MAX_COLUMNS)
        inside = bin_of >= 0
        counts = np.bincount(column[inside] * bins + bin_of[inside], minlength=ncols * bins).reshape(ncols, bins)
        groups: list[list[dict]] = [[] for _ in range(ncols)]
        for i, commit in enumerate(commits):
            groups[i * ncols // len(commits)].append(commit)
        columns = [{"first": g[0], "last": g[-1], "commits": len(g)} for g in groups]
        return {
            "path": changes["path"],
            "node_id": changes["node_id"],
            "num_chunks": changes["num_chunks"],
            "total_chunks": total,
            "bin_starts": starts,
            "columns": columns,
            "counts": counts.tolist(),
            "changes": int(len(changes["commit"])),
            "outside": int((~inside).sum()),
        }

    def cell(self, params: dict[str, str]) -> dict:
        """The chunks (at most ``CELL_CHUNKS``, in order) of heatmap bin BIN that column COLUMN's commits
        changed."""
        import numpy as np

        changes, _, starts, bin_of, column = self._cells(params)
        ncols = min(len(changes["commits"]), MAX_COLUMNS)
        chosen = (bin_of == _int(params, "bin", None, 0, len(starts) - 1)) & (
            column == _int(params, "column", None, 0, max(ncols - 1, 0))
        )
        coords = changes["coords"][chosen]  # in key order: C order, a chunk's changes next to each other
        coords = coords[np.concatenate([[True], np.any(coords[1:] != coords[:-1], axis=1)])] if len(coords) else coords
        return {
            "path": changes["path"],
            "coords": coords[:CELL_CHUNKS].tolist(),
            "more": max(len(coords) - CELL_CHUNKS, 0),
        }

    def chunk_log(self, params: dict[str, str]) -> list[dict]:
        """``zs chunk-log REF PATH COORDS``."""
        text = params.get("coords", "")
        try:
            coords = tuple(int(c) for c in text.split(",")) if text.strip() else ()
        except ValueError:
            raise BadRequest(f"coords must be integers separated by commas, not {text!r}") from None
        return self.archive.chunk_log(_required(params, "ref"), _required(params, "path"), coords)


def _chunk_bins(changes: dict, most: int) -> tuple[int, list[int], Any]:
    """(chunks in the array's grid, the first C-order chunk index of each bin, each change's bin or -1
    outside the grid): bin b holds chunk indexes ``[floor(b * total / bins), floor((b + 1) * total / bins))``."""
    import numpy as np

    grid = changes["num_chunks"]
    total = math.prod(grid)
    bins = max(1, min(most, total))
    coords = changes["coords"]
    inside = np.all(coords < np.array(grid, np.int64), axis=1)  # a chunk beyond a shrunk grid: none
    linear = np.zeros(len(coords), np.float64)  # exact below 2**53 chunks; a bin is what matters beyond
    for d, n in enumerate(grid):
        linear = linear * n + coords[:, d]
    starts = np.floor(np.arange(bins + 1) * (total / bins))
    bin_of = np.searchsorted(starts, linear, side="right") - 1
    return total, starts[:-1].astype(np.int64).tolist(), np.where(inside, np.clip(bin_of, 0, bins - 1), -1)


def _required(params: dict[str, str], name: str) -> str:
    value = params.get(name)
    if not value:
        raise BadRequest(f"missing parameter {name!r}")
    return value


def _int(params: dict[str, str], name: str, default: int | None, low: int, high: int) -> int:
    text = params.get(name)
    if text is None and default is not None:
        return default
    try:
        value = int(text or "")
    except ValueError:
        raise BadRequest(f"parameter {name!r} must be an integer, not {text!r}") from None
    if not low <= value <= high:
        raise BadRequest(f"parameter {name!r} must be in [{low}, {high}], not {value}")
    return value
