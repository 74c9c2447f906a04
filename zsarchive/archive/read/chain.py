"""Reading a chain of fragments as one archive: each base located relative to the fragment naming it,
checked against its hash, and the chain's records merged by key, the newest winning, tombstones removed
(docs/archive-format.rst, "Fragments")."""

from __future__ import annotations

import bisect
import heapq
import os
import posixpath
import re
from typing import Iterator

from zsarchive.archive.format import tuples
from zsarchive.archive.format import schema
from zsarchive.archive.format.fragments import MAX_CHAIN, FragmentInfo, is_tombstone
from zsarchive.archive.format.header import ArchiveHeader, archive_metadata, history_from_timeline, refs_by_manifest
from zsarchive.errors import ZSCorrupt, ZSError
from zsarchive.io.location import is_url, local_path, scheme_of
from zsarchive.zs.reader import ZS

_CACHED = frozenset((schema.REFS, schema.REPO))
"""Small families a chain reads once and keeps: every fragment may hold some, and a query resolving a
branch would otherwise read each fragment."""
_MAX_BASE = 4096


# -- locating a base -----------------------------------------------------------------------------


def resolve_base(location: str, link: str) -> str:
    """Where the base named ``link`` by the fragment at ``location`` (a path or URL) is."""
    if is_url(location):
        from urllib.parse import urlsplit, urlunsplit  # here: opening a local archive needs no URL parser

        parts = urlsplit(location)
        path = posixpath.normpath(posixpath.join(posixpath.dirname(parts.path), link))
        return urlunsplit((parts.scheme, parts.netloc, path, "", ""))
    return os.path.normpath(os.path.join(os.path.dirname(local_path(location)), link.replace("/", os.sep)))


def _identity(location: str) -> str:
    """What two names of one archive share: a local archive's absolute path, else its URL."""
    return location if is_url(location) else os.path.abspath(local_path(location))


def fragment_link(zs: ZS, where: str) -> tuple[str, str] | None:
    """``(base link, base SHA-256 hex)`` from a fragment's ZS metadata, None for a full archive;
    ZSCorrupt when the link is malformed or not a relative path."""
    marker = archive_metadata(zs)
    link = marker.get("fragment") if marker is not None else None
    if link is None:
        return None
    base = link.get("base") if isinstance(link, dict) else None
    digest = link.get("base_sha256") if isinstance(link, dict) else None
    if not isinstance(base, str) or not isinstance(digest, str) or not re.fullmatch(r"[0-9a-f]{64}", digest):
        raise ZSCorrupt(f"{where}: malformed fragment link in the header metadata: {link!r:.200}")
    if (
        not base
        or len(base) > _MAX_BASE
        or scheme_of(base) is not None
        or base.startswith(("/", "\\"))
        or re.match(r"^[A-Za-z]:", base)
        or "\x00" in base
    ):
        raise ZSCorrupt(f"{where}: the fragment's base {base[:200]!r} is not a relative path")
    return base, digest


# -- reading a chain -----------------------------------------------------------------------------


class Member:
    """One archive of a chain: its reader, where it is, and what it holds (None: a full archive)."""

    def __init__(self, zs: ZS, location: str, info: FragmentInfo | None, header: ArchiveHeader | None):
        self.zs = zs
        self.location = location
        self.info = info
        self.header = header

    def may_hold(self, family: bytes | None, first: object, chunk: bytes | None = None) -> bool:
        """Whether this archive may hold a record of ``family`` whose first key element is ``first``
        (None: unknown), and a chunk ref under the (node, coords) prefix ``chunk`` if given."""
        if self.info is None or family is None or family == schema.HEADER:
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
        elements, _ = tuples.decode(hint, 1, what="search bound")
    except ZSCorrupt:  # a bound cut inside an element: the family alone is known
        return hint[:1], None, None
    chunk = hint if hint[:1] == schema.CHUNK_REF and len(elements) == 2 else None
    return hint[:1], elements[0] if elements else None, chunk


def _merged(streams: list[Iterator[bytes]]) -> Iterator[bytes]:
    """The records of ``streams`` (newest first) merged by key: the newest of equal keys, tombstones dropped."""

    def keyed(order: int, stream: Iterator[bytes]) -> Iterator[tuple[bytes, int, bytes]]:
        for rec in stream:
            yield rec[: tuples.key_end(rec)], order, rec

    last = None
    for key, _, rec in heapq.merge(*(keyed(i, s) for i, s in enumerate(streams))):
        if key == last:
            continue
        last = key
        if rec[len(key)] != 0:
            yield rec


class Chain:
    """A fragment and the archives it builds on, read as one archive: the reader interface a
    :class:`~zsarchive.archive.read.repoarchive.RepoArchive` uses (``search``, ``floor_span``, ``metadata``)."""

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

    def search(
        self, start: bytes | None = None, stop: bytes | None = None, prefix: bytes | None = None
    ) -> Iterator[bytes]:
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

    def floor_span(self, before: bytes, stop: bytes, zero_copy: bool = False) -> list:
        """As :meth:`ZS.floor_span`, answered by the newest archive holding records that share
        ``before``'s family and owner (all pieces of one chunk file, or of one virtual range, live in one
        archive): its first key element, or the elements :data:`schema.OWNER_ELEMENTS` gives its family."""
        end = 1
        for _ in range(schema.OWNER_ELEMENTS.get(before[:1], 1)):
            end = tuples.element_end(before, end)
        owner = before[:end]
        members, _ = self._candidates(owner)
        if len(members) == 1 and not members[0].may_tombstone(owner[:1]):
            return members[0].zs.floor_span(before, stop, zero_copy)
        for member in members:
            probe = next(iter(member.zs.search(prefix=owner)), None)
            if probe is not None:
                return [] if is_tombstone(probe) else member.zs.floor_span(before, stop, zero_copy)
        return []

    def close(self) -> None:
        """Close every archive of the chain."""
        for member in self.members:
            member.zs.close()


def _same_history(members: list[Member]) -> None:
    """Refuse a chain whose fragments keep the per-chunk history otherwise than its full archive (their
    records would mix two meanings of ``H``)."""
    full = members[-1]
    for member in members[:-1]:
        if history_from_timeline(member.info.records_format) != history_from_timeline(full.header.format_version):
            raise ZSCorrupt(
                f"{member.location}: a fragment of format {member.info.records_format} over the "
                f"archive {full.location} of format {full.header.format_version}"
            )


def open_chain(zs: ZS, location: str) -> Chain:
    """The chain whose newest fragment ``zs`` is, read at ``location``: each base opened relative to
    the fragment naming it and checked against its hash; one-line errors for a base missing, changed,
    of the wrong kind, looping back, or past :data:`MAX_CHAIN`."""
    members: list[Member] = []
    seen: set[str] = set()
    current, where = zs, location
    try:
        while True:
            header = ArchiveHeader.read(current, where)
            link = fragment_link(current, where)
            if link is None:
                if refs_by_manifest(header.format_version):
                    raise ZSError(
                        f"{where}: an archive of format {header.format_version} cannot be a fragment's base; "
                        "export the repository again"
                    )
                members.append(Member(current, where, None, header))
                _same_history(members)
                return Chain(members)
            if header.fragment is None:
                raise ZSCorrupt(f"{where}: a fragment whose header record does not describe it")
            members.append(Member(current, where, header.fragment, header))
            seen.add(_identity(where))
            if len(members) >= MAX_CHAIN:
                raise ZSError(
                    f"{location}: the chain of fragments is longer than {MAX_CHAIN} archives; "
                    "consolidate it (zs consolidate)"
                )
            base, digest = link
            target = resolve_base(where, base)
            if _identity(target) in seen:
                raise ZSCorrupt(f"{where}: its base {base!r} loops back into the chain")
            try:
                current = ZS(target)  # a path or any URL the I/O layer reads
            except (ZSError, OSError) as exc:
                current = None
                raise ZSError(f"{where}: cannot open its base {target}: {exc}") from None
            if current.data_sha256.hex() != digest:
                raise ZSError(
                    f"{where}: its base {target} is not the archive it was made from (SHA-256 "
                    f"{current.data_sha256.hex()[:16]}..., the fragment names {digest[:16]}...)"
                )
            if archive_metadata(current) is None:
                raise ZSError(f"{where}: its base {target} is not a repo archive")
            where = target
    except BaseException:
        for member in members[1:]:
            member.zs.close()
        if current is not None and current is not zs and all(m.zs is not current for m in members):
            current.close()
        raise


def records_format(zs: ZS | Chain, format_version: int) -> int:
    """The format version the records of an archive of ``format_version`` follow: a chain's, that of its
    view (its newest fragment names it)."""
    info = zs.members[0].info if isinstance(zs, Chain) else None
    return format_version if info is None else info.records_format
