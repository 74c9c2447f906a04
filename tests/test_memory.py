"""zsarchive.io.memory: a process that asked to reuse freed memory touches fresh pages once, not per buffer."""

from __future__ import annotations

import subprocess
import sys

FAULTS = """
import resource, sys
from zsarchive.io.memory import reuse_freed_memory
if sys.argv[1] == "reuse":
    assert reuse_freed_memory()
def faults():
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt
buf = bytearray(64 << 20); del buf  # the first buffer's pages are fresh either way
before = faults()
for _ in range(4):
    buf = bytearray(64 << 20); del buf
print(faults() - before)
"""


def _faults(mode: str) -> int:
    out = subprocess.run([sys.executable, "-c", FAULTS, mode], check=True, capture_output=True, text=True)
    return int(out.stdout)


def test_freed_buffers_are_reused_without_new_page_faults():
    """Four more 64 MiB buffers in turn: about 64 K page faults mapped anew each time, next to none kept."""
    assert _faults("default") > 4 * 10_000
    assert _faults("reuse") < 2_000
