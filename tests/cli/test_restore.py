"""``zs restore`` on a terminal: a progress bar per stage, the chunk files' counted in bytes."""

from __future__ import annotations

import os
import pty
import subprocess
import sys

from toolkit.places import ROOT
from zsarchive.archive import export


def test_the_chunk_files_bar_counts_bytes(grid_repository, tmp_path):
    archive = tmp_path / "a.zs"
    export(grid_repository, archive, include_chunks=True)
    held = sum(p.stat().st_size for p in (grid_repository / "chunks").iterdir())
    leader, follower = pty.openpty()  # stderr a terminal: the bars are drawn
    try:
        done = subprocess.run(
            [sys.executable, "-m", "zsarchive", "restore", str(archive), str(tmp_path / "r")],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=follower,
            timeout=300,
            cwd=ROOT,
        )
        os.close(follower)
        follower = -1
        shown = b""
        while True:
            try:
                piece = os.read(leader, 1 << 16)
            except OSError:  # the terminal closed with the process
                break
            if not piece:
                break
            shown += piece
    finally:
        os.close(leader)
        if follower >= 0:
            os.close(follower)
    text = shown.decode("utf-8", "replace")
    assert done.returncode == 0, text
    assert "copying chunk files" in text and f"{held / 2**20:,.1f} MiB" in text
    assert "restored" in text
