"""The bytes of virtual chunk refs kept in an archive (``E`` records, format 7; docs/archive-format.rst).

An export that keeps them (``include_virtual``) names every distinct virtual range its chunk refs point to
(location, offset, length and checksum: the virtual entries of :mod:`chunkfiles
<zsarchive.archive.write.chunkfiles>`, sorted), and this stage, read top to bottom:

1. :func:`plan_ranges` — the ranges to read (under an authorized prefix, and not kept by the archive the
   export builds on), counted with those outside every authorized prefix; :func:`check_budget` refuses an
   export that would keep more than its limit before anything is read;
2. :func:`fetch` — each range read once: the ranges of a remote object in a few coalesced requests, those
   of a local file each by one ``preadv`` straight into the records of its pieces (no copy), requests side
   by side, answers in key order;
3. :func:`range_records` — the bytes checked against each checksum they are read under (the version of
   the object that answered, as every read of a virtual ref checks it) and kept as pieces under the first
   checksum they satisfy, as aliases under the others; a checksum the answer fails, and a range past the
   object's end, are reported and never kept.
"""

from __future__ import annotations

import collections
import itertools
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Callable, Iterable, Iterator, NamedTuple

from zsarchive.archive.format import schema, tuples
from zsarchive.archive.format.pieces import PieceBlock, blocks_of, empty_pieces, owned_pieces, piece_starts
from zsarchive.archive.format.shards import ShardLayout
from zsarchive.archive.format.views import VirtualAliasValue, VirtualRangeKey
from zsarchive.archive.read.chunkdata import ChunkReader
from zsarchive.archive.write.chunkfiles import VirtualShardEntry
from zsarchive.errors import ZSCorrupt, ZSError
from zsarchive.io.pinning import Version
from zsarchive.io.remote import coalesce

Pin = tuple[str | None, int | None]
"""A virtual chunk ref's checksum: its ETag and its modification time (seconds), each possibly None."""

REQUESTS_IN_FLIGHT = 16
"""Reads of virtual ranges an export runs side by side."""
BYTES_IN_FLIGHT = 64 << 20
"""Bytes of virtual ranges read ahead of the writing."""
COALESCE_GAP = 64 << 10
"""Ranges of one object this close share a request (the gap is read and dropped)."""
RUN_LIMIT = 8 << 20
"""The largest request coalescing builds (a larger range alone is one request)."""
LOCAL_CALL = 16 << 20
"""Bytes of one local file's runs read by one task (a file's runs are read between two looks at it)."""
LOCAL_AHEAD = 2 * LOCAL_CALL
"""Bytes of local files read ahead of the writing: a local read is a copy that needs a core, as the
archive's hash does, and reading further ahead only takes turns from it (1 GiB kept: 1.36 s with 64 MiB
ahead, 1.29 s with 32 MiB)."""


class RangeGroup(NamedTuple):
    """A virtual range the chunk refs name, under every checksum they name it with (in key order), and
    its array's shard layout (a virtual shard's pieces are cut at its index and inner chunks)."""

    location: str
    offset: int
    length: int
    pins: tuple[Pin, ...]
    layout: ShardLayout | None

    def key(self, pin: Pin) -> VirtualRangeKey:
        """The ``E`` key of the range under ``pin``."""
        return VirtualRangeKey(self.location, self.offset, self.length, *pin)

    @property
    def where(self) -> str:
        return f"virtual range {self.location} [{self.offset}, {self.offset + self.length})"


def range_groups(entries: Iterable[bytes]) -> Iterator[RangeGroup]:
    """The ranges of sorted virtual entries (one per location, offset and length; a range's checksums
    follow each other in key order, and an entry repeats with its array's layout)."""
    parsed = map(VirtualShardEntry.parse, entries)
    for (location, offset, length), same in itertools.groupby(parsed, key=lambda e: e.key.span):
        pins: list[Pin] = []
        layout = None
        for entry in same:
            pin = entry.key.pin
            if not pins or pins[-1] != pin:
                pins.append(pin)
            layout = layout or entry.layout
        yield RangeGroup(location, offset, length, tuple(pins), layout)


def prefix_of(location: str) -> str:
    """The directory (or URL prefix) a location lies in, as reports group locations."""
    return location.rsplit("/", 1)[0] + "/"


@dataclass
class VirtualReport:
    """What an export did with the bytes of virtual chunk refs: ranges (a location, range and checksum
    each) kept as pieces and their bytes, kept as aliases, already kept by the base, outside every
    authorized prefix (by prefix), and not kept because the read failed (by location: how many, and why
    the first one failed)."""

    kept: int = 0
    kept_bytes: int = 0
    aliases: int = 0
    held: int = 0
    outside: collections.Counter = field(default_factory=collections.Counter)
    failed: dict[str, tuple[int, str]] = field(default_factory=dict)

    def fail(self, location: str, ranges: int, why: str) -> None:
        count, first = self.failed.get(location, (0, why))
        self.failed[location] = (count + ranges, first)

    @property
    def failed_ranges(self) -> int:
        return sum(count for count, _ in self.failed.values())


class KeptRanges:
    """What the archive an export builds on keeps of virtual ranges: nothing, for a full export.
    ``copy``: whether ranges it keeps are written again (a full export made to be compared with it)."""

    copy = False

    def holds(self, key: VirtualRangeKey) -> bool:
        """Whether it keeps the range ``key`` (pieces or an alias)."""
        return False

    def pins(self, span: tuple[str, int, int]) -> list[Pin]:
        """The checksums under which it keeps the pieces of the range ``(location, offset, length)``."""
        return []

    def read(self, key: VirtualRangeKey) -> bytes:
        """The bytes it keeps of a range."""
        raise ZSError(f"{key.location}: not kept")

    def records(self, key: VirtualRangeKey) -> list[bytes]:
        """Its records of a range (an alias and the pieces it names)."""
        return []


class Planned(NamedTuple):
    """A range to read under the checksums the base lacks, and those under which to copy the base's
    records of it (a full export to be compared with the base)."""

    wanted: RangeGroup
    copied: tuple[Pin, ...]

    def encode(self) -> bytes:
        """Bytes that sort as the range's key (a plan waits in a sort file while the budget is checked)."""
        group = self.wanted
        return tuples.encode(
            (
                group.location,
                group.offset,
                group.length,
                group.pins,
                self.copied,
                None if group.layout is None else group.layout.encode(),
            )
        )

    @classmethod
    def decode(cls, item: bytes) -> Planned:
        location, offset, length, pins, copied, layout = tuples.decode(item)[0]
        return cls(
            RangeGroup(location, offset, length, pins, None if layout is None else ShardLayout.decode(layout)), copied
        )


def plan_ranges(
    groups: Iterable[RangeGroup], reader: ChunkReader, kept: KeptRanges, report: VirtualReport
) -> Iterator[Planned]:
    """Each range to read (with only the checksums the base lacks) or to copy from the base; ranges outside
    every authorized prefix, and those the base keeps, are counted in ``report``."""
    allowed: dict[str, bool] = {}
    for group in groups:
        ok = allowed.get(group.location)
        if ok is None:
            ok = allowed[group.location] = reader.authorized(group.location)
        if not ok:
            report.outside[prefix_of(group.location)] += len(group.pins)
            continue
        held = tuple(pin for pin in group.pins if kept.holds(group.key(pin)))
        report.held += len(held)
        missing = tuple(pin for pin in group.pins if pin not in held)
        if missing or (held and kept.copy):
            yield Planned(group._replace(pins=missing), held if kept.copy else ())


def check_budget(total: int, limit: int | None) -> int:
    """``total``, the bytes the planned reads would keep; ZSError when more than ``limit``."""
    if limit is not None and total > limit:
        raise ZSError(
            f"the export would keep {total:,} bytes of virtual chunks, more than the limit of "
            f"{limit:,} (--max-virtual-bytes); nothing was written"
        )
    return total


class _Call(NamedTuple):
    """One task's reads: runs of one object, and the planned ranges they cover (in key order)."""

    location: str
    runs: list[tuple[int, int]]
    plans: list[tuple[Planned, int]]
    """Each planned range and the run holding it (-1: nothing to read, only copies)."""
    size: int


def _calls(plans: Iterable[Planned], local: Callable[[str], bool]) -> Iterator[_Call]:
    """The reads of planned ranges, object by object: nearby ranges share a run; a local file's runs are
    read together up to :data:`LOCAL_CALL` bytes, a remote object's one run per task."""
    for location, group in itertools.groupby(plans, key=lambda plan: plan.wanted.location):
        same = list(group)
        reading = [i for i, plan in enumerate(same) if plan.wanted.pins]
        runs = coalesce([(same[i].wanted.offset, same[i].wanted.length) for i in reading], COALESCE_GAP, RUN_LIMIT)
        run_of = {reading[m]: r for r, run in enumerate(runs) for m in run.members}
        per_call = LOCAL_CALL if local(location) else 1
        call_runs: list[tuple[int, int]] = []
        call_plans: list[tuple[Planned, int]] = []
        size = 0
        for i, plan in enumerate(same):
            r = run_of.get(i, -1)
            if r >= 0 and (not call_runs or call_runs[-1] != (runs[r].start, runs[r].length)):
                if call_runs and (size + runs[r].length > per_call or per_call == 1):
                    yield _Call(location, call_runs, call_plans, size)
                    call_runs, call_plans, size = [], [], 0
                call_runs.append((runs[r].start, runs[r].length))
                size += runs[r].length
            call_plans.append((plan, len(call_runs) - 1 if r >= 0 else -1))
        if call_plans:
            yield _Call(location, call_runs, call_plans, size)


class Answer(NamedTuple):
    """A read of one range: the version of the object that answered, its bytes as buffers (their
    concatenation; fewer bytes past the object's end), and, read in place, its pieces under its first
    checksum (``(checksum, pieces)``: the records the buffers are the pieces of)."""

    version: Version
    parts: list[memoryview]
    pieces: tuple[Pin, list[tuple[bytes | bytearray, int, int]]] | None = None

    @property
    def data(self) -> bytes | memoryview:
        return self.parts[0] if len(self.parts) == 1 else b"".join(self.parts)


def fetch(plans: Iterable[Planned], reader: ChunkReader) -> Iterator[tuple[_Call, list[Answer | None] | ZSError]]:
    """Each task's answers, one per planned range (None: nothing to read), or the error that ended it, in
    order; :data:`REQUESTS_IN_FLIGHT` tasks and at most :data:`BYTES_IN_FLIGHT` bytes ahead of the caller
    (:data:`LOCAL_AHEAD` for local files)."""

    def run(call: _Call) -> list[Answer | None] | ZSError:
        if not call.runs:
            return [None] * len(call.plans)
        where = f"virtual ranges of {call.location}"
        try:
            if reader.is_local(call.location):
                return _read_in_place(call, reader, where)
            pins = {pin for plan, _ in call.plans for pin in plan.wanted.pins}
            answers = reader.read_runs(call.location, call.runs, pins, where)
        except ZSError as exc:
            return exc
        out: list[Answer | None] = []
        for plan, r in call.plans:
            if r < 0:
                out.append(None)
                continue
            version, body = answers[r]
            at = plan.wanted.offset - call.runs[r][0]
            out.append(Answer(version, [memoryview(body)[at : at + plan.wanted.length]]))
        return out

    pending: collections.deque[tuple[_Call, Future]] = collections.deque()
    queued = 0
    with ThreadPoolExecutor(REQUESTS_IN_FLIGHT, thread_name_prefix="zsarchive-virtual") as pool:
        try:
            for call in _calls(plans, reader.is_local):
                ahead = LOCAL_AHEAD if reader.is_local(call.location) else BYTES_IN_FLIGHT
                while pending and (queued + call.size > ahead or len(pending) >= 4 * REQUESTS_IN_FLIGHT):
                    done, future = pending.popleft()
                    queued -= done.size
                    yield done, future.result()
                pending.append((call, pool.submit(run, call)))
                queued += call.size
            while pending:
                done, future = pending.popleft()
                yield done, future.result()
        finally:
            for _, future in pending:
                future.cancel()


def _read_in_place(call: _Call, reader: ChunkReader, where: str) -> list[Answer | None]:
    """A local file's planned ranges, each read straight into the records of its pieces under its first
    checksum (a virtual shard's, whose cuts its bytes tell, into a buffer of its own)."""
    reads: list[tuple[int, list[memoryview]]] = []
    ready: list[tuple[Pin, list[tuple[bytes | bytearray, int, int]]] | None] = []
    for plan, r in call.plans:
        group = plan.wanted
        if r < 0:
            continue
        if group.layout is None:
            starts = [group.offset + s for s in piece_starts(group.length)]
            pieces, views = empty_pieces(
                schema.VIRTUAL_DATA, group.key(group.pins[0]).encode(), starts, group.offset + group.length
            )
            ready.append((group.pins[0], pieces))
        else:
            views = [memoryview(bytearray(group.length))]
            ready.append(None)
        reads.append((group.offset, views))
    version, got = reader.read_local_into(call.location, reads, where)
    answers = iter(zip(reads, got, ready))
    out: list[Answer | None] = []
    for _, r in call.plans:
        if r < 0:
            out.append(None)
            continue
        (_, views), length, prepared = next(answers)
        if length < sum(map(len, views)):  # past the file's end: the bytes there, no pieces
            out.append(Answer(version, [memoryview(b"".join(views))[:length]]))
        else:
            out.append(Answer(version, views, prepared))
    return out


def range_records(
    group: RangeGroup, answer: Answer | ZSError, kept: KeptRanges, report: VirtualReport
) -> list[tuple[bytes | bytearray, int, int]]:
    """``(record, key length, piece length)`` of the ``E`` records a range's answer gives: pieces under the
    first checksum the answer satisfies (or an alias to a checksum the base keeps the same bytes under),
    aliases under the others; the rest reported in ``report``."""
    if not group.pins:
        return []
    if isinstance(answer, ZSError):
        report.fail(group.location, len(group.pins), str(answer))
        return []
    version = answer.version
    length = sum(map(len, answer.parts))
    if length != group.length:
        report.fail(
            group.location,
            len(group.pins),
            f"{group.where}: the object holds {length} bytes there, "
            f"the ref names {group.length} (a range past its end)",
        )
        return []
    good = []
    for pin in group.pins:
        why = version.differs(*pin)
        if why:
            report.fail(group.location, 1, f"{group.where}: changed since the virtual ref was written ({why})")
        else:
            good.append(pin)
    if not good:
        return []
    base_pins = kept.pins((group.location, group.offset, group.length))
    data = answer.data if base_pins or answer.pieces is None or answer.pieces[0] != good[0] else None
    target = next((pin for pin in base_pins if kept.read(group.key(pin)) == data), None)
    out: list[tuple[bytes | bytearray, int, int]] = []
    for pin in good:
        key = group.key(pin).encode()
        if target is None:
            target = pin
            if answer.pieces is not None and answer.pieces[0] == pin:
                out += answer.pieces[1]
            else:
                assert data is not None
                starts = [group.offset + s for s in piece_starts(group.length, _cuts(group, data))]
                out += owned_pieces(schema.VIRTUAL_DATA, key, data, starts, group.offset)
            report.kept += 1
            report.kept_bytes += group.length
        else:
            record = schema.record(schema.VIRTUAL_DATA, key, VirtualAliasValue(*target).encode())
            out.append((record, tuples.key_end(record), 0))
            report.aliases += 1
    return out


def _cuts(group: RangeGroup, data: bytes | memoryview) -> list[int]:
    """Where a reader reads a virtual shard on its own (its index, its inner chunks), from its start;
    nothing where the range is no shard or its index does not check out."""
    layout = group.layout
    if layout is None or layout.index_size > group.length:
        return []
    start, stop = layout.index_span(group.length)
    try:
        return layout.cuts(layout.entries(bytes(data[start:stop]), group.length, group.where), group.length)
    except ZSCorrupt:
        return []


def virtual_blocks(
    plans: Iterable[Planned],
    reader: ChunkReader,
    kept: KeptRanges,
    report: VirtualReport,
    stored: bool,
    progress: Callable[[int], None] | None = None,
) -> Iterator[PieceBlock]:
    """The blocks of ``E`` records of the planned ranges, in key order (``stored``: uncompressed);
    ``progress(bytes)`` after each range read."""

    def records() -> Iterator[tuple[bytes | bytearray, int, int]]:
        for call, answers in fetch(plans, reader):
            for i, (plan, _) in enumerate(call.plans):
                group = plan.wanted
                answer = answers if isinstance(answers, ZSError) else answers[i]
                found = [] if answer is None else range_records(group, answer, kept, report)
                if plan.copied:
                    copies = {rec for pin in plan.copied for rec in kept.records(group.key(pin))}
                    found = sorted(found + [(rec, tuples.key_end(rec), len(rec)) for rec in copies])
                yield from found
                if progress is not None and group.pins:
                    progress(group.length)

    return blocks_of(records(), stored)
