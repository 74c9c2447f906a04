"""Where an archive keeps its chunk refs, by format version: the stored ref values of an array node's
chunks, one chunk or all in coordinate order (docs/archive-format.rst, family ``C``).

* format 1, :class:`ManifestRefs`: every manifest's refs, keyed ``(manifest_id, node_id, coords)``;
  a node's chunks are the refs of its manifests.
* format 2, :class:`RefTimeline`: each ref change once, keyed ``(node_id, coords, snapshot_id)``;
  a node's chunk at a snapshot is the change of the nearest snapshot in its history (back to the
  node's ``since`` snapshot) that changed it, unless that change removed it.
"""

from __future__ import annotations

import heapq
import itertools
from typing import Callable, Iterable, Iterator

from zsarchive.archive.format import schema
from zsarchive.archive.format.tuples import decode as decode_key
from zsarchive.archive.format.views import ChunkRefKey, ManifestRefKey, fits
from zsarchive.archive.read.invariants import duplicate
from zsarchive.archive.read.model import NodeInfo
from zsarchive.errors import ZSCorrupt
from zsarchive.zs.reader import ZS

Stored = Iterator[tuple[tuple[int, ...], tuple]]
"""(coords, stored ref value) pairs in coordinate order."""


class ManifestRefs:
    """Chunk refs of a format 1 archive: stored once per manifest."""

    def __init__(self, zs: ZS):
        self.zs = zs

    def ref(self, node: NodeInfo, coords: tuple[int, ...]) -> tuple | None:
        """The stored value of the chunk at ``coords``, or None."""
        for manifest in node.manifests:
            if all(lo <= c < hi for c, (lo, hi) in zip(coords, manifest.extents)):
                key = ManifestRefKey(manifest.manifest_id, node.id, coords).encode()
                found = [
                    v
                    for _, k, v in map(schema.split, self.zs.search(prefix=schema.key_prefix(schema.CHUNK_REF, key)))
                    if fits(ManifestRefKey, k)
                ]
                if len(found) > 1:
                    raise duplicate(schema.CHUNK_REF, key)
                if found:
                    return found[0]
        return None

    def refs(self, node: NodeInfo, start: tuple | None = None, stop: tuple | None = None) -> Stored:
        """Every chunk with ``start <= coords < stop`` (when given), in coordinate order."""
        streams = []
        for manifest in node.manifests:
            prefix = (manifest.manifest_id, node.id)
            first = None if start is None else schema.key_prefix(schema.CHUNK_REF, prefix + (start,))
            end = None if stop is None else schema.key_prefix(schema.CHUNK_REF, prefix + (stop,))
            records = self.zs.search(start=first, stop=end, prefix=schema.key_prefix(schema.CHUNK_REF, prefix))
            streams.append((ManifestRefKey.decode(k).coords, v) for _, k, v in map(schema.split, records))
        return streams[0] if len(streams) == 1 else heapq.merge(*streams, key=lambda item: item[0])

    def coords(self, node: NodeInfo) -> Iterator[tuple[int, ...]]:
        """The coordinates of every chunk, in order (only the key of each record is decoded)."""
        streams = []
        for manifest in node.manifests:
            prefix = schema.key_prefix(schema.CHUNK_REF, (manifest.manifest_id, node.id))
            streams.append(
                ManifestRefKey.decode(decode_key(rec, 1, what="chunk ref key")[0]).coords
                for rec in self.zs.search(prefix=prefix)
            )
        return streams[0] if len(streams) == 1 else heapq.merge(*streams)


class RefTimeline:
    """Chunk refs of a format 2 archive: each change stored once, resolved against a snapshot's history.

    ``depths(snapshot_id)`` gives every snapshot in the history of one (itself 0, its parent 1, ...).
    """

    def __init__(self, zs: ZS, depths: Callable[[str], dict[str, int]], name: str):
        self.zs = zs
        self.depths = depths
        self.name = name

    def _window(self, node: NodeInfo) -> tuple[dict[str, int], int]:
        """The history of the node's snapshot, and the depth of the node's ``since`` snapshot in it."""
        depths = self.depths(node.snapshot_id)
        limit = None if node.since is None else depths.get(node.since)
        if limit is None:
            raise ZSCorrupt(
                f"{self.name}: array {node.path!r} at snapshot {node.snapshot_id} starts its "
                f"chunk ref timeline at {node.since!r}, which is not in its history"
            )
        return depths, limit

    @staticmethod
    def _resolve(changes: Iterable[tuple[ChunkRefKey, tuple]], depths: dict[str, int], limit: int) -> tuple | None:
        """The value of the nearest change in the history (None if none, or if it removed the ref); ZSCorrupt
        for two records of one change (adjacent: a chunk's changes are in snapshot id order)."""
        best, found, last = limit + 1, None, None
        for key, value in changes:
            if key.snapshot_id == last:
                raise duplicate(schema.CHUNK_REF, tuple(key))
            last = key.snapshot_id
            depth = depths.get(last)
            if depth is not None and depth < best:
                best, found = depth, value
        return None if found is None or found[:1] == (schema.REMOVED,) else found

    def ref(self, node: NodeInfo, coords: tuple[int, ...]) -> tuple | None:
        """The stored value of the chunk at ``coords``, or None."""
        depths, limit = self._window(node)
        prefix = schema.key_prefix(schema.CHUNK_REF, (node.id, coords))
        changes = (
            (ChunkRefKey.decode(k), v)
            for _, k, v in map(schema.split, self.zs.search(prefix=prefix))
            if fits(ChunkRefKey, k)
        )
        return self._resolve(changes, depths, limit)

    def refs(self, node: NodeInfo, start: tuple | None = None, stop: tuple | None = None) -> Stored:
        """Every chunk with ``start <= coords < stop`` (when given), in coordinate order."""
        depths, limit = self._window(node)
        prefix = (node.id,)
        first = None if start is None else schema.key_prefix(schema.CHUNK_REF, prefix + (start,))
        end = None if stop is None else schema.key_prefix(schema.CHUNK_REF, prefix + (stop,))
        records = self.zs.search(start=first, stop=end, prefix=schema.key_prefix(schema.CHUNK_REF, prefix))
        # a chunk's changes are adjacent (key: coords, then snapshot id)
        changes = ((ChunkRefKey.decode(k), v) for _, k, v in map(schema.split, records))
        for coords, group in itertools.groupby(changes, key=lambda change: change[0].coords):
            value = self._resolve(group, depths, limit)
            if value is not None:
                yield coords, value

    def coords(self, node: NodeInfo) -> Iterator[tuple[int, ...]]:
        """The coordinates of every chunk, in order."""
        return (coords for coords, _ in self.refs(node))
