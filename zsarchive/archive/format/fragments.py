"""Fragments (format 4): an archive that holds only what the archive it builds on lacks, read with
that base, and the base's own bases, as one archive (docs/archive-format.rst, "Fragments").

A fragment holds every record of a full export made at its time that its base's view lacks or holds
with another value, and a *tombstone* for each key of the base's view a full export no longer has: the
key, then record version 0 and no value. A chain's view is its records merged by key, the newest
fragment's record winning, tombstones removed. The ZS header metadata names the base (a path relative
to the fragment, and the SHA-256 data hash in the base's ZS header); the fragment's header record says
which families it holds and, for families keyed by snapshot or node id first, which ids, so that a
lookup reads only the fragments that may hold its key.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, Iterable, cast

from zsarchive.archive.format import tuples
from zsarchive.archive.format import schema
from zsarchive.errors import ZSCorrupt
from zsarchive.typedtuple import TypedTuple

MAX_CHAIN = 64
"""Most archives one chain holds, the full archive at its root included."""
FIRST_KEYED = frozenset(
    schema.FAMILY_NAMES[f]
    for f in (schema.CHUNK_REF, schema.CHUNK_HISTORY, schema.CHILDREN, schema.NODE, schema.SNAPSHOT, schema.TXLOG)
)
"""Families whose first key element (a node or snapshot id) a fragment's header lists."""
_FIRST_KEYED_TAGS = frozenset(t for t, name in schema.FAMILY_NAMES.items() if name in FIRST_KEYED)
FILTER_HASHES = 7
"""Bit positions each key sets in a fragment's chunk ref filter."""
FILTER_BITS_PER_KEY = 10
"""Filter bits per key: about 1% of lookups of keys a fragment lacks read it anyway."""
FILTER_MAX_KEYS = 1 << 18
"""A fragment with chunk refs under more (node, coords) keys than this has no filter."""


# -- tombstones ----------------------------------------------------------------------------------


def tombstone(key: bytes) -> bytes:
    """The tombstone of a record key: the key, record version 0, no value."""
    return key + b"\x00"


def is_tombstone(rec: bytes) -> bool:
    """Whether a record is a tombstone (record version 0, no value)."""
    end = tuples.key_end(rec)
    return len(rec) > end and rec[end] == 0


# -- chunk ref filters --------------------------------------------------------------------------


def chunk_prefix(rec: bytes) -> bytes:
    """A chunk ref record's key up to its coordinates: family, node id, coords."""
    return rec[: tuples.element_end(rec, tuples.element_end(rec, 1))]


@functools.cache
def _blake2b() -> Callable[..., Any]:
    """hashlib's blake2b, imported on first use: opening a lone archive never needs hashlib (slow to import)."""
    from hashlib import blake2b

    return blake2b


class ChunkFilter:
    """A Bloom filter over the (node id, coords) prefixes of a fragment's chunk ref keys: a lookup of
    a chunk whose prefix it lacks skips the fragment (the bits are those documented: blake2b)."""

    def __init__(self, bits: bytes):
        self.bits = bits
        self.size = 8 * len(bits)

    @staticmethod
    def _positions(prefix: bytes, size: int) -> list[int]:
        digest = _blake2b()(prefix, digest_size=16).digest()
        h1, h2 = int.from_bytes(digest[:8], "little"), int.from_bytes(digest[8:], "little") | 1
        return [(h1 + i * h2) % size for i in range(FILTER_HASHES)]

    @classmethod
    def build(cls, prefixes: list[bytes]) -> ChunkFilter:
        """The filter of a list of prefixes."""
        bits = bytearray(max(1, (len(prefixes) * FILTER_BITS_PER_KEY + 7) // 8))
        size = 8 * len(bits)
        for prefix in prefixes:
            for at in cls._positions(prefix, size):
                bits[at >> 3] |= 1 << (at & 7)
        return cls(bytes(bits))

    def may_hold(self, prefix: bytes) -> bool:
        """False only when no key of the fragment starts with ``prefix``."""
        return all(self.bits[at >> 3] & (1 << (at & 7)) for at in self._positions(prefix, self.size))


# -- what a fragment holds -----------------------------------------------------------------------


class Holding(TypedTuple):
    """Records of one family in a fragment: how many, how many of them tombstones, and the distinct
    first key elements where the family is first-keyed (else None)."""

    records: int
    tombstones: int
    firsts: frozenset[Any] | None


class FragmentInfo(TypedTuple):
    """What a fragment's header record says beyond a full archive's: the time range it covers (its
    base's export time, its own), the format version of a full export made with it (2, 3, 5, 6 or 7: what
    consolidation writes) and what it holds per family tag. (This and :class:`Holding` are typed tuples:
    a frozen dataclass costs every start of the command line ~6x as much to define.)"""

    covers: tuple[int, int]
    records_format: int
    holdings: dict[bytes, Holding]
    chunk_filter: ChunkFilter | None = None

    def encode(self) -> tuple[Any, ...]:
        """The sixth value element of the fragment's header record."""
        return (
            self.covers[0],
            self.covers[1],
            self.records_format,
            None if self.chunk_filter is None else self.chunk_filter.bits,
            tuple(
                (
                    schema.FAMILY_NAMES[tag],
                    h.records,
                    h.tombstones,
                    None if h.firsts is None else tuple(sorted(h.firsts)),
                )
                for tag, h in sorted(self.holdings.items())
            ),
        )

    @classmethod
    def decode(cls, element: object, where: str) -> FragmentInfo:
        """Read the element :meth:`encode` writes; ZSCorrupt naming ``where`` when it is malformed."""
        tags = {name: tag for tag, name in schema.FAMILY_NAMES.items()}
        try:
            start, stop, records_format, bits, families = cast(tuple[Any, ...], element)
            if not (bits is None or (isinstance(bits, bytes) and bits)):
                raise ValueError("chunk ref filter")
            if records_format not in (2, 3, 5, schema.FULL_FORMAT, schema.VIRTUAL_FORMAT):
                raise ValueError(f"format version {records_format!r} of the view")
            holdings = {}
            for name, records, dead, firsts in families:
                if (
                    name not in tags
                    or not all(isinstance(n, int) and n >= 0 for n in (records, dead))
                    or dead > records
                    or not (firsts is None or isinstance(firsts, tuple))
                ):
                    raise ValueError(f"family entry {name!r}")
                if (firsts is None) == (name in FIRST_KEYED):
                    raise ValueError(
                        f"family {name!r} lists first key elements where it should not, or not where it should"
                    )
                holdings[tags[name]] = Holding(records, dead, None if firsts is None else frozenset(firsts))
            if not (isinstance(start, int) and isinstance(stop, int)):
                raise ValueError("time range")
        except (TypeError, ValueError) as exc:
            raise ZSCorrupt(f"{where}: malformed fragment description in the header record ({exc})") from None
        return cls((start, stop), records_format, holdings, None if bits is None else ChunkFilter(bits))


class HoldingsTally:
    """Counts a fragment's records per family as they are written, with their first key elements."""

    def __init__(self, strict: bool = False) -> None:
        self.strict = strict  # check every record's version byte (validation), not only those ending in 0
        self.records: dict[bytes, int] = {}
        self.tombstones: dict[bytes, int] = {}
        self.firsts: dict[bytes, set[Any]] = {}
        self._last = b"\xff"  # the first-element prefix of the last first-keyed record seen
        self.chunk_prefixes: list[bytes] | None = []  # None past FILTER_MAX_KEYS

    def add(self, records: Iterable[bytes]) -> None:
        """Tally ``records``."""
        for rec in records:
            self._note(rec)

    def _note(self, rec: bytes) -> None:
        tag = bytes(rec[:1])  # bytes: a piece record may be a bytearray
        self.records[tag] = self.records.get(tag, 0) + 1
        if tag in _FIRST_KEYED_TAGS and not rec.startswith(self._last):
            end = tuples.element_end(rec, 1)
            self._last = bytes(rec[:end])
            self.firsts.setdefault(tag, set()).add(tuples.decode(self._last, 1)[0][0])
        if tag == schema.CHUNK_REF and self.chunk_prefixes is not None:
            prefix = chunk_prefix(rec)
            if not self.chunk_prefixes or self.chunk_prefixes[-1] != prefix:
                self.chunk_prefixes.append(prefix)
                if len(self.chunk_prefixes) > FILTER_MAX_KEYS:
                    self.chunk_prefixes = None
        if rec[-1] == 0 or self.strict:
            end = tuples.key_end(rec)
            if end < len(rec) and rec[end] == 0:
                if len(rec) != end + 1:
                    raise ZSCorrupt(f"tombstone {bytes(rec[:60])!r} holds bytes after its version byte")
                self.tombstones[tag] = self.tombstones.get(tag, 0) + 1

    def info(self, covers: tuple[int, int], records_format: int) -> FragmentInfo:
        """The description of what was tallied (the header record itself left out)."""
        holdings = {
            tag: Holding(
                n,
                self.tombstones.get(tag, 0),
                frozenset(self.firsts.get(tag, ())) if tag in _FIRST_KEYED_TAGS else None,
            )
            for tag, n in self.records.items()
            if tag != schema.HEADER
        }
        prefixes = self.chunk_prefixes
        return FragmentInfo(covers, records_format, holdings, ChunkFilter.build(prefixes) if prefixes else None)
