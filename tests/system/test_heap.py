"""zsarchive.heap: a process that asked to reuse freed memory touches fresh pages once, not per buffer,
and reuses in one thread what another thread freed; a buffer a read fills whole is not zeroed first."""

from __future__ import annotations

import subprocess
import sys

FAULTS = """
import resource, sys, threading
from zsarchive.heap import reuse_freed_memory
if sys.argv[1] == "reuse":
    assert reuse_freed_memory()
def faults():
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt
if sys.argv[2] == "turns":  # buffers made and dropped in turn, on one thread
    buf = bytearray(64 << 20); del buf  # the first buffer's pages are fresh either way
    before = faults()
    for _ in range(4):
        buf = bytearray(64 << 20); del buf
else:  # a reader thread's blocks dropped, then the main thread's columns made
    pieces = []
    worker = threading.Thread(target=lambda: pieces.extend(bytearray(1 << 20) for _ in range(64)))
    worker.start(); worker.join()
    pieces.clear()
    before = faults()
    columns = [bytearray(1 << 20) for _ in range(64)]
print(faults() - before)
"""


def _faults(mode: str, pattern: str) -> int:
    out = subprocess.run([sys.executable, "-c", FAULTS, mode, pattern], check=True, capture_output=True, text=True)
    return int(out.stdout)


def test_freed_buffers_are_reused_without_new_page_faults():
    """Four more 64 MiB buffers in turn: about 64 K page faults mapped anew each time, next to none kept."""
    assert _faults("default", "turns") > 4 * 10_000
    assert _faults("reuse", "turns") < 2_000


def test_what_a_thread_freed_serves_the_main_thread():
    """64 MiB that a reader thread made and dropped: the main thread's next 64 MiB fault fresh pages
    (about 16 K) unless every thread shares one heap."""
    assert _faults("default", "threads") > 10_000
    assert _faults("reuse", "threads") < 2_000


UNFILLED = """
import sys
from zsarchive.heap import reuse_freed_memory, unfilled_bytearray
assert reuse_freed_memory()
if sys.argv[1] == "reused":  # what a freed buffer held is what the next one of its size starts with
    old = bytearray(b"\\xa5" * (16 << 20)); del old
    new = unfilled_bytearray(16 << 20)
    print(new.count(0xA5) / len(new))
else:  # 2 GiB made and dropped a MiB at a time: each one freed, none kept by a stray reference
    for _ in range(2048):
        piece = unfilled_bytearray(1 << 20)
        piece[:4] = b"abcd"
        assert type(piece) is bytearray and len(piece) == 1 << 20 and piece[:4] == b"abcd"
    # the peak of this program's memory (ru_maxrss would count the parent's, which a fork inherits)
    print(next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM:")) >> 10)
"""


def _unfilled(mode: str) -> float:
    out = subprocess.run([sys.executable, "-c", UNFILLED, mode], check=True, capture_output=True, text=True)
    return float(out.stdout)


def test_an_unfilled_bytearray_is_not_zeroed_before_the_read_fills_it():
    """The memory a dropped 16 MiB buffer held comes back as it was, not cleared byte by byte."""
    assert _unfilled("reused") > 0.99


def test_unfilled_bytearrays_are_freed_like_any_other():
    """2 GiB of 1 MiB buffers made and dropped in turn: the process never holds more than a few of them."""
    assert _unfilled("many") < 128
