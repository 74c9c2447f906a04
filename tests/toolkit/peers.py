"""Scripts run by a real peer: an icechunk interpreter from the ``icechunk1_python`` /
``icechunk2_python`` fixtures."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from toolkit.oracle import CLEAN_EXIT, ROOT

TIMEOUT = 600  # seconds; the longest script writes a few hundred commits
GENERATOR = ROOT / "scripts" / "random_icechunk_repo.py"
"""The random-repository generator: a history of random commits written by the real icechunk."""


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


def generate(python: Path, out: Path, seed: int) -> dict:
    """The random repository of ``seed`` written by ``python``'s icechunk into ``out/repo``: the
    generator's report (virtual prefix and directory, deleted tags, ...)."""
    proc = subprocess.run([str(python), str(GENERATOR), str(out), "--seed", str(seed)], capture_output=True,
                          timeout=TIMEOUT)
    if proc.returncode:
        raise RuntimeError(f"generator failed for seed {seed}:\n{proc.stderr.decode(errors='replace')[-3000:]}")
    return json.loads(proc.stdout)
