"""How this process's C heap (glibc's allocator) hands back memory: kept for reuse by commands that build and
drop many large buffers in turn (a restore decodes millions of records into columns, then encodes
manifests), and on the heap while a cluster task runs. Elsewhere than glibc, nothing changes."""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import functools
import os
import threading
from typing import Any, Callable, Iterator

_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
_M_ARENA_MAX = -8
_GLIBC_DEFAULT_MMAP_THRESHOLD = 128 * 1024


@functools.cache
def _mallopt() -> Callable[[int, int], Any] | None:
    """glibc's ``mallopt`` (loaded on first use), or None where there is none."""
    try:
        mallopt = ctypes.CDLL(ctypes.util.find_library("c")).mallopt
    except (OSError, AttributeError, TypeError):
        return None
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    return mallopt


def reuse_freed_memory(limit: int = 1 << 30) -> bool:
    """Ask glibc's allocator to serve blocks up to ``limit`` bytes from one heap shared by every thread and
    keep freed ones there, rather than mapping each large buffer anew, unmapping it when freed, and keeping
    what a reader thread freed for that thread alone: every fresh page costs a fault, and a restore of a
    million refs spent a third of its time in them. Call it before starting threads. False where this is
    not glibc."""
    mallopt = _mallopt()
    if mallopt is None:
        return False
    return all([mallopt(_M_MMAP_THRESHOLD, limit), mallopt(_M_TRIM_THRESHOLD, limit), mallopt(_M_ARENA_MAX, 1)])


@functools.cache
def _bytearray_from() -> Callable[[bytes | None, int], bytearray] | None:
    """CPython's ``PyByteArray_FromStringAndSize`` (loaded on first use), or None where there is none."""
    try:
        function = ctypes.pythonapi.PyByteArray_FromStringAndSize
    except AttributeError:
        return None
    function.argtypes = (ctypes.c_char_p, ctypes.c_ssize_t)
    function.restype = ctypes.py_object
    return function


def unfilled_bytearray(size: int) -> bytearray:
    """A bytearray of ``size`` bytes holding whatever its memory held before, for a read to fill whole:
    ``bytearray(size)`` first zeroes every byte, a pass over the memory that a gigabyte of reads pays
    again (~0.1 s). Zeroed where the interpreter is not CPython."""
    function = _bytearray_from()
    return bytearray(size) if function is None else function(None, size)


_heap_users = 0
_heap_lock = threading.Lock()


@contextlib.contextmanager
def large_allocations_on_the_heap() -> Iterator[None]:
    """While the block runs, let glibc keep allocations up to 32 MiB on the heap. A dask nanny starts its
    worker with MALLOC_TRIM_THRESHOLD_ set, which also freezes glibc's mmap threshold at 128 KiB, so
    every larger array or buffer a task makes is mapped and unmapped afresh: a 250,000-ref task took
    0.47 s instead of 0.26 s. The worker's own settings are back once no such block runs."""
    global _heap_users
    mallopt = _mallopt()
    if mallopt is None or "MALLOC_TRIM_THRESHOLD_" not in os.environ:  # glibc adapts on its own
        yield
        return
    with _heap_lock:
        _heap_users += 1
        mallopt(_M_MMAP_THRESHOLD, 32 << 20)
    try:
        yield
    finally:
        with _heap_lock:
            _heap_users -= 1
            if not _heap_users:
                mallopt(_M_MMAP_THRESHOLD, int(os.environ.get("MALLOC_MMAP_THRESHOLD_", _GLIBC_DEFAULT_MMAP_THRESHOLD)))
