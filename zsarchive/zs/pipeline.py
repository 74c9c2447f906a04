"""The block-read pipeline that the reader and the validator share.

Bytes come from a transport in few, large reads (runs of nearby blocks, or fixed windows of a
sequential walk) issued on an I/O thread ahead of their use; blocks are checked and decompressed
on decode threads (zlib, lzma and zstd release the GIL); results come back in file order. Every
stage keeps a bounded number of items in flight, so memory stays flat however long the scan.
"""

from __future__ import annotations

import os
import threading
from collections import deque
from typing import TYPE_CHECKING, Callable, Generator, Iterable, Iterator, Protocol, TypeVar

from zsarchive.errors import ZSError

if TYPE_CHECKING:  # a lookup runs no pool: concurrent.futures (and logging) load when a pool starts
    from concurrent.futures import Executor, Future, ThreadPoolExecutor

T = TypeVar("T")
R = TypeVar("R")

RUN_BYTES = 4 * 2**20
"""Largest single transport read of adjacent data blocks during a scan."""
FIRST_RUN_BYTES = 256 * 1024
"""The first read of a scan is small (quick first record); later runs double up to RUN_BYTES."""
GAP_BYTES = 64 * 1024
"""Index blocks between data blocks up to this size are read through rather than split a run."""
READ_THREADS = 2
"""Transport reads in flight at once: one being consumed, one on its way."""

_worker = threading.local()  # marks pipeline threads: work started on one runs serially (no deadlock)


def resolve_parallelism(parallelism: int | str, minimum: int = 1) -> int:
    """A worker count: an integer >= ``minimum`` as given, or ``"guess"``: the cores this process may use."""
    if parallelism == "guess":
        return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    if not isinstance(parallelism, int) or isinstance(parallelism, bool) or parallelism < minimum:
        what = "a positive integer" if minimum == 1 else f"an integer >= {minimum}"
        raise ZSError(f"parallelism must be {what} or 'guess', not {parallelism!r}")
    return parallelism


def in_worker() -> bool:
    """True on a pipeline thread, where a nested scan must not wait on the pools it runs in."""
    return getattr(_worker, "active", False)


def _mark_worker() -> None:
    _worker.active = True


class Pools:
    """The decode threads and read threads of one open file: made on first use, shut down once."""

    def __init__(self, parallelism: int, name: str = "zs") -> None:
        self._parallelism = parallelism
        self._name = name
        self._lock = threading.Lock()
        self._cpu: ThreadPoolExecutor | None = None
        self._io: ThreadPoolExecutor | None = None
        self.closed = False

    def get(self) -> tuple[ThreadPoolExecutor, ThreadPoolExecutor]:
        """``(decode pool, read pool)``; raises CancelledError once closed."""
        from concurrent.futures import CancelledError, ThreadPoolExecutor

        with self._lock:
            if self.closed:
                raise CancelledError
            if self._cpu is None:
                self._cpu = ThreadPoolExecutor(self._parallelism, f"{self._name}-decode", initializer=_mark_worker)
                self._io = ThreadPoolExecutor(READ_THREADS, f"{self._name}-read", initializer=_mark_worker)
            return self._cpu, self._io  # type: ignore[return-value]

    def close(self) -> None:
        """Cancel queued work and stop the threads (without waiting when called from one of them)."""
        with self._lock:
            if self.closed:
                return
            self.closed = True
            pools = [p for p in (self._cpu, self._io) if p is not None]
        for pool in pools:
            pool.shutdown(wait=not in_worker(), cancel_futures=True)


def ordered(
    items: Iterable[T], fn: Callable[[T], R], pool: Executor | None, depth: int
) -> Generator[tuple[T, R], None, None]:
    """Yield ``(item, fn(item))`` in the order of ``items``, with ``fn`` running on ``pool`` and at
    most ``depth`` results waiting ahead of the consumer (``pool`` None: in the calling thread).

    If taking the next item raises, the results of the items before it come first: an error
    further on must not hide one in an earlier block.
    """
    if pool is None:
        for item in items:
            yield item, fn(item)
        return
    pending: deque[tuple[T, Future]] = deque()
    source = iter(items)
    try:
        while True:
            try:
                item = next(source)
            except StopIteration:
                break
            except BaseException:
                while pending:
                    first, fut = pending.popleft()
                    yield first, fut.result()
                raise
            pending.append((item, pool.submit(fn, item)))
            while len(pending) > depth:
                first, fut = pending.popleft()
                yield first, fut.result()
        while pending:
            first, fut = pending.popleft()
            yield first, fut.result()
    finally:
        for _, fut in pending:
            fut.cancel()


class Extent(Protocol):
    """Where a block lies in the file."""

    offset: int
    length: int


E = TypeVar("E", bound=Extent)


def runs(extents: Iterable[E]) -> Iterator[tuple[list[E], bool]]:
    """Group extents in file order into runs of nearby blocks, one transport read each (runs
    double in size from FIRST_RUN_BYTES up to RUN_BYTES); flag the final run."""
    run: list[E] = []
    run_start = 0
    limit = FIRST_RUN_BYTES
    for ext in extents:
        if run:
            end = run[-1].offset + run[-1].length
            if not end <= ext.offset <= end + GAP_BYTES or ext.offset + ext.length - run_start > limit:
                yield run, False
                run, limit = [], min(2 * limit, RUN_BYTES)
        if not run:
            run_start = ext.offset
        run.append(ext)
    if run:
        yield run, True


class Window:
    """Bytes [start, end) of a source read in order through windows of ``window`` bytes, each
    fetched ahead on ``pool`` (None: on demand), at most ``depth`` waiting past the one in use."""

    def __init__(
        self, read: Callable[[int, int], bytes], start: int, end: int, window: int, pool: Executor | None, depth: int
    ) -> None:
        spans = ((at, min(window, end - at)) for at in range(start, end, window))
        self._windows = ordered(spans, lambda span: read(*span), pool, depth)
        self._buf, self._buf_at = b"", start

    def get(self, offset: int, length: int) -> bytes:
        """Bytes [offset, offset + length) (fewer only at the end); ``offset`` never goes below an
        earlier call's."""
        if offset + length > self._buf_at + len(self._buf):
            parts = [self._buf[offset - self._buf_at :]]
            have = self._buf_at + len(self._buf) - offset
            while have < length:
                item = next(self._windows, None)
                if item is None:
                    break
                parts.append(item[1])
                have += len(item[1])
            self._buf, self._buf_at = b"".join(parts), offset
        return self._buf[offset - self._buf_at : offset - self._buf_at + length]

    def close(self) -> None:
        """Stop fetching: windows not yet asked for are cancelled."""
        self._windows.close()
