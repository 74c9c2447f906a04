"""Vectorised reads from a little-endian FlatBuffer: one numpy gather reads a field of many tables.

The hot vectors of Icechunk files (manifest refs, transaction-log chunk indices) hold millions of
small tables; reading them a batch at a time keeps the per-item cost in C. Callers check that every
position is inside the buffer before gathering from it; the helpers here check what they follow.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from zsarchive.icechunk.flatbuf import FlatBufferError

BYTE = np.arange(256, dtype=np.int64)
"""0, 1, 2, ...: byte offsets added to row start positions."""


def gather(b: np.ndarray, at: np.ndarray, dtype: str) -> np.ndarray:
    """The little-endian ``dtype`` value at each byte position in ``at`` of the uint8 array ``b``."""
    width = np.dtype(dtype).itemsize
    if not (at & (width - 1)).any():
        # FlatBuffers aligns every scalar to its size: one gather from a view of the whole buffer.
        return np.take(b[: len(b) - len(b) % width].view(dtype), at >> _SHIFTS[width])
    return b[at[:, None] + BYTE[:width]].view(dtype).reshape(-1)


_SHIFTS = {1: 0, 2: 1, 4: 2, 8: 3}
"""log2 of each scalar width: a shift divides positions faster than ``//``."""


def first(mask: np.ndarray) -> int | None:
    """Position of the first True in ``mask``, or None."""
    return int(mask.argmax()) if mask.any() else None


def distinct(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(position of the first occurrence of each distinct value, in order, index of every value in those) of a
    1-d integer array: a hash table (multiplicative hashing into twice as many slots, each slot keeping its
    first position) where values sharing a slot with another value are few, sorted apart."""
    n = len(values)
    if n < 1024:
        return _sorted_distinct(values)
    bits = (2 * n - 1).bit_length()
    slots = ((values.astype(np.uint64) * _GOLDEN) >> np.uint64(64 - bits)).astype(np.intp)
    table = np.full(1 << bits, n, np.intp)
    np.minimum.at(table, slots, np.arange(n))
    first_at = table[slots]  # the slot's first value: the same value's first occurrence, unless another shares it
    clash = np.flatnonzero(values[first_at] != values)
    if len(clash):  # values in such slots have every occurrence among them
        firsts, inverse = _sorted_distinct(values[clash])
        first_at[clash] = clash[firsts][inverse]
    firsts = np.flatnonzero(first_at == np.arange(n))
    index = np.empty(n, np.intp)
    index[firsts] = np.arange(len(firsts))
    return firsts, index[first_at]


_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
"""2^64 / the golden ratio, odd: multiplying by it spreads any keys over the high bits."""


def _sorted_distinct(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`distinct` by numpy's unique (a sort), the first occurrences in order, as the hash table's."""
    unique, inverse = np.unique(values, return_inverse=True)
    firsts = np.full(len(unique), len(values), np.int64)
    np.minimum.at(firsts, inverse, np.arange(len(values)))
    order = np.argsort(firsts)
    rank = np.empty_like(order)
    rank[order] = np.arange(len(order))
    return firsts[order], rank[inverse.reshape(-1)]


def offset_vector(buf: bytes, start: int, lo: int, hi: int) -> np.ndarray:
    """Positions of the tables that entries ``lo`` to ``hi`` of the uoffset vector at ``start`` point to
    (the vector itself must already be known to fit the buffer)."""
    n = hi - lo
    return (
        start
        + 4 * lo
        + 4 * np.arange(n, dtype=np.int64)
        + np.frombuffer(buf, "<u4", n, start + 4 * lo).astype(np.int64)
    )


def uint32_vectors(b: np.ndarray, vec: np.ndarray, where: Callable[[int], str], ndim: int | None = None) -> np.ndarray:
    """The ``[uint32]`` vectors whose length prefixes sit at ``vec``, as an (n, ndim) matrix.

    All must have one length (``ndim`` if given); ``where(j)`` names entry j in errors.
    """
    size, n = len(b), len(vec)
    if (j := first(vec + 4 > size)) is not None:
        raise FlatBufferError(f"{where(j)}: uint32 vector at {int(vec[j])} outside the buffer")
    lengths = gather(b, vec, "<u4")
    if (j := first(vec + 4 + 4 * lengths.astype(np.int64) > size)) is not None:
        raise FlatBufferError(
            f"{where(j)}: uint32 vector at {int(vec[j])} of length {int(lengths[j])} runs past the buffer end"
        )
    if ndim is None:
        ndim = int(lengths[0]) if n else 0
    if (j := first(lengths != ndim)) is not None:
        raise FlatBufferError(
            f"{where(j)}: uint32 vector at {int(vec[j])} has {int(lengths[j])} coordinates, "
            f"the entries before it {ndim}"
        )
    if n * 4 * (ndim + 1) > size:  # distinct vectors cannot overlap: these are bogus
        raise FlatBufferError(f"{where(0)}: {n} uint32 vectors of length {ndim} cannot fit the buffer")
    starts = vec + 4
    if not (starts & 3).any():
        words, first_word = b[: size - size % 4].view("<u4"), starts >> 2
        out = np.empty((n, ndim), np.uint32)
        for axis in range(ndim):  # a 1-d gather per axis: ~3x one 2-d gather
            out[:, axis] = np.take(words, first_word + axis)
        return out
    return b[starts[:, None] + np.arange(4 * ndim)].view("<u4").reshape(n, ndim)


def first_unsorted(rows: np.ndarray, previous: np.ndarray | None = None) -> int | None:
    """The first row of ``rows`` not strictly after the row before it (``previous`` for row 0), or None."""
    n, ndim = rows.shape
    if previous is not None and n and not tuple(previous.tolist()) < tuple(rows[0].tolist()):
        return 0
    if n < 2:
        return None
    if ndim == 0:
        return 1
    if ndim <= 2 and rows.dtype == np.uint32:
        # one 64-bit number per row whose order is the rows' order: a pass, not a search per row
        keys = rows[:, 0].astype(np.uint64)
        if ndim == 2:
            keys <<= np.uint64(32)
            keys |= rows[:, 1]
        j = first(keys[1:] <= keys[:-1])
        return None if j is None else j + 1
    a, c = rows[:-1], rows[1:]
    differ = a != c
    column = differ.argmax(axis=1)
    at = np.arange(n - 1)
    ok = differ[at, column] & (a[at, column] < c[at, column])
    j = first(~ok)
    return None if j is None else j + 1
