"""Scripts run by a real peer: an icechunk interpreter from the ``icechunk1_python`` /
``icechunk2_python`` fixtures."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from oracle import CLEAN_EXIT

TIMEOUT = 600  # seconds; the longest script writes a few hundred commits


def run_peer_script(python: Path, script: str, *args: str, env: dict | None = None,
                    timeout: float = TIMEOUT) -> str:
    """``script`` run by ``python`` with ``args``: its stdout; fails the test with the peer's stderr
    if the script fails."""
    done = subprocess.run([str(python), "-c", script + CLEAN_EXIT, *args], capture_output=True, text=True,
                          timeout=timeout, env=env)
    assert done.returncode == 0, f"peer script failed (exit {done.returncode}):\n{done.stderr[-3000:]}"
    return done.stdout


def run_peer_json(python: Path, script: str, *args: str, env: dict | None = None) -> dict:
    """``script`` run by ``python``: the JSON on the last line of its stdout."""
    return json.loads(run_peer_script(python, script, *args, env=env).strip().splitlines()[-1])
