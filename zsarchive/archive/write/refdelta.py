"""What changed in one array's chunk refs from a snapshot's parent to the snapshot: two sorted ref
streams merged with numpy, a window at a time, so memory holds a few decoded batches however many
refs the manifests hold. An array in one manifest before and after is compared as numbers, each
manifest read in a thread of its own, and only the refs that changed are decoded.

An array's refs in a snapshot are the refs each of its manifests holds for it inside that
manifest's extents (as icechunk reads them), merged in coordinate order; where extents overlap the
first manifest listed wins, as a lookup takes the first manifest whose extents contain the chunk.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Iterable, Iterator, NamedTuple, Sequence

import numpy as np

from zsarchive.errors import ZSCorrupt
from zsarchive.icechunk import Repository
from zsarchive.icechunk.manifest.decode import ManifestBuffer, RefColumns, RefIdentities
from zsarchive.icechunk.manifest.refs import RefBatch

Manifests = Sequence[tuple[str, Sequence[Sequence[int]]]]
"""(manifest id, extents) of an array in one snapshot: extents a (from, to) pair per dimension."""

_COLUMNS = ("location", "chunk_id", "inline", "checksum_etag", "checksum_last_modified")
"""The RefBatch columns that are lists (compared as Python objects); offset and length are arrays. The
kind is not compared: a ref's kind is which of location, chunk_id and inline it has (not None)."""


def coord_keys(coords: np.ndarray) -> np.ndarray:
    """One fixed-width byte string per row of chunk coordinates whose bytewise order is the
    coordinates' order (big-endian uint32 each)."""
    if coords.shape[1] == 0:  # a 0-d array: its one chunk has coordinates ()
        return np.zeros(len(coords), "S1")
    return np.ascontiguousarray(coords.astype(">u4")).view(f"S{4 * coords.shape[1]}").ravel()


def take(batch: RefBatch, rows: np.ndarray) -> RefBatch:
    """The refs ``rows`` (indices, in that order) of ``batch``."""
    picked = rows.tolist()
    return RefBatch(
        batch.coords[rows],
        *([column[j] for j in picked] for column in batch[1:5]),
        batch.offset[rows],
        batch.length[rows],
        *([column[j] for j in picked] for column in batch[7:]),
    )


def concat(batches: Sequence[RefBatch]) -> RefBatch:
    """The refs of ``batches`` one after another."""
    if len(batches) == 1:
        return batches[0]
    lists = [sum((list(b[i]) for b in batches), []) for i in range(1, 5)]
    tail = [sum((list(b[i]) for b in batches), []) for i in range(7, 9)]
    return RefBatch(
        np.concatenate([b.coords for b in batches]),
        *lists,
        np.concatenate([b.offset for b in batches]),
        np.concatenate([b.length for b in batches]),
        *tail,
    )


def _inside(
    batches: Iterable[RefBatch], extents: Sequence[Sequence[int]], where: str, pick: Callable = take
) -> Iterator[RefBatch]:
    """The refs of ``batches`` (or of other batches with ``coords``, taken apart with ``pick``) inside ``extents``."""
    lows = np.array([lo for lo, _ in extents], np.int64)
    highs = np.array([hi for _, hi in extents], np.int64)
    for batch in batches:
        if batch.coords.shape[1] != len(extents):
            raise ZSCorrupt(
                f"{where}: ref {batch.coords[0].tolist()} has {batch.coords.shape[1]} coordinates, "
                f"but the manifest ref extents have {len(extents)} dimensions"
            )
        if not len(batch.coords) or all(
            lo <= int(column.min()) and int(column.max()) < hi
            for column, lo, hi in zip(batch.coords.T, lows.tolist(), highs.tolist())
        ):
            yield batch  # the usual batch: all inside (reductions by column, not a mask)
            continue
        keep = ((batch.coords >= lows) & (batch.coords < highs)).all(axis=1)
        if keep.any():
            yield pick(batch, np.flatnonzero(keep))


class _Cursor:
    """A stream of ref batches (or of other batches with ``coords``, taken apart with ``pick``) with the
    keys of its current batch."""

    def __init__(self, batches: Iterable[RefBatch], pick: Callable = take):
        self._batches = iter(batches)
        self._take = pick
        self.batch: RefBatch | None = None
        self.keys = np.zeros(0, "S1")
        self._next()

    def _next(self) -> None:
        for batch in self._batches:
            if len(batch.coords):
                self.batch, self.keys = batch, coord_keys(batch.coords)
                return
        self.batch = None

    def upto(self, key: bytes) -> tuple[RefBatch | None, np.ndarray]:
        """The refs (and their keys) with keys <= ``key``, taken off the stream."""
        if self.batch is None:
            return None, self.keys[:0]
        n = int(np.searchsorted(self.keys, key, side="right"))
        if n == len(self.keys):
            out = self.batch, self.keys
            self._next()
            return out
        out = self._take(self.batch, np.arange(n)), self.keys[:n]
        self.batch, self.keys = self._take(self.batch, np.arange(n, len(self.keys))), self.keys[n:]
        return out


def _windows(
    streams: Sequence[Iterable[RefBatch]], pick: Callable = take
) -> Iterator[list[tuple[RefBatch | None, np.ndarray]]]:
    """Aligned windows of several sorted streams: each window holds, per stream, its refs up to the
    same key; every window ends one stream's current batch, so the streams advance together."""
    cursors = [_Cursor(s, pick) for s in streams]
    while True:
        live = [c.keys[-1] for c in cursors if c.batch is not None]
        if not live:
            return
        cut = min(live)
        yield [c.upto(cut) for c in cursors]


def array_refs(
    repo: Repository, node_id: str, manifests: Manifests, where: str, first: int = 0, stop: int | None = None
) -> Iterator[RefBatch]:
    """The refs of one array in one snapshot, in coordinate order, a batch at a time (only refs
    ``first`` to ``stop`` of its manifest, when it has one)."""
    if len(manifests) != 1:
        first, stop = 0, None
    streams = [
        _inside(
            repo.manifest(mid, where).source.ref_batches(node_id, first, stop),
            extents,
            f"manifest {mid} (used by {where})",
        )
        for mid, extents in manifests
    ]
    if len(streams) == 1:
        yield from streams[0]
        return
    for window in _windows(streams):
        parts = [(batch, keys) for batch, keys in window if batch is not None]
        keys = np.concatenate([k for _, k in parts])
        order = np.argsort(keys, kind="stable")
        keys = keys[order]
        first = np.ones(len(keys), bool)  # a chunk in two manifests: the first manifest's ref
        first[1:] = keys[1:] != keys[:-1]
        yield take(concat([b for b, _ in parts]), order[first])


def parent_range(
    repo: Repository, node_id: str, manifests: Manifests, base: Manifests, where: str, first: int, stop: int | None
) -> tuple[int, int | None]:
    """Where refs ``first`` to ``stop`` of the snapshot's one manifest fall in the parent's one manifest
    (``base``): the range of its refs whose coordinates lie from ref ``first``'s up to ref ``stop``'s, so
    that the ranges of consecutive tasks cut both streams at the same coordinates (a binary search, a
    few refs decoded; ranges past an end are empty)."""
    new = repo.manifest(manifests[0][0], where).source
    old = repo.manifest(base[0][0], where).source
    total = old.arrays.get(node_id, (0, 0))[1]

    def bound(at: int | None) -> int:
        """The first parent ref not before the snapshot's ref ``at`` (every one when there is none)."""
        if at is None or at >= new.arrays.get(node_id, (0, 0))[1]:
            return total
        key = coord_keys(next(new.ref_batches(node_id, at, at + 1)).coords)[0]
        lo, hi = 0, total
        while lo < hi:
            mid = (lo + hi) // 2
            if coord_keys(next(old.ref_batches(node_id, mid, mid + 1)).coords)[0] < key:
                lo = mid + 1
            else:
                hi = mid
        return lo

    start = 0 if first == 0 else bound(first)
    # a corrupt (unsorted) parent manifest may make the search go astray: the tasks' ranges still cover
    # every ref, each checked against the one before it, so decoding them finds the disorder
    end = bound(stop)
    return start, (None if stop is None else max(start, end))


def _same_refs(a: RefBatch, rows_a: np.ndarray, b: RefBatch, rows_b: np.ndarray) -> np.ndarray:
    """Whether ref ``rows_a[i]`` of ``a`` equals ref ``rows_b[i]`` of ``b``, for each i."""
    same = (a.offset[rows_a] == b.offset[rows_b]) & (a.length[rows_a] == b.length[rows_b])
    for name in _COLUMNS:
        values_a, values_b = getattr(a, name), getattr(b, name)
        if values_a.count(None) == len(values_a) and values_b.count(None) == len(values_b):
            continue  # a field neither side's refs have (the etag of most virtual refs, say)
        left, right = np.empty(len(values_a), object), np.empty(len(values_b), object)
        left[:], right[:] = values_a, values_b
        rows = np.flatnonzero(same)  # only refs still alike are compared further
        same[rows] = left[rows_a[rows]] == right[rows_b[rows]]
    return same


def ref_changes(new: Iterable[RefBatch], old: Iterable[RefBatch]) -> Iterator[tuple[RefBatch | None, np.ndarray]]:
    """What turns the sorted ref stream ``old`` into ``new``, a window at a time: (the refs of ``new``
    that ``old`` lacks or holds differently, the coordinates (n, ndim) of the refs only ``old`` has)."""
    for (n, kn), (o, ko) in _windows([new, old]):
        if o is None:
            yield n, np.zeros((0, 0), np.uint32)
            continue
        if n is None:
            yield None, o.coords
            continue
        _common, in_new, in_old = np.intersect1d(kn, ko, assume_unique=True, return_indices=True)
        changed, gone = _outcome(len(kn), len(ko), in_new, in_old, _same_refs(n, in_new, o, in_old))
        yield (None if changed is None else take(n, changed)), o.coords[gone]


def _outcome(
    new: int, old: int, in_new: np.ndarray, in_old: np.ndarray, same: np.ndarray
) -> tuple[np.ndarray | None, np.ndarray]:
    """Of a window's ``new`` and ``old`` refs, where ``in_new[i]`` and ``in_old[i]`` are one chunk, alike
    where ``same[i]``: (the new refs that changed or are new, None for none; which old refs are gone)."""
    keep = np.ones(new, bool)
    keep[in_new[same]] = False
    gone = np.ones(old, bool)
    gone[in_old] = False
    return (np.flatnonzero(keep) if keep.any() else None), gone


def array_changes(
    repo: Repository,
    node_id: str,
    manifests: Manifests,
    base: Manifests,
    where: str,
    first: int = 0,
    stop: int | None = None,
) -> Iterator[tuple[RefBatch | None, np.ndarray]]:
    """What a snapshot changes in one array's refs (refs ``first`` to ``stop`` of its one manifest when
    ``stop`` is given), as :func:`ref_changes` yields it; ``base``: the array's manifests in the parent
    snapshot, () where its timeline starts. An array in one manifest in both is compared without
    decoding the refs both hold alike (:func:`column_changes`)."""
    parent = (0, None)
    if base and not (first == 0 and stop is None):
        parent = parent_range(repo, node_id, manifests, base, where, first, stop)
    if len(manifests) == 1 and len(base) == 1:
        yield from column_changes(repo, node_id, manifests[0], base[0], where, (first, stop), parent)
        return
    new = array_refs(repo, node_id, manifests, where, first, stop)
    old = array_refs(repo, node_id, base, where, *parent) if base else iter(())
    yield from ref_changes(new, old)


class _Side(NamedTuple):
    """Consecutive refs of one manifest located (``columns``) and read as numbers (``ids``)."""

    coords: np.ndarray
    columns: RefColumns
    ids: RefIdentities

    def take(self, rows: np.ndarray) -> _Side:
        """The refs ``rows`` (indices, in that order)."""
        return _Side(self.coords[rows], self.columns.take(rows), self.ids.take(rows))


def _sides(source: ManifestBuffer, node_id: str, first: int, stop: int | None) -> Iterator[_Side]:
    for columns, ids in source.identified_columns(node_id, first, stop):
        yield _Side(columns.coords, columns, ids)


def _ahead(items: Iterator[_Side], pool: ThreadPoolExecutor) -> Iterator[_Side]:
    """The items of ``items``, the first started now and each next one made in ``pool`` while the caller
    uses the one before (numpy and zstd let go of the GIL: two manifests are read at once)."""
    end = object()
    future = pool.submit(next, items, end)

    def results() -> Iterator[_Side]:
        nonlocal future
        while (item := future.result()) is not end:
            future = pool.submit(next, items, end)
            yield item

    return results()


def column_changes(
    repo: Repository,
    node_id: str,
    manifest: tuple,
    base: tuple,
    where: str,
    rows: tuple[int, int | None],
    parent: tuple[int, int | None],
) -> Iterator[tuple[RefBatch | None, np.ndarray]]:
    """:func:`ref_changes` of one array in one manifest (``manifest``, refs ``rows``) and in one parent
    manifest (``base``, refs ``parent``), each a (manifest id, extents) pair: the refs are compared as
    numbers (:meth:`ManifestBuffer.ref_identities`, each manifest's in a thread of its own), and only
    those that changed are decoded."""
    with ThreadPoolExecutor(2) as pool:
        loading = pool.submit(repo.manifest, base[0], where)  # the two manifests decompress at once
        sources: list[ManifestBuffer] = [repo.manifest(manifest[0], where).source, loading.result().source]
        streams = [
            _ahead(
                _inside(_sides(source, node_id, lo, hi), extents, f"manifest {mid} (used by {where})", _Side.take), pool
            )
            for source, (mid, extents), (lo, hi) in zip(sources, (manifest, base), (rows, parent))
        ]
        new_source, _ = sources
        for (n, kn), (o, ko) in _windows(streams, _Side.take):
            if o is None:
                yield new_source.refs_of(node_id, n.columns), np.zeros((0, 0), np.uint32)
                continue
            if n is None:
                yield None, o.coords
                continue
            if kn.dtype == ko.dtype and np.array_equal(kn.view(np.uint8), ko.view(np.uint8)):
                # the same chunks (a commit that rewrites refs), their keys compared as bytes (faster)
                in_new = in_old = np.arange(len(kn))
                both = n, o
            else:
                _common, in_new, in_old = np.intersect1d(kn, ko, assume_unique=True, return_indices=True)
                both = n.take(in_new), o.take(in_old)
            texts: dict = {}  # one numbering of texts for both sides of a window (and no more: memory stays bounded)
            changed, gone = _outcome(len(kn), len(ko), in_new, in_old, both[0].ids.same(both[1].ids, texts))
            yield (None if changed is None else new_source.refs_of(node_id, n.columns.take(changed))), o.coords[gone]
