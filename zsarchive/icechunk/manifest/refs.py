"""One array's chunk refs as columns, the form manifests are decoded to and encoded from.

:class:`RefBatch` is what the decoder gives (Python values per ref, built lazily into
:class:`~zsarchive.icechunk.model.ChunkRef` tuples); :class:`RefTable` is the same refs as numbers
only (each text once), what the encoder lays out without a Python object per ref.
"""

from __future__ import annotations

import itertools
from typing import Iterable, Iterator, NamedTuple

import numpy as np

from zsarchive.icechunk.model import ChunkRef, RefKind

KINDS = (RefKind.INLINE, RefKind.NATIVE, RefKind.VIRTUAL)
"""Kind codes: the index of each kind in this tuple."""
INLINE, NATIVE, VIRTUAL = range(3)
_new_ref = tuple.__new__  # builds the NamedTuple without its keyword handling: ~2x faster


class RefBatch(NamedTuple):
    """Consecutive refs of one array as columns (one entry per ref; None where a field does not apply)."""

    coords: np.ndarray
    """(refs, ndim) uint32 chunk coordinates, strictly ascending."""
    kind: list[RefKind]
    inline: list[bytes | None]
    chunk_id: list[str | None]
    location: list[str | None]
    offset: np.ndarray
    """uint64; 0 for inline refs."""
    length: np.ndarray
    checksum_etag: list[str | None]
    checksum_last_modified: list[int | None]

    def refs(self) -> Iterator[ChunkRef]:
        """The batch as ChunkRef tuples, built as they are consumed."""
        # Lazily, from columns of ints: refs a caller drops die young, so the cyclic GC stays idle.
        n = len(self.kind)
        index = zip(*self.coords.T.tolist()) if self.coords.shape[1] else itertools.repeat((), n)
        return map(
            _new_ref,
            itertools.repeat(ChunkRef),
            zip(
                index,
                self.kind,
                self.inline,
                self.chunk_id,
                self.location,
                self.offset.tolist(),
                self.length.tolist(),
                self.checksum_etag,
                self.checksum_last_modified,
            ),
        )

    def table(self) -> RefTable:
        """The same refs as numbers (:class:`RefTable`)."""
        n = len(self.kind)
        codes = {kind: code for code, kind in enumerate(KINDS)}
        uniform = n and self.kind.count(self.kind[0]) == n  # counted in C: identity compares first
        kind = (
            np.full(n, codes[self.kind[0]], np.uint8)
            if uniform
            else np.fromiter(map(codes.__getitem__, self.kind), np.uint8, n)
        )
        named = (
            self.location
            if uniform and self.kind[0] is RefKind.VIRTUAL
            else self.chunk_id
            if uniform and self.kind[0] is RefKind.NATIVE
            else [c if c is not None else loc for c, loc in zip(self.chunk_id, self.location)]
        )
        text, texts = numbered(named)
        etag, etags = numbered(self.checksum_etag)
        inline, blobs = numbered(self.inline)
        stamps = self.checksum_last_modified
        modified = (
            np.zeros(n, np.uint32) if stamps.count(None) == n else np.fromiter((m or 0 for m in stamps), np.uint32, n)
        )
        return RefTable(
            np.asarray(self.coords, np.uint32).reshape(n, -1),
            kind,
            text,
            texts,
            np.asarray(self.offset, np.uint64),
            np.asarray(self.length, np.uint64),
            etag,
            etags,
            modified,
            inline,
            blobs,
        )


class RefTable(NamedTuple):
    """Consecutive refs of one array as numbers: each text (location, chunk id, etag) and inline value
    once, and each ref's index into them (-1: none)."""

    coords: np.ndarray
    """(refs, ndim) uint32 chunk coordinates, strictly ascending."""
    kind: np.ndarray
    """uint8 kind codes (:data:`KINDS`)."""
    text: np.ndarray
    """int64 index into ``texts`` of a native ref's chunk id or a virtual ref's location."""
    texts: list[str]
    offset: np.ndarray
    """uint64; 0 for inline refs."""
    length: np.ndarray
    etag: np.ndarray
    """int64 index into ``etags`` of a virtual ref's checksum etag."""
    etags: list[str]
    modified: np.ndarray
    """uint32 checksum last-modified (seconds; 0: none)."""
    inline: np.ndarray
    """int64 index into ``blobs`` of an inline ref's bytes."""
    blobs: list[bytes]

    @classmethod
    def of(cls, refs: Iterable[ChunkRef]) -> RefTable:
        """Refs (in the order given) as numbers."""
        refs = list(refs)
        ndim = len(refs[0].index) if refs else 0
        coords = np.array([r.index for r in refs], np.uint32).reshape(len(refs), ndim)
        return RefBatch(
            coords,
            [r.kind for r in refs],
            [r.inline for r in refs],
            [r.chunk_id for r in refs],
            [r.location for r in refs],
            np.array([r.offset or 0 for r in refs], np.uint64),
            np.array([r.length or 0 for r in refs], np.uint64),
            [r.checksum_etag for r in refs],
            [r.checksum_last_modified for r in refs],
        ).table()


def numbered(values: list) -> tuple[np.ndarray, list]:
    """Each entry's index into the distinct values other than None (-1: None), first seen first."""
    if values.count(None) == len(values):
        return np.full(len(values), -1, np.int64), []
    distinct: dict = {}
    lookup = {v: -1 if v is None else distinct.setdefault(v, len(distinct)) for v in dict.fromkeys(values)}
    return np.fromiter(map(lookup.__getitem__, values), np.int64, len(values)), list(distinct)
