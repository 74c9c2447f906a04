"""Every example of README.rst runs as printed on the bundled fixtures: each ``console`` block's commands
give the output printed under them, and each ``python`` block runs, in the README's order, in one
directory beside the clone's testdata/. A block after a ``.. readme-test: skip`` comment is not run. A
block after ``.. readme-test: crontab`` is a crontab whose commands run, and one after ``.. readme-test:
systemd NAME`` a unit file that systemd's own ``systemd-analyze verify`` accepts and whose ``ExecStart``
runs: both with the example's repository and bucket (:data:`STAND_INS`) replaced by the bundled ones."""

from __future__ import annotations

import collections
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

from zsarchive.icechunk.kinds import local_kind
from toolkit.places import ROOT

VARIES = [  # what genuinely differs from one run to the next: timings, the export time and the sizes it sways
    (re.compile(r"\d+\.\d+ s\b"), "N.NN s"),
    (re.compile(r"exported \S+"), "exported TIME"),
    (re.compile(r"\d[\d,]* bytes"), "N bytes"),
    (re.compile(r"\d{4}-\d{2}-\d{2}T\d{6}Z"), "TIME"),  # a backup set's archive names: the time they were made
]
STAND_INS = {"s3://lab/era5.icechunk": "testdata/icechunk/v2", "s3://lab-backups/era5/": "backups"}
"""What the scheduled examples back up, and where, as the README test runs them."""


def blocks(text: str) -> list[tuple[str, str]]:
    """(language, body) of every code block to run, in order."""
    out = []
    skip = False
    marked = None
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.startswith(".. readme-test: skip"):
            skip = True
        found = re.match(r"\.\. readme-test: (crontab|systemd \S+)$", line)
        if found:
            marked = found.group(1)
        match = re.match(r"\.\. code-block:: (\w+)", line)
        if not match:
            continue
        body = []
        for follow in lines[i + 2 :]:
            if follow and not follow.startswith("   "):
                break
            body.append(follow[3:])
        if not skip and (marked or match.group(1) in ("console", "python")):
            out.append((marked or match.group(1), "\n".join(body).strip("\n") + "\n"))
        skip, marked = False, None
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
    env = {
        **os.environ,
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    ran: dict[str, int] = collections.Counter()
    for language, body in blocks((ROOT / "README.rst").read_text()):
        ran[language] += 1
        if language == "python":
            done = subprocess.run(
                [sys.executable, "-c", body], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
            )
            assert done.returncode == 0, (body, done.stderr[-3000:])
            continue
        if language in ("crontab",) or language.startswith("systemd"):
            scheduled(language, body, tmp_path, bin_dir, env)
            continue
        for command, expected in re.findall(r"^\$ (.*)\n((?:(?!\$ ).*\n)*)", body, re.M):
            done = subprocess.run(
                ["bash", "-c", command],
                cwd=tmp_path,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                timeout=300,
            )
            assert done.returncode == 0, (command, done.stdout[-3000:])
            assert normal(done.stdout) == normal(expected), command
    assert ran["console"] >= 3 and ran["python"] >= 2, ran
    assert ran["crontab"] == 1 and sum(n for kind, n in ran.items() if kind.startswith("systemd")) == 2, ran
    assert local_kind(tmp_path / "history.zs") == "zs"


def _stand_ins(command: str) -> str:
    for example, bundled in STAND_INS.items():
        command = command.replace(example, bundled)
    return command


def scheduled(kind: str, body: str, where: Path, bin_dir: Path, env: dict) -> None:
    """A crontab's commands, or a unit file's ``ExecStart``, run where the README's examples run; a unit
    file checked by ``systemd-analyze verify`` first."""
    if kind == "crontab":
        commands = [line.split(None, 5)[5] for line in body.splitlines() if line.strip() and not line.startswith("#")]
    else:
        unit = where / "units" / kind.split()[1]
        unit.parent.mkdir(exist_ok=True)
        unit.write_text(body.replace("/usr/local/bin/zs", str(bin_dir / "zs")))
        if unit.suffix == ".timer":  # verified beside its service
            checked = subprocess.run(
                [
                    shutil.which("systemd-analyze") or "systemd-analyze",
                    "verify",
                    str(unit.with_suffix(".service")),
                    str(unit),
                ],
                capture_output=True,
                text=True,
                timeout=120,
            )
            assert checked.returncode == 0 and not checked.stderr.strip(), checked.stderr
            return
        commands = [
            shlex.join(shlex.split(line.partition("=")[2])).replace("/usr/local/bin/zs", "zs")
            for line in body.splitlines()
            if line.startswith("ExecStart=")
        ]
    assert commands, body
    for command in commands:
        done = subprocess.run(
            ["bash", "-c", _stand_ins(command)], cwd=where, env=env, capture_output=True, text=True, timeout=300
        )
        assert done.returncode == 0, (command, done.stderr[-3000:])
        assert done.stderr.startswith(("wrote ", "up to date: ")), done.stderr
