"""Which of an archive's history depends on what: the objects its virtual chunk refs point into, each with
the refs, ranges and bytes that name it, the snapshots whose refs use it (first and last), whether the
archive keeps their bytes (format 7), and, when checked, whether the object is still the version those
refs pin (``zs sources [--check]``; :meth:`RepoArchive.sources
<zsarchive.archive.read.repoarchive.RepoArchive.sources>`).

A snapshot uses an object when a chunk ref in effect in it (its own, or the nearest of its history's back
to the array's ``since``) points into the object. The chunk ref timeline (format 2 on) is read an array
at a time; chunks whose refs changed in the same snapshots share one computation of where each ref is in
effect, so the work is the timeline's length plus the snapshots once per such pattern.
"""

from __future__ import annotations

import collections
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

import numpy as np

from zsarchive.archive.format import schema
from zsarchive.archive.format.header import refs_by_manifest
from zsarchive.archive.format.views import ChunkRefValue, ManifestRefKey, NodeKey, NodeValue, SnapshotKey, SnapshotValue
from zsarchive.archive.read.reader import records_under
from zsarchive.errors import ZSError
from zsarchive.io.pinning import Version
from zsarchive.times import format_time
from zsarchive.walk import parent_chain

CHECKS_IN_FLIGHT = 64
"""Objects whose current version ``--check`` asks for side by side."""


@dataclass
class Source:
    """One object virtual chunk refs point into."""

    location: str
    refs: int = 0
    """Chunk ref records (a ref in effect in many snapshots counts once)."""
    ranges: set = field(default_factory=set)
    """``(offset, length, etag, last_modified)`` of each distinct range it is read under."""
    kept: int = 0
    """Of those, the ranges the archive keeps."""
    kept_refs: int = 0
    uses: set = field(default_factory=set)
    """Ids of the snapshot sets (see :class:`_Patterns`) whose snapshots use it."""
    snapshots: list[str] = field(default_factory=list)
    status: str | None = None
    """``unchanged``, ``changed``, ``missing``, ``unpinned`` or ``unreadable`` once checked; ``not checked``
    outside the authorized prefixes."""
    why: str | None = None
    current: Version | None = None

    @property
    def bytes(self) -> int:
        """Bytes of its distinct ranges."""
        return sum(length for _, length, _, _ in self.ranges)

    @property
    def at_risk(self) -> bool:
        """Whether it changed or vanished while some ref to it is not kept in the archive."""
        return self.status in ("changed", "missing") and self.kept_refs < self.refs


class _Patterns:
    """Where each ref of a chunk is in effect, for every chunk whose refs changed in the same snapshots."""

    def __init__(self, parents: dict[str, str | None]):
        self.parents = parents
        self._live: dict[tuple, dict[str, frozenset]] = {}

    def live(self, node: dict[str, str | None], pattern: tuple[str, ...], key: Any) -> dict[str, frozenset]:
        """Snapshot of each of ``pattern`` (the snapshots that changed a chunk's ref) -> the snapshots of
        ``node`` (snapshot -> the array's ``since`` there) in which that change is the ref in effect."""
        found = self._live.get((key, pattern))
        if found is not None:
            return found
        changed = set(pattern)
        out: dict[str, set] = {sid: set() for sid in pattern}
        for sid, since in node.items():
            for at in parent_chain(sid, self.parents.get):
                if at in changed:
                    out[at].add(sid)
                    break
                if at == since or at not in self.parents:
                    break
        found = self._live[(key, pattern)] = {sid: frozenset(users) for sid, users in out.items()}
        return found


def scan(
    zs: Any, format_version: int, kept: set[tuple] | dict, uses: bool = True
) -> tuple[list[Source], dict[str, int]]:
    """The objects an archive's virtual chunk refs point into, with what depends on each (``kept``: the
    ``E`` keys of the ranges the archive keeps; ``uses``: the snapshots using each, else none), and each
    snapshot's ``flushed_at``."""
    parents: dict[str, str | None] = {}
    flushed: dict[str, int] = {}
    manifests: dict[str, list[str]] = collections.defaultdict(list)
    for k, value in records_under(zs, schema.SNAPSHOT):
        sid, snapshot = SnapshotKey.decode(k).snapshot_id, SnapshotValue.decode(value)
        parents[sid] = snapshot.parent_id
        flushed[sid] = snapshot.flushed_at
        for item in snapshot.manifests:
            found = SnapshotValue.manifest_file(item)
            if found is not None:
                manifests[found[0]].append(sid)
    sources: dict[str, Source] = {}
    sets: dict[int, frozenset] = {}

    def note(location: str, offset: int, length: int, etag: Any, modified: Any, users: frozenset) -> None:
        source = sources.get(location)
        if source is None:
            source = sources[location] = Source(location)
        source.refs += 1
        source.ranges.add((offset, length, etag, modified))
        if (location, offset, length, etag, modified) in kept:
            source.kept_refs += 1
        sets.setdefault(id(users), users)
        source.uses.add(id(users))

    if refs_by_manifest(format_version):
        for k, value in records_under(zs, schema.CHUNK_REF):
            ref = ChunkRefValue.decode(value)
            if ref.kind == schema.VIRTUAL:
                users = frozenset(manifests.get(ManifestRefKey.decode(k).manifest_id, ()))
                note(str(ref.location), ref.offset, ref.length, ref.checksum_etag, ref.checksum_last_modified, users)
    else:
        from zsarchive.archive.read.refrows import chunk_ref_rows  # here: numpy's columns for a long scan

        patterns = _Patterns(parents)
        for node_id, node in _arrays(zs).items():
            rows = chunk_ref_rows(zs, node_id)
            if not len(rows) or not (rows.kind == schema.VIRTUAL).any():
                continue
            starts = np.ones(len(rows), bool)
            starts[1:] = (rows.coords[1:] != rows.coords[:-1]).any(axis=1)
            bounds = np.flatnonzero(starts).tolist() + [len(rows)]
            sids = [rows.snapshot_ids[i] for i in rows.snapshot.tolist()]
            kinds, texts = rows.kind.tolist(), rows.text.tolist()
            offsets, lengths = rows.offset.tolist(), rows.length.tolist()
            for lo, hi in zip(bounds, bounds[1:]):
                if schema.VIRTUAL not in kinds[lo:hi]:
                    continue
                live = patterns.live(node, tuple(sids[lo:hi]), node_id) if uses else None
                for row in range(lo, hi):
                    if kinds[row] == schema.VIRTUAL:
                        note(
                            rows.texts[texts[row]],
                            offsets[row],
                            lengths[row],
                            rows.checksum_etag[row],
                            rows.checksum_last_modified[row],
                            frozenset() if live is None else live[sids[row]],
                        )
    for source in sources.values():
        users = frozenset().union(*(sets[i] for i in source.uses))
        source.snapshots = sorted(users)
        source.kept = sum((source.location, *item) in kept for item in source.ranges)
    return [sources[location] for location in sorted(sources)], flushed


def _arrays(zs: Any) -> dict[str, dict[str, str | None]]:
    """Array node id -> snapshot id -> the array's ``since`` in that snapshot."""
    out: dict[str, dict[str, str | None]] = collections.defaultdict(dict)
    for k, value in records_under(zs, schema.NODE):
        node = NodeValue.decode(value)
        if node.is_array:
            out[node.node_id][NodeKey.decode(k).snapshot_id] = node.since
    return out


def check(
    sources: list[Source],
    versions_of: Callable[[list[str], int], Iterable[tuple[int, Version | None | ZSError]]],
    authorized: Callable[[str], bool],
    progress: Callable[[int, int], None] | None = None,
) -> None:
    """Ask each source under an authorized prefix for its current version, once, :data:`CHECKS_IN_FLIGHT`
    at a time (``versions_of(locations, in_flight)``: ``(index, version, None when it is gone, or the
    error)`` as the answers come), and compare it with every checksum its refs pin."""
    asked = []
    for source in sources:
        if authorized(source.location):
            asked.append(source)
        else:
            source.status, source.why = "not checked", "not under an authorized prefix"
    answers = versions_of([source.location for source in asked], CHECKS_IN_FLIGHT)
    for done, (i, answer) in enumerate(answers, 1):
        _judge(asked[i], answer)
        if progress is not None:
            progress(done, len(asked))


def _judge(source: Source, answer: Version | None | ZSError) -> None:
    if isinstance(answer, ZSError):
        source.status, source.why = "unreadable", str(answer)
        return
    if answer is None:
        source.status, source.why = "missing", "no such object"
        return
    source.current = answer
    reasons = [
        why
        for _, _, etag, modified in sorted(source.ranges, key=str)
        for why in [answer.differs(etag, modified)]
        if why
    ]
    short = [(o, n) for o, n, _, _ in source.ranges if answer.size is not None and o + n > answer.size]
    if reasons:
        source.status, source.why = "changed", reasons[0]
    elif short:
        source.status, source.why = "changed", f"{answer.size} bytes now, a ref reads up to {short[0][0] + short[0][1]}"
    elif all(etag is None and modified is None for _, _, etag, modified in source.ranges):
        source.status, source.why = "unpinned", "its refs carry no checksum to compare"
    else:
        source.status = "unchanged"


def report(sources: Iterable[Source], flushed: dict[str, int]) -> list[dict]:
    """The sources as ``zs sources --json`` prints them (see docs/archive-format.rst)."""
    out = []
    shown: dict[tuple[int, str], dict] = {}  # thousands of objects share a few first and last snapshots
    for source in sources:
        times = sorted((flushed.get(sid, 0), sid) for sid in source.snapshots)
        row = {
            "location": source.location,
            "prefix": source.location.rsplit("/", 1)[0] + "/",
            "refs": source.refs,
            "ranges": len(source.ranges),
            "bytes": source.bytes,
            "kept_ranges": source.kept,
            "kept_refs": source.kept_refs,
            "embedded": "all" if source.kept == len(source.ranges) else "some" if source.kept else "none",
            "snapshots": [sid for _, sid in times],
            "first": _snapshot(times[0], shown) if times else None,
            "last": _snapshot(times[-1], shown) if times else None,
        }
        if source.status is not None:
            row.update(
                status=source.status,
                why=source.why,
                at_risk=source.at_risk,
                current=None
                if source.current is None
                else {
                    "etag": source.current.etag,
                    "size": source.current.size,
                    "last_modified": None
                    if source.current.modified_ns is None
                    else format_time(source.current.modified_ns // 1000),
                },
            )
        out.append(row)
    return out


def _snapshot(item: tuple[int, str], shown: dict[tuple[int, str], dict]) -> dict:
    found = shown.get(item)
    if found is None:
        found = shown[item] = {"id": item[1], "flushed_at": format_time(item[0])}
    return dict(found)


def overview(sources: list[Source], rows: list[dict]) -> dict:
    """The whole answer of ``zs sources``: every object, the totals per prefix, and what is at risk (the
    snapshots using an object that changed or vanished while some ref to it is not kept)."""
    risky = [source for source in sources if source.at_risk]
    changed = [source for source in sources if source.status in ("changed", "missing")]
    return {
        "sources": rows,
        "prefixes": totals(rows),
        "checked": any(source.status is not None for source in sources),
        "objects": len(sources),
        "refs": sum(s.refs for s in sources),
        "kept_refs": sum(s.kept_refs for s in sources),
        "changed": sum(s.status == "changed" for s in sources),
        "missing": sum(s.status == "missing" for s in sources),
        "unchanged": sum(s.status == "unchanged" for s in sources),
        "safe_refs": sum(s.kept_refs for s in changed),
        "at_risk": [s.location for s in risky],
        "at_risk_refs": sum(s.refs - s.kept_refs for s in risky),
        "at_risk_snapshots": sorted(set().union(*(s.snapshots for s in risky))) if risky else [],
    }


def totals(rows: list[dict]) -> list[dict]:
    """Per prefix: objects, refs, bytes, and the refs and bytes the archive keeps."""
    out: dict[str, dict] = {}
    for row in rows:
        total = out.setdefault(
            row["prefix"], {"prefix": row["prefix"], "objects": 0, "refs": 0, "bytes": 0, "kept_refs": 0}
        )
        total["objects"] += 1
        total["refs"] += row["refs"]
        total["bytes"] += row["bytes"]
        total["kept_refs"] += row["kept_refs"]
    return [out[prefix] for prefix in sorted(out)]
