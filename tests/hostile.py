"""Running ``zs`` on hostile input: a fresh process under an address-space ceiling and a timeout, and
the one-line error every such run must end in."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from typing import Callable

MEMORY = 1 << 30  # address-space ceiling of every case: far above need, far below what a runaway read takes
TIMEOUT = 60


def _limits(memory: int, file_size: int | None) -> Callable[[], None]:
    def apply() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
        if file_size is not None:  # a write past it fails with EFBIG (Python ignores SIGXFSZ)
            resource.setrlimit(resource.RLIMIT_FSIZE, (file_size, file_size))
    return apply


def zs(*args: str, env: dict | None = None, memory: int = MEMORY, file_size: int | None = None,
       timeout: float = TIMEOUT) -> subprocess.CompletedProcess:
    """``zs ARGS`` in a fresh process under the memory ceiling and the timeout (``env``: added variables;
    ``file_size``: the largest file the process may write)."""
    return subprocess.run([sys.executable, "-m", "zsarchive", *args], capture_output=True, text=True,
                          timeout=timeout, preexec_fn=_limits(memory, file_size),
                          env=None if env is None else {**os.environ, **env})


def one_line_error(done: subprocess.CompletedProcess, *needles: str, foreseen: bool = True) -> str:
    """The single line of a failed run (exit 1, no traceback) holding every needle; a ``foreseen``
    failure is named as such, not reported as an unexpected one."""
    assert done.returncode == 1, (done.returncode, done.stderr[-2000:])
    assert "Traceback" not in done.stderr, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr[-2000:]
    for needle in needles:
        assert needle in lines[0], lines[0]
    assert foreseen != ("please report" in lines[0]), lines[0]
    return lines[0]


_REPORT_PEAK = """
import atexit, runpy, sys
path = sys.argv.pop(1)
def report():
    with open('/proc/self/status') as status, open(path, 'w') as out:
        out.write(''.join(line for line in status if line.startswith(('VmHWM', 'VmPeak'))))
atexit.register(report)
sys.argv[0] = 'zs'
runpy.run_module('zsarchive', run_name='__main__')
"""


def zs_peak(tmp_path, *args: str, env: dict | None = None, memory: int = MEMORY
            ) -> tuple[subprocess.CompletedProcess, int, int]:
    """``zs ARGS`` as :func:`zs` runs it, and the process's peak resident and peak virtual memory in
    bytes (Linux: VmHWM and VmPeak, read as it exits)."""
    report = tmp_path / f"peak-{os.getpid()}-{len(os.listdir(tmp_path))}"
    done = subprocess.run([sys.executable, "-c", _REPORT_PEAK, str(report), *args], capture_output=True,
                          text=True, timeout=TIMEOUT, preexec_fn=_limits(memory, None),
                          env={**os.environ, **(env or {})})
    fields = dict(line.split(":") for line in report.read_text().splitlines())
    return done, int(fields["VmHWM"].split()[0]) * 1024, int(fields["VmPeak"].split()[0]) * 1024
