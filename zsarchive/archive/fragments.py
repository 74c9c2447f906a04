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

import bisect
import hashlib
import heapq
import os
import posixpath
import re
from dataclasses import dataclass
from typing import Iterable, Iterator
from urllib.parse import urlsplit, urlunsplit

from zsarchive.archive import keys
from zsarchive.archive import schema as S
from zsarchive.errors import ZSCorrupt, ZSError
from zsarchive.zs.reader import ZS

MAX_CHAIN = 64
"""Most archives one chain holds, the full archive at its root included."""
FIRST_KEYED = frozenset(S.FAMILY_NAMES[f] for f in (S.CHUNK_REF, S.CHUNK_HISTORY, S.CHILDREN, S.NODE,
                                                    S.SNAPSHOT, S.TXLOG))
"""Families whose first key element (a node or snapshot id) a fragment's header lists."""
_FIRST_KEYED_TAGS = frozenset(t for t, name in S.FAMILY_NAMES.items() if name in FIRST_KEYED)
FILTER_HASHES = 7
"""Bit positions each key sets in a fragment's chunk ref filter."""
FILTER_BITS_PER_KEY = 10
"""Filter bits per key: about 1% of lookups of keys a fragment lacks read it anyway."""
FILTER_MAX_KEYS = 1 << 18
"""A fragment with chunk refs under more (node, coords) keys than this has no filter."""
_CACHED = frozenset((S.REFS, S.REPO))
"""Small families a chain reads once and keeps: every fragment may hold some, and a query resolving a
branch would otherwise read each fragment."""
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
_MAX_BASE = 4096


# -- tombstones ----------------------------------------------------------------------------------

def tombstone(rec: bytes) -> bytes:
    """The tombstone of a record's key."""
    return rec[:keys.key_end(rec)] + b"\x00"


def is_tombstone(rec: bytes) -> bool:
    """Whether a record is a tombstone (record version 0, no value)."""
    end = keys.key_end(rec)
    return len(rec) > end and rec[end] == 0


def diff(new: Iterable[bytes], old: Iterable[bytes], replaced: dict[bytes, int] | None = None) -> Iterator[bytes]:
    """Records of ``new`` that ``old`` lacks or holds with another value, and a tombstone for each key
    only ``old`` has; both sorted. ``replaced`` counts, per family tag, keys both hold, differently."""
    new, old = iter(new), iter(old)
    a, b = next(new, None), next(old, None)
    while a is not None or b is not None:
        ka = a[:keys.key_end(a)] if a is not None else None
        kb = b[:keys.key_end(b)] if b is not None else None
        if kb is None or (ka is not None and ka < kb):
            yield a
            a = next(new, None)
        elif ka is None or kb < ka:
            yield kb + b"\x00"
            b = next(old, None)
        else:
            if a != b:
                if replaced is not None:
                    replaced[a[:1]] = replaced.get(a[:1], 0) + 1
                yield a
            a, b = next(new, None), next(old, None)


# -- chunk ref filters --------------------------------------------------------------------------

def chunk_prefix(rec: bytes) -> bytes:
    """A chunk ref record's key up to its coordinates: family, node id, coords."""
    return rec[:keys.element_end(rec, keys.element_end(rec, 1))]


class ChunkFilter:
    """A Bloom filter over the (node id, coords) prefixes of a fragment's chunk ref keys: a lookup of
    a chunk whose prefix it lacks skips the fragment (the bits are those documented: blake2b)."""

    def __init__(self, bits: bytes):
        self.bits = bits
        self.size = 8 * len(bits)

    @staticmethod
    def _positions(prefix: bytes, size: int) -> list[int]:
        digest = hashlib.blake2b(prefix, digest_size=16).digest()
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

@dataclass(frozen=True)
class Holding:
    """Records of one family in a fragment: how many, how many of them tombstones, and the distinct
    first key elements where the family is first-keyed (else None)."""

    records: int
    tombstones: int
    firsts: frozenset | None


@dataclass(frozen=True)
class FragmentInfo:
    """What a fragment's header record says beyond a full archive's: the time range it covers (its
    base's export time, its own), the format version of a full export made with it (2 or 3: what
    consolidation writes) and what it holds per family tag."""

    covers: tuple[int, int]
    view_format: int
    holdings: dict[bytes, Holding]
    chunk_filter: ChunkFilter | None = None

    def encode(self) -> tuple:
        """The sixth value element of the fragment's header record."""
        return (self.covers[0], self.covers[1], self.view_format,
                None if self.chunk_filter is None else self.chunk_filter.bits,
                tuple((S.FAMILY_NAMES[tag], h.records, h.tombstones, None if h.firsts is None else tuple(sorted(h.firsts)))
                      for tag, h in sorted(self.holdings.items())))

    @classmethod
    def decode(cls, element: object, where: str) -> FragmentInfo:
        """Read the element :meth:`encode` writes; ZSCorrupt naming ``where`` when it is malformed."""
        tags = {name: tag for tag, name in S.FAMILY_NAMES.items()}
        try:
            start, stop, view_format, bits, families = element  # type: ignore[misc]
            if not (bits is None or (isinstance(bits, bytes) and bits)):
                raise ValueError("chunk ref filter")
            if view_format not in (2, 3):
                raise ValueError(f"format version {view_format!r} of the view")
            holdings = {}
            for name, records, dead, firsts in families:
                if name not in tags or not all(isinstance(n, int) and n >= 0 for n in (records, dead)) \
                        or dead > records or not (firsts is None or isinstance(firsts, tuple)):
                    raise ValueError(f"family entry {name!r}")
                if (firsts is None) == (name in FIRST_KEYED):
                    raise ValueError(f"family {name!r} lists first key elements where it should not, or not where it should")
                holdings[tags[name]] = Holding(records, dead, None if firsts is None else frozenset(firsts))
            if not (isinstance(start, int) and isinstance(stop, int)):
                raise ValueError("time range")
        except (TypeError, ValueError) as exc:
            raise ZSCorrupt(f"{where}: malformed fragment description in the header record ({exc})") from None
        return cls((start, stop), view_format, holdings, None if bits is None else ChunkFilter(bits))


class HoldingsTally:
    """Counts a fragment's records per family as they are written, with their first key elements."""

    def __init__(self, strict: bool = False) -> None:
        self.strict = strict  # check every record's version byte (validation), not only those ending in 0
        self.records: dict[bytes, int] = {}
        self.tombstones: dict[bytes, int] = {}
        self.firsts: dict[bytes, set] = {}
        self._last = b"\xff"  # the first-element prefix of the last first-keyed record seen
        self.chunk_prefixes: list[bytes] | None = []  # None past FILTER_MAX_KEYS

    def watch(self, lists: Iterable[list[bytes]]) -> Iterator[list[bytes]]:
        """``lists`` as they pass, tallied."""
        for batch in lists:
            for rec in batch:
                self._note(rec)
            yield batch

    def _note(self, rec: bytes) -> None:
        tag = rec[:1]
        self.records[tag] = self.records.get(tag, 0) + 1
        if tag in _FIRST_KEYED_TAGS and not rec.startswith(self._last):
            end = keys.element_end(rec, 1)
            self._last = bytes(rec[:end])
            self.firsts.setdefault(tag, set()).add(keys.decode(self._last, 1)[0][0])
        if tag == S.CHUNK_REF and self.chunk_prefixes is not None:
            prefix = chunk_prefix(rec)
            if not self.chunk_prefixes or self.chunk_prefixes[-1] != prefix:
                self.chunk_prefixes.append(prefix)
                if len(self.chunk_prefixes) > FILTER_MAX_KEYS:
                    self.chunk_prefixes = None
        if rec[-1] == 0 or self.strict:
            end = keys.key_end(rec)
            if end < len(rec) and rec[end] == 0:
                if len(rec) != end + 1:
                    raise ZSCorrupt(f"tombstone {bytes(rec[:60])!r} holds bytes after its version byte")
                self.tombstones[tag] = self.tombstones.get(tag, 0) + 1

    def info(self, covers: tuple[int, int], view_format: int) -> FragmentInfo:
        """The description of what was tallied (the header record itself left out)."""
        holdings = {tag: Holding(n, self.tombstones.get(tag, 0),
                                 frozenset(self.firsts.get(tag, ())) if tag in _FIRST_KEYED_TAGS else None)
                    for tag, n in self.records.items() if tag != S.HEADER}
        prefixes = self.chunk_prefixes
        return FragmentInfo(covers, view_format, holdings, ChunkFilter.build(prefixes) if prefixes else None)


# -- locating a base -----------------------------------------------------------------------------

def base_link(fragment_path: str | os.PathLike, base_path: str | os.PathLike) -> str:
    """How a fragment names its base: the base's path relative to the fragment's directory, with ``/``."""
    rel = os.path.relpath(os.path.abspath(base_path), os.path.dirname(os.path.abspath(fragment_path)))
    return rel.replace(os.sep, "/")


def resolve_base(location: str, link: str) -> str:
    """Where the base named ``link`` by the fragment at ``location`` (a path or URL) is."""
    if _SCHEME.match(location):
        parts = urlsplit(location)
        path = posixpath.normpath(posixpath.join(posixpath.dirname(parts.path), link))
        return urlunsplit((parts.scheme, parts.netloc, path, "", ""))
    if location.startswith("file://"):
        location = location[len("file://"):]
    return os.path.normpath(os.path.join(os.path.dirname(location), link.replace("/", os.sep)))


def fragment_link(zs: ZS, where: str) -> tuple[str, str] | None:
    """``(base link, base SHA-256 hex)`` from a fragment's ZS metadata, None for a full archive;
    ZSCorrupt when the link is malformed or not a relative path."""
    marker = zs.metadata.get(S.METADATA_KEY) if isinstance(zs.metadata, dict) else None
    link = marker.get("fragment") if isinstance(marker, dict) else None
    if link is None:
        return None
    base = link.get("base") if isinstance(link, dict) else None
    digest = link.get("base_sha256") if isinstance(link, dict) else None
    if not isinstance(base, str) or not isinstance(digest, str) or not re.fullmatch(r"[0-9a-f]{64}", digest):
        raise ZSCorrupt(f"{where}: malformed fragment link in the header metadata: {link!r:.200}")
    if not base or len(base) > _MAX_BASE or _SCHEME.match(base) or base.startswith(("/", "\\")) \
            or re.match(r"^[A-Za-z]:", base) or "\x00" in base:
        raise ZSCorrupt(f"{where}: the fragment's base {base[:200]!r} is not a relative path")
    return base, digest


# -- reading a chain -----------------------------------------------------------------------------

class Member:
    """One archive of a chain: its reader, where it is, and what it holds (None: a full archive)."""

    def __init__(self, zs: ZS, location: str, info: FragmentInfo | None, header: tuple):
        self.zs = zs
        self.location = location
        self.info = info
        self.header = header

    def may_hold(self, family: bytes | None, first: object, chunk: bytes | None = None) -> bool:
        """Whether this archive may hold a record of ``family`` whose first key element is ``first``
        (None: unknown), and a chunk ref under the (node, coords) prefix ``chunk`` if given."""
        if self.info is None or family is None or family == S.HEADER:
            return True
        held = self.info.holdings.get(family)
        if held is None or not (held.firsts is None or first is None or first in held.firsts):
            return False
        return chunk is None or self.info.chunk_filter is None or self.info.chunk_filter.may_hold(chunk)

    def may_tombstone(self, family: bytes | None) -> bool:
        """Whether this archive may hold tombstones of ``family`` (None: any)."""
        if self.info is None:
            return False
        if family is None:
            return any(h.tombstones for h in self.info.holdings.values())
        held = self.info.holdings.get(family)
        return held is not None and held.tombstones > 0


def _family_first(hint: bytes) -> tuple[bytes | None, object, bytes | None]:
    """The family and first key element a search bound fixes, where it fixes them, and the bound
    itself when it is a chunk ref's (node, coords) prefix."""
    if not hint:
        return None, None, None
    try:
        elements, _ = keys.decode(hint, 1, what="search bound")
    except ZSCorrupt:  # a bound cut inside an element: the family alone is known
        return hint[:1], None, None
    chunk = hint if hint[:1] == S.CHUNK_REF and len(elements) == 2 else None
    return hint[:1], elements[0] if elements else None, chunk


def _merged(streams: list[Iterator[bytes]]) -> Iterator[bytes]:
    """The records of ``streams`` (newest first) merged by key: the newest of equal keys, tombstones dropped."""
    def keyed(order: int, stream: Iterator[bytes]) -> Iterator[tuple[bytes, int, bytes]]:
        for rec in stream:
            yield rec[:keys.key_end(rec)], order, rec

    last = None
    for key, _, rec in heapq.merge(*(keyed(i, s) for i, s in enumerate(streams))):
        if key == last:
            continue
        last = key
        if rec[len(key)] != 0:
            yield rec


class Chain:
    """A fragment and the archives it builds on, read as one archive: the reader interface a
    :class:`~zsarchive.archive.query.RepoArchive` uses (``search``, ``floor_span``, ``metadata``)."""

    def __init__(self, members: list[Member]):
        self.members = members  # newest first; the last is the full archive
        newest = members[0].zs
        self.name = newest.name
        self.metadata = newest.metadata
        self.codec = newest.codec
        self.data_sha256 = newest.data_sha256
        self._small: dict[bytes, list[bytes]] = {}

    def _candidates(self, hint: bytes) -> tuple[list[Member], bytes | None]:
        family, first, chunk = _family_first(hint)
        return [m for m in self.members if m.may_hold(family, first, chunk)], family

    def search(self, start: bytes | None = None, stop: bytes | None = None,
               prefix: bytes | None = None) -> Iterator[bytes]:
        """The view's records in ``[start, stop)`` starting with ``prefix``, as :meth:`ZS.search`."""
        if prefix is not None:
            hint = prefix
        elif start is not None and stop is not None:
            hint = os.path.commonprefix([start, stop])
        else:
            hint = b""
        members, family = self._candidates(hint)
        if family in _CACHED and len(members) > 1:
            return self._cached(family, start, stop, prefix)
        streams = [m.zs.search(start=start, stop=stop, prefix=prefix) for m in members]
        if len(streams) == 1 and not members[0].may_tombstone(family):
            return streams[0]
        return _merged(streams)

    def _cached(self, family: bytes, start: bytes | None, stop: bytes | None, prefix: bytes | None) -> Iterator[bytes]:
        view = self._small.get(family)
        if view is None:
            view = self._small[family] = list(_merged([m.zs.search(prefix=family) for m in self.members]))
        at = bisect.bisect_left(view, max(start or b"", prefix or b""))
        for rec in view[at:]:
            if (stop is not None and rec >= stop) or (prefix is not None and not rec.startswith(prefix)):
                return
            yield rec

    def floor_span(self, before: bytes, stop: bytes, views: bool = False) -> list:
        """As :meth:`ZS.floor_span`, answered by the newest archive holding records that share
        ``before``'s family and first key element (all pieces of one chunk file live in one archive)."""
        owner = before[:keys.element_end(before, 1)]
        members, _ = self._candidates(owner)
        if len(members) == 1 and not members[0].may_tombstone(owner[:1]):
            return members[0].zs.floor_span(before, stop, views)
        for member in members:
            probe = next(iter(member.zs.search(prefix=owner)), None)
            if probe is not None:
                return [] if is_tombstone(probe) else member.zs.floor_span(before, stop, views)
        return []

    def close(self) -> None:
        """Close every archive of the chain."""
        for member in self.members:
            member.zs.close()


def _header_value(zs: ZS, where: str) -> tuple:
    for rec in zs.search(prefix=S.key_prefix(S.HEADER)):
        return S.split(rec)[2]
    raise ZSCorrupt(f"{where}: archive has no header record")


def open_chain(zs: ZS, location: str) -> Chain:
    """The chain whose newest fragment ``zs`` is, read at ``location``: each base opened relative to
    the fragment naming it and checked against its hash; one-line errors for a base missing, changed,
    of the wrong kind, looping back, or past :data:`MAX_CHAIN`."""
    members: list[Member] = []
    seen: set[str] = set()
    current, where = zs, location
    try:
        while True:
            header = _header_value(current, where)
            link = fragment_link(current, where)
            if link is None:
                if header[0] < 2:
                    raise ZSError(f"{where}: an archive of format {header[0]} cannot be a fragment's base; "
                                  "export the repository again")
                members.append(Member(current, where, None, header))
                return Chain(members)
            if len(header) < 6:
                raise ZSCorrupt(f"{where}: a fragment whose header record does not describe it")
            members.append(Member(current, where, FragmentInfo.decode(header[5], where), header))
            seen.add(os.path.abspath(where) if not _SCHEME.match(where) else where)
            if len(members) >= MAX_CHAIN:
                raise ZSError(f"{location}: the chain of fragments is longer than {MAX_CHAIN} archives; "
                              "consolidate it (zs consolidate)")
            base, digest = link
            target = resolve_base(where, base)
            if (os.path.abspath(target) if not _SCHEME.match(target) else target) in seen:
                raise ZSCorrupt(f"{where}: its base {base!r} loops back into the chain")
            try:
                current = ZS(target)  # a path or any URL the I/O layer reads
            except (ZSError, OSError) as exc:
                current = None
                raise ZSError(f"{where}: cannot open its base {target}: {exc}") from None
            if current.data_sha256.hex() != digest:
                raise ZSError(f"{where}: its base {target} is not the archive it was made from (SHA-256 "
                              f"{current.data_sha256.hex()[:16]}..., the fragment names {digest[:16]}...)")
            marker = current.metadata.get(S.METADATA_KEY) if isinstance(current.metadata, dict) else None
            if not isinstance(marker, dict):
                raise ZSError(f"{where}: its base {target} is not a repo archive")
            where = target
    except BaseException:
        for member in members[1:]:
            member.zs.close()
        if current is not None and current is not zs and all(m.zs is not current for m in members):
            current.close()
        raise
