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


def run_peer_script(python: Path, script: str, *args: str, env: dict | None = None, timeout: float = TIMEOUT) -> str:
    """``script`` run by ``python`` with ``args``: its stdout; fails the test with the peer's stderr
    if the script fails."""
    done = subprocess.run(
        [str(python), "-c", script + CLEAN_EXIT, *args], capture_output=True, text=True, timeout=timeout, env=env
    )
    assert done.returncode == 0, f"peer script failed (exit {done.returncode}):\n{done.stderr[-3000:]}"
    return done.stdout


def run_peer_json(python: Path, script: str, *args: str, env: dict | None = None) -> dict:
    """``script`` run by ``python``: the JSON on the last line of its stdout."""
    return json.loads(run_peer_script(python, script, *args, env=env).strip().splitlines()[-1])


def generate(python: Path, out: Path, seed: int) -> dict:
    """The random repository of ``seed`` written by ``python``'s icechunk into ``out/repo``: the
    generator's report (virtual prefix and directory, deleted tags, ...)."""
    proc = subprocess.run(
        [str(python), str(GENERATOR), str(out), "--seed", str(seed)], capture_output=True, timeout=TIMEOUT
    )
    if proc.returncode:
        raise RuntimeError(f"generator failed for seed {seed}:\n{proc.stderr.decode(errors='replace')[-3000:]}")
    return json.loads(proc.stdout)


REFS_HISTORY = r"""
import sys, datetime, numpy as np, icechunk as ic, zarr
ic.set_logs_filter("error")
path, rows = sys.argv[1], int(sys.argv[2])
repo = ic.Repository.create(ic.local_filesystem_storage(path))
s = repo.writable_session("main")
a = zarr.group(store=s.store).create_array("v", shape=(rows, 1000), chunks=(1, 1000), dtype="f4",
                                           compressors=None, fill_value=0)
when = datetime.datetime(2024, 5, 6, tzinfo=datetime.timezone.utc)

def spec(i, name, offset):
    # locations of 14 to 60 bytes, so that some end inside each 8-byte word of the others
    return ic.VirtualChunkSpec(index=[i, 0], location=f"s3://b/{'d' * (i % 47)}/{name}{i % 300}.nc",
                               offset=offset, length=4000, last_updated_at_checksum=when if i % 7 == 0 else None)

s.store.set_virtual_refs("v", [spec(i, "f", 4000 * i) for i in range(rows) if i % 5 != 4], validate_containers=False)
a[4:600:5] = np.ones((120, 1000), "f4")  # native chunks among the virtual ones
s.commit("virtual and native refs")
s = repo.writable_session("main")
a = zarr.open_array(store=s.store, path="v")
a[4:100:5] = np.full((20, 1000), 2, "f4")  # native chunks rewritten
s.store.set_virtual_refs("v", [spec(i, "g" if i % 2 else "f", 4000 * i + (i % 3 == 0)) for i in range(0, rows, 11)]
                         + [spec(i, "f", 4000 * i) for i in range(1, rows, 13)]  # set again, unchanged
                         + [spec(i, "f", 8) for i in range(604, rows, 25)],  # virtual where there was none
                         validate_containers=False)
s.store.set_virtual_refs("v", [ic.VirtualChunkSpec(index=[i, 0], location="s3://b/e.nc", offset=0, length=4,
                                                   etag_checksum=f"e{i % 3}") for i in range(2000, 2010)],
                         validate_containers=False)
a.resize((rows - 70, 1000))  # the last refs dropped
s.commit("rewrite, keep, add, drop")
"""
"""Two commits of icechunk 2.x on one array of virtual refs (locations of 14 to 60 bytes compressed with a
trained dictionary, some with a last-modified time, some with an etag) and native ones: virtual and native
refs rewritten, kept, added, dropped."""


def refs_history(python: Path, path: Path, rows: int = 3000) -> Path:
    """The :data:`REFS_HISTORY` repository written at ``path``."""
    run_peer_script(python, REFS_HISTORY, str(path), str(rows))
    return path


GRID = r"""
import sys, numpy as np, icechunk as ic, zarr
ic.set_logs_filter("error")
repo = ic.Repository.create(ic.local_filesystem_storage(sys.argv[1]))
s = repo.writable_session("main")
root = zarr.group(store=s.store)
a = root.create_array("grid", shape=(60, 1000), chunks=(1, 250), dtype="f4", compressors=None, fill_value=0)
a[:] = np.arange(60_000, dtype="f4").reshape(60, 1000)
b = root.create_group("g").create_array("small", shape=(3, 4), chunks=(1, 2), dtype="i2", fill_value=-1)
b[:2] = 7  # inline chunks, one row left unwritten
s.commit("a grid of native chunks")
"""
"""240 native chunk files of 1,000 bytes (a 60 x 4 grid of them) and 4 inline chunks, written by icechunk 2.x."""


def grid(python: Path, path: Path) -> Path:
    """The :data:`GRID` repository written at ``path``."""
    run_peer_script(python, GRID, str(path))
    return path
