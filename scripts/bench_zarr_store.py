"""Benchmark: read a whole array of 10,000 native chunks through the archive's zarr store vs icechunk's.

    .venv/bin/python scripts/bench_zarr_store.py [--chunks N] [--runs K]

Builds (once, cached under ``.bench/``) a spec V2 repository written by the real icechunk 2.x
(``.peers/ic2``): array ``a`` of N native, uncompressed 16x16 float64 chunks (2 KiB each, so
none is stored inline), and its archive made by ``zsarchive.export``. Then, in the same run,
alternating K times:

- icechunk: a ``.peers/ic2`` process opens the repository, a read-only session on ``main`` and
  ``zarr.open_array`` on its store, and reads ``a[...]``;
- zsarchive: this process does the same through ``open_store(archive, "main", repo=...)``.

Each timing covers opening the store and reading every chunk from the local repository; the
arrays are checked equal. Prints the medians and the ratio (goal: at most 1.5x icechunk).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CACHE = ROOT / ".bench"
IC2_PYTHON = ROOT / ".peers" / "ic2" / "bin" / "python"
CHUNK = 16

BUILD = r'''
import sys, shutil, numpy as np, icechunk as ic, zarr
path, side, chunk = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
ic.set_logs_filter("error")
shutil.rmtree(path, ignore_errors=True)
repo = ic.Repository.create(ic.local_filesystem_storage(path))
s = repo.writable_session("main")
a = zarr.group(store=s.store).create_array("a", shape=(side * chunk, side * chunk), chunks=(chunk, chunk),
                                           dtype="f8", compressors=None, fill_value=0)
a[...] = np.random.default_rng(0).random(a.shape)
s.commit("%d native chunks" % (side * side))
'''

ICECHUNK_READ = r'''
import sys, time, json, hashlib, icechunk as ic, zarr
ic.set_logs_filter("error")
repo = ic.Repository.open(ic.local_filesystem_storage(sys.argv[1]))
t0 = time.perf_counter()
store = repo.readonly_session(branch="main").store
data = zarr.open_array(store=store, path="a", mode="r")[...]
elapsed = time.perf_counter() - t0
print(json.dumps({"seconds": elapsed, "sha256": hashlib.sha256(data.tobytes()).hexdigest()}))
'''


def ensure_repo(n: int) -> tuple[Path, Path]:
    """The cached repository of ``n`` native chunks (n a square) and its archive."""
    side = int(round(n**0.5))
    if side * side != n:
        raise SystemExit(f"--chunks {n}: give a square number (the grid is side x side)")
    repo = CACHE / f"zarr-native-{n}"
    archive = CACHE / f"zarr-native-{n}.zs"
    if not (repo / "refs").is_dir() and not (repo / "repo").exists():
        print(f"building {repo} with icechunk 2.x ...", file=sys.stderr)
        CACHE.mkdir(exist_ok=True)
        subprocess.run([str(IC2_PYTHON), "-c", BUILD, str(repo), str(side), str(CHUNK)], check=True)
        archive.unlink(missing_ok=True)
    if not archive.exists():
        from zsarchive.archive import export

        print(f"exporting {archive} ...", file=sys.stderr)
        export(repo, archive)
    return repo, archive


def icechunk_run(repo: Path) -> tuple[float, str]:
    """One timed read in a fresh icechunk process (interpreter start and imports not timed)."""
    proc = subprocess.run([str(IC2_PYTHON), "-c", ICECHUNK_READ, str(repo)], check=True, capture_output=True, text=True)
    answer = json.loads(proc.stdout.strip().splitlines()[-1])
    return answer["seconds"], answer["sha256"]


def ours_run(repo: Path, archive: Path) -> tuple[float, str]:
    """One timed read through a freshly opened archive store (cold reader caches)."""
    import hashlib

    import zarr

    from zsarchive import open_store

    t0 = time.perf_counter()
    with open_store(archive, "main", repo=repo) as store:
        data = zarr.open_array(store=store, path="a", mode="r")[...]
    elapsed = time.perf_counter() - t0
    return elapsed, hashlib.sha256(data.tobytes()).hexdigest()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=10_000, help="native chunks in the array (a square)")
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    if not IC2_PYTHON.exists():
        raise SystemExit(f"{IC2_PYTHON} is missing: run scripts/dev setup")
    repo, archive = ensure_repo(args.chunks)
    ours_run(repo, archive)  # warm the page cache and imports for both sides
    icechunk_run(repo)
    theirs, mine = [], []
    for _ in range(args.runs):
        t, digest_theirs = icechunk_run(repo)
        theirs.append(t)
        t, digest_mine = ours_run(repo, archive)
        mine.append(t)
        if digest_mine != digest_theirs:
            raise SystemExit("the arrays differ: zsarchive read other data than icechunk")
    a, b = statistics.median(theirs), statistics.median(mine)
    print(
        f"whole array of {args.chunks} native chunks ({archive.stat().st_size / 1e6:.2f} MB archive), "
        f"median of {args.runs}:"
    )
    print(f"  icechunk {a:.3f} s   zsarchive {b:.3f} s   ratio {b / a:.2f}x (goal <= 1.5x)")


if __name__ == "__main__":
    main()
