"""How this process's C heap hands back memory: kept for reuse by commands that build and drop many
large buffers in turn (a restore decodes millions of records into columns, then encodes manifests)."""

from __future__ import annotations

import ctypes
import ctypes.util

_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
_M_ARENA_MAX = -8


def reuse_freed_memory(limit: int = 1 << 30) -> bool:
    """Ask glibc's allocator to serve blocks up to ``limit`` bytes from one heap shared by every thread and
    keep freed ones there, rather than mapping each large buffer anew, unmapping it when freed, and keeping
    what a reader thread freed for that thread alone: every fresh page costs a fault, and a restore of a
    million refs spent a third of its time in them. Call it before starting threads. False where this is
    not glibc."""
    name = ctypes.util.find_library("c")
    try:
        mallopt = ctypes.CDLL(name).mallopt
    except (OSError, AttributeError, TypeError):
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    return all([mallopt(_M_MMAP_THRESHOLD, limit), mallopt(_M_TRIM_THRESHOLD, limit), mallopt(_M_ARENA_MAX, 1)])
