"""Queries of an archive's history: refs, snapshots, resolving REF[~N|^|@TIME], ancestry and the log."""

from __future__ import annotations

import collections
import itertools
import json
from typing import Any, Iterator

from zsarchive.archive.format import schema
from zsarchive.archive.format.tuples import encode_text
from zsarchive.archive.format.views import RefKey, RefValue, SnapshotKey, SnapshotTimeKey, SnapshotValue
from zsarchive.archive.read.reader import ArchiveReader, NotFound, checked_record
from zsarchive.archive.read.refspec import RefSpec, TimeBound, parse_ref, ref_readings, time_bound
from zsarchive.errors import ZSCorrupt, ZSError
from zsarchive.suggest import hint
from zsarchive.times import format_time
from zsarchive.walk import parent_chain

_MIN_PREFIX = 4
"""The shortest snapshot id prefix a REF may give (git's minimum)."""
_AMBIGUOUS = 6
"""Snapshot ids an ambiguous prefix error shows, one more than this meaning "and more"."""

_HISTORIES = 64
"""Snapshot histories a reader keeps (resolving format 2 chunk refs walks a snapshot's history once)."""


class HistoryQueries(ArchiveReader):
    """Refs and snapshots, and the walk from a snapshot through its parents (with a visited set)."""

    def __init__(self, source: Any):
        super().__init__(source)
        self._snapshots: dict[str, SnapshotValue] = {}
        self._depths: collections.OrderedDict[str, dict[str, int]] = collections.OrderedDict()

    def refs(self) -> list[dict]:
        """Branches, tags and deleted tags: ``{"type", "name", "snapshot_id"}`` (no id for deleted tags). A
        tag that is also deleted is a deleted tag only, as icechunk lists it."""
        out, deleted = [], set()
        for k, value in self._records(schema.REFS):  # deleted tags come before tags
            key = RefKey.decode(k)
            if key.deleted:
                deleted.add(key.name)
                out.append({"type": key.kind, "name": key.name})
            elif key.kind == "tag" and key.name in deleted:
                continue
            else:
                out.append({"type": key.kind, "name": key.name, "snapshot_id": RefValue.decode(value).snapshot_id})
        return out

    def _snapshot_value(self, snapshot_id: str) -> SnapshotValue | None:
        cached = self._snapshots.get(snapshot_id)
        if cached is None:
            value = self._one(schema.SNAPSHOT, (snapshot_id,))
            if value is not None:
                cached = self._snapshots[snapshot_id] = SnapshotValue.decode(value)
        return cached

    @staticmethod
    @checked_record(schema.SNAPSHOT)
    def _snapshot_dict(snapshot_id: str, value: SnapshotValue) -> dict:
        return {
            "id": snapshot_id,
            "parent_id": value.parent_id,
            "flushed_at": format_time(value.flushed_at),
            "message": value.message,
            "metadata": json.loads(value.metadata),
        }

    def snapshot(self, snapshot_id: str) -> dict:
        """One snapshot: id, parent_id, flushed_at, message, metadata, manifests."""
        value = self._snapshot_value(snapshot_id)
        if value is None:
            raise NotFound(f"{self.name}: no snapshot {snapshot_id!r}")
        out = self._snapshot_dict(snapshot_id, value)
        out["manifests"] = [{"id": m, "size_bytes": size, "num_chunk_refs": n} for m, size, n in value.manifests]
        return out

    def _lookup_ref(self, spec: RefSpec, quiet: bool = False) -> str | None:
        kinds = (spec.kind,) if spec.kind else ("branch", "tag", "snapshot")
        for kind in kinds:
            if kind == "snapshot":
                found = self._snapshot_id_like(spec.name, quiet)
                if found is not None:
                    return found
                continue
            value = self._one(schema.REFS, (kind, spec.name))
            if value is not None and not (kind == "tag" and self._one(schema.REFS, ("deleted_tag", spec.name))):
                return RefValue.decode(value).snapshot_id
        if quiet:
            return None
        if spec.kind in (None, "tag") and self._one(schema.REFS, ("deleted_tag", spec.name)) is not None:
            raise NotFound(f"{self.name}: tag {spec.name!r} was deleted")
        what = f"{spec.kind} " if spec.kind else "branch, tag or snapshot "
        names = [r["name"] for r in self.refs() if r["type"] in ((spec.kind,) if spec.kind else ("branch", "tag"))]
        noun = {"branch": "branches", "tag": "tags"}.get(spec.kind or "", "branches and tags")
        raise NotFound(f"{self.name}: unknown {what}{spec.name!r}{hint(spec.name, names, noun)}")

    def _snapshot_id_like(self, text: str, quiet: bool) -> str | None:
        """The snapshot whose id is ``text``, in any case, or the one id it is a prefix of (at least
        4 characters, as git takes them); None if there is none, an error if several."""
        for candidate in dict.fromkeys((text, text.upper())):
            if self._snapshot_value(candidate) is not None:
                return candidate
        if len(text) < _MIN_PREFIX:
            return None
        prefix = schema.key_prefix(schema.SNAPSHOT) + encode_text(text.upper())[:-1]
        ids = [
            SnapshotKey.decode(schema.split(rec)[1]).snapshot_id
            for rec in itertools.islice(self.zs.search(prefix=prefix), _AMBIGUOUS)
        ]
        if len(ids) > 1 and not quiet:
            shown = ", ".join(ids[: _AMBIGUOUS - 1]) + (" ..." if len(ids) == _AMBIGUOUS else "")
            raise NotFound(f"{self.name}: snapshot id prefix {text!r} is ambiguous: {shown}; give more characters")
        return ids[0] if len(ids) == 1 else None

    def resolve(self, ref: str) -> str:
        """Snapshot id a REF names: ``[branch:|tag:|snapshot:]NAME`` followed by any of ``~N``, ``^`` and
        ``@TIME``, applied left to right (``main~3``, ``tag:v1.0^``, ``main@2026-11-22T01:19:29Z~2``)."""
        readings = ref_readings(ref)
        for name, suffixes in readings[:-1]:  # a ref whose name holds ``~``, ``^`` or ``@`` wins over suffixes
            if self._lookup_ref(_bare(name), quiet=True) is not None:
                spec = parse_ref(ref, suffixes)
                break
        else:
            spec = parse_ref(ref, readings[-1][1])
        snapshot_id = self._lookup_ref(spec)
        at = spec.kind + ":" + spec.name if spec.kind else spec.name
        for op, arg in spec.steps:
            snapshot_id = self._parents_back(snapshot_id, arg, at) if op == "~" else self._as_of(snapshot_id, arg, at)
            at += f"~{arg}" if op == "~" else f"@{format_time(arg)}"
        return snapshot_id

    def _parents_back(self, snapshot_id: str, count: int, at: str) -> str:
        """The snapshot ``count`` parents before ``snapshot_id`` (named ``at`` in messages)."""
        depth = 0
        for depth, (sid, value) in enumerate(self._ancestry(snapshot_id)):
            if depth == count:
                return sid
            if value.parent_id is not None and self._snapshot_value(value.parent_id) is None:
                raise NotFound(
                    f"{self.name}: {at}~{count} is beyond the archived history: {at}~{depth} ({sid}) "
                    f"names parent {value.parent_id}, which the archive does not hold"
                )
        raise NotFound(
            f"{self.name}: {at}~{count} is beyond the first commit: the history of {at} holds "
            f"{depth + 1} snapshot{'s' if depth else ''} ({at}~{depth} is its first)"
        )

    def _as_of(self, snapshot_id: str, when: int, at: str) -> str:
        """The newest snapshot in the history of ``snapshot_id`` flushed at or before ``when``."""
        first = None
        for sid, value in self._ancestry(snapshot_id):
            if value.flushed_at <= when:
                return sid
            first = value.flushed_at
        raise NotFound(
            f"{self.name}: no snapshot in the history of {at!r} was flushed at or before "
            f"{format_time(when)} (its first commit was flushed at {format_time(first)})"
        )

    def _ancestry(self, snapshot_id: str) -> Iterator[tuple[str, SnapshotValue]]:
        values: dict[str, SnapshotValue] = {}
        for current in parent_chain(
            snapshot_id,
            lambda sid: values[sid].parent_id,
            lambda at: ZSCorrupt(f"{self.name}: the history of snapshot {snapshot_id} loops at snapshot {at}"),
        ):
            value = self._snapshot_value(current)
            if value is None:
                raise ZSCorrupt(f"{self.name}: snapshot {current} is in a history but has no record")
            values[current] = value
            yield current, value

    def _history_depths(self, snapshot_id: str) -> dict[str, int]:
        """Every snapshot in the history of one -> its distance from it (0: itself); the history ends at
        the first snapshot without a parent, or whose parent the archive does not hold."""
        depths = self._depths.get(snapshot_id)
        if depths is None:
            depths = {}
            values: dict[str, SnapshotValue] = {}
            for current in parent_chain(snapshot_id, lambda sid: values[sid].parent_id):  # a loop ends where it closes
                value = self._snapshot_value(current)
                if value is None:
                    break
                values[current] = value
                depths[current] = len(depths)
            self._depths[snapshot_id] = depths
            while len(self._depths) > _HISTORIES:
                self._depths.popitem(last=False)
        return depths

    def ancestry(self, ref: str) -> list[dict]:
        """The history of REF, newest first."""
        return [self._snapshot_dict(sid, value) for sid, value in self._ancestry(self.resolve(ref))]

    def reached_by(self) -> dict[str, list[str]]:
        """Snapshot id -> the refs whose history holds it (branches by name, tags as ``tag:NAME``); a
        snapshot no ref reaches is not a key."""
        out: dict[str, list[str]] = {}
        for ref in self.refs():
            if ref["type"] == "deleted_tag":
                continue
            name = ref["name"] if ref["type"] == "branch" else f"tag:{ref['name']}"
            for sid in self._history_depths(ref["snapshot_id"]):
                out.setdefault(sid, []).append(name)
        return out

    def log(
        self, ref: str | None = None, since: TimeBound = None, until: TimeBound = None, max_count: int | None = None
    ) -> list[dict]:
        """Snapshots (of REF's history, or all) flushed in ``[since, until]``, newest first; at most
        ``max_count`` of them.

        Bounds are inclusive: TIME text (a bare date or a ``datetime.date`` covers its whole day), a
        datetime (naive: UTC), or microseconds since 1970 UTC.
        """
        if max_count is not None and (not isinstance(max_count, int) or isinstance(max_count, bool) or max_count < 0):
            raise ZSError(f"max_count must be an integer >= 0, not {max_count!r}")
        since, until = time_bound(since, False), time_bound(until, True)
        if ref is not None:
            items = list(self._ancestry(self.resolve(ref)))
            earliest = min((v.flushed_at for _, v in items), default=None)
            chosen = [
                (sid, v)
                for sid, v in items
                if (since is None or v.flushed_at >= since) and (until is None or v.flushed_at <= until)
            ]
        else:
            first = next((SnapshotTimeKey.decode(k) for k, _ in self._records(schema.SNAPSHOT_TIME)), None)
            earliest = first.flushed_at if first else None
            # A range scan of the by-time family reads only the blocks of that period.
            window = list(
                self._range(
                    schema.SNAPSHOT_TIME, () if since is None else (since,), None if until is None else (until + 1,)
                )
            )
            chosen = [
                (sid, self._snapshot_value(sid))
                for sid in (SnapshotTimeKey.decode(k).snapshot_id for k, _ in reversed(window))
            ]
        if until is not None and earliest is not None and until < earliest:
            raise NotFound(f"{self.name}: {format_time(until)} is before the first commit ({format_time(earliest)})")
        if ref is not None:
            chosen.sort(key=lambda item: item[1].flushed_at, reverse=True)
        return [self._snapshot_dict(sid, value) for sid, value in chosen[:max_count]]


def _bare(name: str) -> RefSpec:
    """A NAME without suffixes, for a lookup that may fail quietly (a bad name is then no ref)."""
    try:
        return parse_ref(name, "")
    except ZSError:
        return RefSpec(None, name, name)
