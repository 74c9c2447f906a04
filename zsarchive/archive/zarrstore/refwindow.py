"""Chunk refs of one array read a window at a time, for zarr's access pattern."""

from __future__ import annotations

from zsarchive.archive.read.model import ChunkInfo, NodeInfo
from zsarchive.archive.read.repoarchive import RepoArchive

_WINDOW_MIN, _WINDOW_MAX = 1, 1024
"""Bounds of the number of chunk refs one lookup reads ahead."""


class RefWindow:
    """The chunk refs of one array, read a window at a time.

    zarr asks for the chunks of a selection in coordinate order, the order the archive stores
    them in, so one scan along the last dimension answers the next gets too. The window doubles
    while reads continue where it ends and shrinks back to one ref when lookups jump around.
    """

    __slots__ = ("archive", "node", "window", "size")

    def __init__(self, archive: RepoArchive, node: NodeInfo) -> None:
        self.archive = archive
        self.node = node
        self.window: tuple | None = None  # (start, stop, refs, [hits]): every ref in [start, stop)
        self.size = _WINDOW_MIN

    def get(self, coords: tuple[int, ...]) -> ChunkInfo | None:
        """The chunk ref at ``coords``, or None if the array has none there."""
        window = self.window  # one read: concurrent lookups each see a whole window
        if window is not None:
            start, stop, refs, hits = window
            if start <= coords < stop:
                hits[0] += 1
                return refs.get(coords)
            if coords == stop:  # reading on where the window ended: read further ahead
                self.size = min(2 * self.size, _WINDOW_MAX)
            elif 2 * hits[0] < stop[-1] - start[-1]:  # most of the window went unused
                self.size = max(self.size // 2, _WINDOW_MIN)
        if not coords:
            return self.archive.array_chunk(self.node, coords)  # a 0-d array has one chunk
        # coordinates that share all but the last and whose last is below this: one short run
        stop = coords[:-1] + (coords[-1] + self.size,)
        refs = {c.coords: c for c in self.archive.array_chunks(self.node, coords, stop)}
        self.window = (coords, stop, refs, [0])
        return refs.get(coords)
