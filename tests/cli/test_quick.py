"""A plain ``zs chunk ARCHIVE REF PATH COORDS --json`` is answered without importing click
(zsarchive/cli/quick.py), and only where click's own ``chunk`` command gives the same answer: each command
line here prints the same output and errors, with the same exit status, both ways."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from toolkit.places import TESTDATA

VECTOR = str(TESTDATA / "archive" / "v6" / "archive.zs")

PROGRAM = (
    "import sys\nfrom zsarchive.cli import run\ntry:\n    run()\n"
    "finally:\n    print('click' in sys.modules, file=sys.stderr)"
)
"""The ``zs`` program, saying last on stderr whether it imported click."""
CLICK = "from zsarchive.cli import main\nmain()"
"""The click group alone, as every command line was answered before the quick lookup."""

QUICK = [
    ["chunk", VECTOR, "main", "/data/big", "0,1", "--json"],  # native
    ["chunk", "--json", VECTOR, "main", "/data/c+f", "0"],  # inline (its bytes are not in JSON), the flag first
    ["chunk", VECTOR, "main", "--json", "/data/sub/virt", "1"],  # virtual
    ["chunk", VECTOR, "main", "/scalar", "", "--json"],  # the chunk of a 0-d array
    ["chunk", VECTOR, "main", "/data/ünï côde", "0", "--json"],
    ["chunk", VECTOR, "v1.0", "/data/big", "1,1", "--json"],
]
"""Command lines the quick lookup answers."""

CLICK_ANSWERS = [
    ["chunk", VECTOR, "main", "/data/big", "0,1"],  # a table
    ["chunk", VECTOR, "main", "/data/big", "0,1", "--json", "--json"],
    ["chunk", VECTOR, "main", "/data/big", "0,1", "--json", "--data"],
    ["chunk", VECTOR, "main", "/data/big", "0,1", "--json", "--authorize", "file:///"],
    ["chunk", VECTOR, "main", "/data/big", "--json"],  # an argument missing
    ["chunk", VECTOR, "main", "/data/big", "0,1", "extra", "--json"],
    ["chunk", "--", VECTOR, "main", "/data/big", "0,1", "--json"],
    ["chunk", VECTOR, "main", "/data/big", "-1,0", "--json"],
    ["chunk", VECTOR, "main", "/data/big", "0,-1", "--json"],  # what is wrong comes from click
    ["chunk", VECTOR, "main", "/data/big", "a,b", "--json"],
    ["chunk", VECTOR, "main", "/data/big", "0", "--json"],  # a dimension short
    ["chunk", VECTOR, "main", "/data/big", "9,9", "--json"],  # outside the grid
    ["chunk", VECTOR, "main", "/data/sub", "0", "--json"],  # a group
    ["chunk", VECTOR, "main", "/data/bigg", "0,0", "--json"],  # no such array (a suggestion follows)
    ["chunk", VECTOR, "nope", "/data/big", "0,0", "--json"],
    ["chunk", VECTOR + ".missing", "main", "/data/big", "0,0", "--json"],
    ["chunk", str(TESTDATA / "archive" / "v6" / "records.json"), "main", "/data/big", "0,0", "--json"],
    ["--debug", "chunk", VECTOR, "main", "/data/big", "0,1", "--json"],
]
"""Command lines left to click: not of the plain form, or a lookup that fails."""


def _zs(script: str, args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", script, *args], capture_output=True, env={**os.environ, **env})


@pytest.mark.parametrize(
    "args, quick, env",
    [(a, True, {}) for a in QUICK]
    + [(a, False, {}) for a in CLICK_ANSWERS]
    + [(QUICK[4], False, {"PYTHONIOENCODING": "ascii"})],
)  # click re-encodes such an output
def test_the_quick_lookup_answers_as_click_does(args, quick, env):
    program, alone = _zs(PROGRAM, args, env), _zs(CLICK, args, env)
    *errors, imported = program.stderr.decode().splitlines()
    assert imported == str(not quick), program.stderr
    assert (program.returncode, program.stdout, "".join(line + "\n" for line in errors)) == (
        alone.returncode,
        alone.stdout,
        alone.stderr.decode(),
    ), args
    if quick:
        assert program.returncode == 0 and program.stdout.count(b"\n") == 1 and program.stdout.startswith(b'{"path"')
