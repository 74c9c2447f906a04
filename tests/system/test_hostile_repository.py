"""A stranger's repository: links out of it and FIFOs are refused with one line, in bounded time and memory;
an unexpected failure of any command is still one line (exit 1), with the traceback only under --debug."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from toolkit.cli import one_line_error, run_hostile
from toolkit.places import ROOT

FIXTURE = ROOT / "testdata" / "icechunk" / "v2"
TIMEOUT = 60


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    copy = tmp_path / "repo"
    shutil.copytree(FIXTURE, copy)
    return copy


def _a_chunk(repo: Path) -> Path:
    return sorted((repo / "chunks").iterdir())[0]


def test_symlinked_chunk_out_of_the_repository_is_not_embedded(repo: Path, tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_bytes(b"not the repository's to give")
    chunk = _a_chunk(repo)
    chunk.unlink()
    chunk.symlink_to(secret)
    out = tmp_path / "out.zs"
    line = one_line_error(run_hostile("export", str(repo), str(out), "--include-chunks"), chunk.name)
    assert "link out of" in line
    assert not out.exists()


def test_symlinked_metadata_file_out_of_the_repository_is_refused(repo: Path, tmp_path: Path) -> None:
    snapshot = sorted((repo / "snapshots").iterdir())[0]
    outside = tmp_path / "outside"
    shutil.copy(snapshot, outside)
    snapshot.unlink()
    snapshot.symlink_to(outside)
    one_line_error(run_hostile("export", str(repo), str(tmp_path / "out.zs")), "link out of")


def test_symlink_inside_the_repository_is_followed(repo: Path, tmp_path: Path) -> None:
    chunk = _a_chunk(repo)
    moved = repo / "chunks-moved"
    moved.mkdir()
    target = moved / chunk.name
    chunk.rename(target)
    chunk.symlink_to(target)
    out = tmp_path / "out.zs"
    done = run_hostile("export", str(repo), str(out), "--include-chunks")
    assert done.returncode == 0, done.stderr
    assert run_hostile("validate", str(out)).returncode == 0


def test_fifo_in_place_of_a_chunk_ends_with_one_line(repo: Path, tmp_path: Path) -> None:
    chunk = _a_chunk(repo)
    chunk.unlink()
    os.mkfifo(chunk)  # nobody ever writes: a plain read would wait forever
    out = tmp_path / "out.zs"
    one_line_error(run_hostile("export", str(repo), str(out), "--include-chunks"), chunk.name, "not a regular file")
    assert not out.exists()


def test_fifo_in_place_of_a_snapshot_ends_with_one_line(repo: Path, tmp_path: Path) -> None:
    snapshot = sorted((repo / "snapshots").iterdir())[0]
    snapshot.unlink()
    os.mkfifo(snapshot)
    one_line_error(run_hostile("export", str(repo), str(tmp_path / "out.zs")), snapshot.name, "not a regular file")


BOOM = """
import sys
from zsarchive.cli.app import main
@main.command("boom")
def boom():
    raise RuntimeError("unexpected\\nsecond line")
sys.argv[0] = "zs"
main()
"""


def test_unexpected_exception_is_one_line_asking_for_a_report() -> None:
    done = subprocess.run([sys.executable, "-c", BOOM, "boom"], capture_output=True, text=True, timeout=TIMEOUT)
    line = one_line_error(done, "please report", "--debug", "RuntimeError", foreseen=False)
    assert "second line" in line  # the message is kept, folded onto the one line


def test_debug_shows_the_traceback() -> None:
    done = subprocess.run(
        [sys.executable, "-c", BOOM, "--debug", "boom"], capture_output=True, text=True, timeout=TIMEOUT
    )
    assert done.returncode == 1
    assert "Traceback" in done.stderr and "RuntimeError" in done.stderr
