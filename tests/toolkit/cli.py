"""Running ``zs`` as a user does: a fresh process, and the one-line error every failure must be."""

from __future__ import annotations

import os
import resource
import subprocess
import sys

MEMORY = 1 << 30  # address-space ceiling of a hostile case: far above need, far below what a runaway read takes
HOSTILE_TIMEOUT = 60  # seconds: every hostile case ends well within it
TIMEOUT = 300


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY, MEMORY))


def run_zs(*args: str, env: dict | None = None, text: bool = True, input: str | bytes | None = None,
           limit_memory: bool = False, timeout: float = TIMEOUT, check: bool = False) -> subprocess.CompletedProcess:
    """``zs ARGS`` in a fresh process (``env``: variables set in this one's, None removing one;
    ``limit_memory``: under the address-space ceiling ``MEMORY``; ``check``: it must succeed)."""
    if env is not None:
        env = {k: v for k, v in {**os.environ, **env}.items() if v is not None}
    done = subprocess.run([sys.executable, "-m", "zsarchive", *args], capture_output=True, text=text,
                          input=input, timeout=timeout, preexec_fn=_limit_memory if limit_memory else None, env=env)
    assert not check or done.returncode == 0, (args, done.returncode, done.stderr)
    return done


def run_hostile(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    """``zs ARGS`` on hostile input: text output, under the memory ceiling and ``HOSTILE_TIMEOUT``."""
    return run_zs(*args, env=env, limit_memory=True, timeout=HOSTILE_TIMEOUT)


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
