"""Live answers of the real icechunk about the committed fixture repositories.

``oracle(version, python)`` runs ``scripts/icechunk_oracle.py`` under the given icechunk
interpreter (take it from the ``icechunk1_python`` / ``icechunk2_python`` fixtures) and caches
the parsed JSON for the rest of the test session.
"""

from __future__ import annotations

import json
import subprocess
from functools import lru_cache
from pathlib import Path
from toolkit.places import ROOT

ICECHUNK_TESTDATA = ROOT / "testdata" / "icechunk"
ORACLE_SCRIPT = ROOT / "scripts" / "icechunk_oracle.py"
TIMEOUT = 300  # seconds; the oracle needs about one on this machine


def fixtures() -> dict:
    """The facts ``testdata/icechunk/fixtures.json`` records about the fixture repositories."""
    return json.loads((ICECHUNK_TESTDATA / "fixtures.json").read_text())


def repo_path(version: int, name: str | None = None) -> Path:
    """The committed repository written by icechunk ``version``.x (spec V``version``), or the
    fixture called ``name`` (e.g. ``"v1-migrated"``: icechunk 2.x upgraded the V1 repository)."""
    return ICECHUNK_TESTDATA / (name or f"v{version}")


def virtual_mapping() -> dict[str, Path]:
    """Virtual chunk URL prefix -> the directory of this clone holding the bytes it names."""
    virtual = fixtures()["virtual"]
    return {virtual["prefix"]: ICECHUNK_TESTDATA / virtual["directory"]}


def _run(python: Path, repo: Path, mapping: dict[str, Path]) -> bytes:
    cmd = [str(python), str(ORACLE_SCRIPT), str(repo)]
    for prefix, directory in mapping.items():
        cmd += ["--virtual-prefix", f"{prefix}={directory}"]
    proc = subprocess.run(cmd, capture_output=True, timeout=TIMEOUT)
    if proc.returncode != 0:
        tail = proc.stderr.decode(errors="replace")[-3000:]
        raise RuntimeError(f"icechunk oracle failed on {repo} (exit {proc.returncode}):\n{tail}")
    return proc.stdout


CLEAN_EXIT = (
    "\nimport os as _os, sys as _sys\n_sys.stdout.flush(); _sys.stderr.flush()\n"
    "_os._exit(0)  # icechunk 2.3 sometimes crashes in its own shutdown, after the work is done\n"
)
"""Appended to a script run by an icechunk peer."""


def run_oracle(python: Path, repo: Path, mapping: dict[str, Path]) -> dict:
    """Run the oracle script on any repository; raise with icechunk's stderr if it fails."""
    return json.loads(_run(python, repo, mapping))


@lru_cache(maxsize=None)
def _cached(version: int, python: Path, name: str | None) -> bytes:
    return _run(python, repo_path(version, name), virtual_mapping())


def oracle(version: int, python: Path, name: str | None = None) -> dict:
    """Everything icechunk ``version``.x says about the committed fixture repository (or ``name``).

    The subprocess runs once per session; each call gets its own copy, so a test that edits
    the answer cannot change what the next test sees.
    """
    return json.loads(_cached(version, python, name))
