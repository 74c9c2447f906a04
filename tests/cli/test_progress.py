"""Progress bars: one helper draws every command's (zsarchive/cli/text.py), on stderr, only when stderr is
a terminal; a command run with its stderr on a pseudo-terminal shows its bar, one run into a pipe prints none."""

from __future__ import annotations

import ast
import os
import pty
import subprocess
import sys
from pathlib import Path

import zsarchive

from toolkit.places import TESTDATA

PACKAGE = Path(zsarchive.__file__).parent


def test_only_the_helper_makes_a_progress_bar():
    makers = [f"{path.relative_to(PACKAGE.parent)}:{node.lineno}" for path in sorted(PACKAGE.rglob("*.py"))
              if path != PACKAGE / "cli" / "text.py"
              for node in ast.walk(ast.parse(path.read_text(), str(path)))
              if isinstance(node, ast.Attribute) and node.attr == "progressbar"]
    assert makers == []


def _zs_stderr(args: list[str], terminal: bool) -> str:
    """What ``zs ARGS`` writes on stderr, given a pseudo-terminal or a pipe as its stderr."""
    if not terminal:
        return subprocess.run([sys.executable, "-m", "zsarchive", *args], capture_output=True, text=True,
                              timeout=120).stderr
    leader, follower = pty.openpty()
    try:
        proc = subprocess.Popen([sys.executable, "-m", "zsarchive", *args], stdout=subprocess.DEVNULL,
                                stderr=follower)
        os.close(follower)
        out = b""
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # the follower side closed
                break
            if not chunk:
                break
            out += chunk
        assert proc.wait(timeout=120) == 0, out
        return out.decode(errors="replace")
    finally:
        os.close(leader)


def test_a_terminal_gets_the_bar_and_a_pipe_does_not(tmp_path):
    records = tmp_path / "records.txt"
    records.write_text("".join(f"{i:08d}\n" for i in range(20000)))
    shown = _zs_stderr(["make", "{}", str(records), str(tmp_path / "a.zs")], terminal=True)
    assert "zs make" in shown and "100%" in shown
    assert "zs make" not in _zs_stderr(["make", "{}", str(records), str(tmp_path / "b.zs")], terminal=False)
    archive = str(TESTDATA / "archive" / "v6" / "archive.zs")
    assert "validating" in _zs_stderr(["validate", archive], terminal=True)
    assert "dumping" in _zs_stderr(["dump", archive, "-o", str(tmp_path / "dump.bin")], terminal=True)
