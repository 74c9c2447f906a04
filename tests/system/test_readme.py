"""Every example of README.rst runs as printed on the bundled fixtures: each ``console`` block's commands
give the output printed under them, and each ``python`` block runs, in the README's order, in one
directory beside the clone's testdata/. A block after a ``.. readme-test: skip`` comment is not run."""

from __future__ import annotations

import os
import re
import subprocess
import sys

from zsarchive.icechunk.kinds import local_kind
from toolkit.places import ROOT

VARIES = [  # what genuinely differs from one run to the next: timings, the export time and the sizes it sways
    (re.compile(r"\d+\.\d+ s\b"), "N.NN s"),
    (re.compile(r"exported \S+"), "exported TIME"),
    (re.compile(r"\d[\d,]* bytes"), "N bytes"),
]


def blocks(text: str) -> list[tuple[str, str]]:
    """(language, body) of every code block to run, in order."""
    out = []
    skip = False
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.startswith(".. readme-test: skip"):
            skip = True
        match = re.match(r"\.\. code-block:: (\w+)", line)
        if not match:
            continue
        body = []
        for follow in lines[i + 2:]:
            if follow and not follow.startswith("   "):
                break
            body.append(follow[3:])
        if not skip and match.group(1) in ("console", "python"):
            out.append((match.group(1), "\n".join(body).strip("\n") + "\n"))
        skip = False
    return out


def normal(text: str) -> str:
    for pattern, replacement in VARIES:
        text = pattern.sub(replacement, text)
    return "\n".join(line.rstrip() for line in text.strip("\n").splitlines())


def test_readme_examples_run_as_printed(tmp_path):
    (tmp_path / "testdata").symlink_to(ROOT / "testdata")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "zs").write_text(f'#!/bin/sh\nexec "{sys.executable}" -m zsarchive "$@"\n')
    (bin_dir / "zs").chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    ran = {"console": 0, "python": 0}
    for language, body in blocks((ROOT / "README.rst").read_text()):
        ran[language] += 1
        if language == "python":
            done = subprocess.run([sys.executable, "-c", body], cwd=tmp_path, env=env, capture_output=True,
                                  text=True, timeout=300)
            assert done.returncode == 0, (body, done.stderr[-3000:])
            continue
        for command, expected in re.findall(r"^\$ (.*)\n((?:(?!\$ ).*\n)*)", body, re.M):
            done = subprocess.run(["bash", "-c", command], cwd=tmp_path, env=env,
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=300)
            assert done.returncode == 0, (command, done.stdout[-3000:])
            assert normal(done.stdout) == normal(expected), command
    assert ran["console"] >= 3 and ran["python"] >= 2, ran
    assert local_kind(tmp_path / "history.zs") == "zs"
