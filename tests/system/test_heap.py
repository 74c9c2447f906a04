"""zsarchive.heap: a process that asked to reuse freed memory touches fresh pages once, not per buffer,
and reuses in one thread what another thread freed."""

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
