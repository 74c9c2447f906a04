"""What every network transport shares: request counters, range coalescing and concurrent batches.

A network read costs a round trip, so remote transports answer from bytes they already hold
(the head and tail fetched at open, or a whole body a server sent unasked), merge nearby ranges
into one request, and run independent requests concurrently on a bounded pool.
"""

from __future__ import annotations

import threading
from abc import abstractmethod
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Sequence

from zsarchive.io.base import Transport


@dataclass
class RequestStats:
    """Counters of one remote transport: requests sent, body bytes received, connections, retries."""

    requests: int = 0
    bytes: int = 0
    connections: int = 0
    retries: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def add(self, *, requests: int = 0, bytes: int = 0, connections: int = 0, retries: int = 0) -> None:
        """Add to the counters atomically (transports count from several threads)."""
        with self._lock:
            self.requests += requests
            self.bytes += bytes
            self.connections += connections
            self.retries += retries

    def snapshot(self) -> dict[str, int]:
        """The counters as a plain dict (handy for differences in tests and benchmarks)."""
        with self._lock:
            return {
                "requests": self.requests,
                "bytes": self.bytes,
                "connections": self.connections,
                "retries": self.retries,
            }


@dataclass(frozen=True)
class Run:
    """One request covering several wanted ranges: bytes [start, start + length)."""

    start: int
    length: int
    members: tuple[int, ...]  # indexes into the caller's list of ranges


def coalesce(ranges: Sequence[tuple[int, int]], gap: int, limit: int) -> list[Run]:
    """Group ``(offset, length)`` ranges into runs: ranges closer than ``gap`` bytes share a request
    unless that request would exceed ``limit`` bytes (a single larger range keeps its own run)."""
    order = sorted(range(len(ranges)), key=lambda i: ranges[i][0])
    runs: list[Run] = []
    start = end = 0
    members: list[int] = []
    for i in order:
        offset, length = ranges[i]
        if members and offset - end <= gap and max(end, offset + length) - start <= limit:
            end = max(end, offset + length)
            members.append(i)
            continue
        if members:
            runs.append(Run(start, end - start, tuple(members)))
        start, end, members = offset, offset + length, [i]
    if members:
        runs.append(Run(start, end - start, tuple(members)))
    return runs


class RemoteTransport(Transport):
    """A Transport whose reads are requests: subclasses implement ``_fetch`` (one request of exactly
    one range) and ``_open`` (learn size, pin the object, return head and tail)."""

    #: ranges at most this far apart share one request in read_ranges (a round trip costs more)
    coalesce_gap = 64 * 1024
    #: the largest request read_ranges builds by merging
    coalesce_limit = 8 * 1024 * 1024

    def __init__(self, name: str, max_workers: int) -> None:
        self.name = name
        self.stats = RequestStats()
        self._size: int | None = None
        self._held: list[tuple[int, bytes]] = []  # (offset, bytes) already received and kept
        self._open_lock = threading.Lock()
        self._max_workers = max_workers
        self._workers: ThreadPoolExecutor | None = None
        self._executor_lock = threading.Lock()

    # Read-only here, learned from the first answer; a plain attribute for transports that know it on opening.
    @property
    def size(self) -> int:  # type: ignore[override]
        """Length of the object; learned from the first answer (asks the server if none came yet)."""
        if self._size is None:
            self.read_head_tail(0, 0)
        assert self._size is not None
        return self._size

    @abstractmethod
    def _open(self, head: int, tail: int) -> tuple[int, bytes, bytes]:
        """Learn (size, head bytes, tail bytes) with as few round trips as possible and pin the object."""

    @abstractmethod
    def _fetch(self, offset: int, length: int) -> bytes:
        """One request for exactly ``length`` bytes at ``offset`` of the pinned object."""

    def read_head_tail(self, head: int, tail: int) -> tuple[bytes, bytes]:
        with self._open_lock:
            if self._size is None:
                size, head_bytes, tail_bytes = self._open(head, tail)
                self._size = size
                self._hold(0, head_bytes)
                self._hold(size - len(tail_bytes), tail_bytes)
                return head_bytes, tail_bytes
        head, tail = min(head, self._size), min(tail, self._size)
        return self.read(0, head), self.read(self._size - tail, tail)

    def _hold(self, offset: int, data: bytes) -> None:
        """Keep bytes already received so that reads inside them cost no request."""
        if data:
            self._held.append((offset, data))

    def _from_held(self, offset: int, length: int) -> bytes | None:
        for start, data in self._held:
            if start <= offset and offset + length <= start + len(data):
                return data[offset - start : offset - start + length]
        return None

    def read(self, offset: int, length: int) -> bytes:
        self._check_range(offset, length)
        if length == 0:
            return b""
        held = self._from_held(offset, length)
        return held if held is not None else self._fetch(offset, length)

    def read_ranges(self, ranges: Sequence[tuple[int, int]]) -> list[bytes]:
        """Read several ranges: nearby ones merged into one request, requests run concurrently."""
        results: list[bytes | None] = [None] * len(ranges)
        wanted: list[int] = []
        for i, (offset, length) in enumerate(ranges):
            self._check_range(offset, length)
            held = self._from_held(offset, length) if length else b""
            if held is None:
                wanted.append(i)
            else:
                results[i] = held
        runs = coalesce([ranges[i] for i in wanted], self.coalesce_gap, self.coalesce_limit)
        bodies = self._fetch_many([(run.start, run.length) for run in runs])
        for run, body in zip(runs, bodies):
            for member in run.members:
                i = wanted[member]
                offset, length = ranges[i]
                results[i] = body[offset - run.start : offset - run.start + length]
        return results  # type: ignore[return-value]

    def _fetch_many(self, ranges: list[tuple[int, int]]) -> list[bytes]:
        """Several ``_fetch`` at once (threads, bounded); transports that can do better override."""
        if len(ranges) <= 1:
            return [self._fetch(offset, length) for offset, length in ranges]
        return list(self._executor().map(lambda r: self._fetch(*r), ranges))

    def _executor(self) -> ThreadPoolExecutor:
        with self._executor_lock:
            if self._workers is None:
                self._workers = ThreadPoolExecutor(self._max_workers, thread_name_prefix="zs-remote")
            return self._workers

    def close(self) -> None:
        with self._executor_lock:
            if self._workers is not None:
                self._workers.shutdown(wait=True)
                self._workers = None
