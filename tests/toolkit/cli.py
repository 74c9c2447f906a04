"""Running ``zs`` as a user does: a fresh process, and the one-line error every failure must be."""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys
import time
from typing import Callable

MEMORY = 1 << 30  # address-space ceiling of a hostile case: far above need, far below what a runaway read takes
HOSTILE_TIMEOUT = 60  # seconds: every hostile case ends well within it
TIMEOUT = 300


def _limits(memory: int | None, file_size: int | None) -> Callable[[], None] | None:
    """The child's resource limits: address space ``memory``, largest file written ``file_size``."""
    if memory is None and file_size is None:
        return None

    def apply() -> None:
        if memory is not None:
            resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
        if file_size is not None:  # a write past it fails with EFBIG (Python ignores SIGXFSZ)
            resource.setrlimit(resource.RLIMIT_FSIZE, (file_size, file_size))

    return apply


def _environment(env: dict | None) -> dict | None:
    return None if env is None else {k: v for k, v in {**os.environ, **env}.items() if v is not None}


def run_zs(
    *args: str,
    env: dict | None = None,
    text: bool = True,
    input: str | bytes | None = None,
    limit_memory: bool = False,
    timeout: float = TIMEOUT,
    check: bool = False,
    memory: int | None = None,
    file_size: int | None = None,
) -> subprocess.CompletedProcess:
    """``zs ARGS`` in a fresh process (``env``: variables set in this one's, None removing one;
    ``limit_memory``: under the address-space ceiling ``MEMORY``, or ``memory`` bytes; ``file_size``:
    the largest file it may write; ``check``: it must succeed)."""
    done = subprocess.run(
        [sys.executable, "-m", "zsarchive", *args],
        capture_output=True,
        text=text,
        input=input,
        timeout=timeout,
        env=_environment(env),
        preexec_fn=_limits(memory or (MEMORY if limit_memory else None), file_size),
    )
    assert not check or done.returncode == 0, (args, done.returncode, done.stderr)
    return done


def run_hostile(
    *args: str,
    env: dict | None = None,
    memory: int = MEMORY,
    file_size: int | None = None,
    timeout: float = HOSTILE_TIMEOUT,
) -> subprocess.CompletedProcess:
    """``zs ARGS`` on hostile input: text output, under the memory ceiling and ``HOSTILE_TIMEOUT``."""
    return run_zs(*args, env=env, memory=memory, file_size=file_size, timeout=timeout)


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


def zs_peak(
    tmp_path, *args: str, env: dict | None = None, memory: int = MEMORY
) -> tuple[subprocess.CompletedProcess, int, int]:
    """``zs ARGS`` as :func:`run_hostile` runs it, and the process's peak resident and peak virtual
    memory in bytes (Linux: VmHWM and VmPeak, read as it exits)."""
    report = tmp_path / f"peak-{os.getpid()}-{len(os.listdir(tmp_path))}"
    done = subprocess.run(
        [sys.executable, "-c", _REPORT_PEAK, str(report), *args],
        capture_output=True,
        text=True,
        timeout=HOSTILE_TIMEOUT,
        preexec_fn=_limits(memory, None),
        env=_environment(env or {}),
    )
    fields = dict(line.split(":") for line in report.read_text().splitlines())
    return done, int(fields["VmHWM"].split()[0]) * 1024, int(fields["VmPeak"].split()[0]) * 1024


def one_line_error(done, *needles: str, foreseen: bool = True) -> str:
    """The single ``zs: error:`` line of a failed run (exit 1, no traceback) holding every needle; an
    unforeseen failure is instead the ``zs: internal error:`` line asking for a report. ``done``: a
    ``subprocess.CompletedProcess`` (text or bytes) or click's ``Result``."""
    if hasattr(done, "exit_code"):  # click's CliRunner
        status, stderr = done.exit_code, done.stderr
        assert done.exception is None or isinstance(done.exception, SystemExit), repr(done.exception)
    else:
        status, stderr = done.returncode, done.stderr
    if isinstance(stderr, bytes):
        stderr = stderr.decode(errors="replace")
    assert status == 1, (status, stderr[-2000:])
    assert "Traceback" not in stderr, stderr[-2000:]
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr[-2000:]
    assert lines[0].startswith("zs: error: " if foreseen else "zs: internal error: "), lines[0]
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    assert foreseen != ("please report" in lines[0]), lines[0]
    return lines[0]


def terminated(proc: subprocess.Popen, begun: Callable[[], bool], what: str = "zs") -> None:
    """Wait (up to 120 s) until ``begun()`` holds while ``proc`` (``zs`` with text stderr) runs, send it
    SIGTERM, and check that it ends as every writer must: exit status 143 and ``zs: terminated`` as its
    last line, no traceback."""
    try:
        deadline = time.monotonic() + 120
        while not begun():
            assert proc.poll() is None, f"{what} ended before it could be stopped: {proc.stderr.read()}"
            assert time.monotonic() < deadline, f"{what} never began writing"
            time.sleep(0.005)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 143 and err.strip().splitlines()[-1] == "zs: terminated", (proc.returncode, err)
    assert "Traceback" not in err, err
