"""Benchmark: `zs restore` on a dask.distributed LocalCluster vs on this machine, same archive.

    .venv/bin/python scripts/bench_dask_restore.py [--refs N] [--chunk-mib M] [--runs K] [--workers W]

The repository (written by the real icechunk 2.x, cached under .bench/) holds an array of N virtual refs
in one manifest (the export benchmark's shape) and an array of M MiB of incompressible native chunks
(64 KiB each); it is exported with ``--include-chunks``. Alternating, K times each: ``restore(archive,
target)`` in this process and ``restore(archive, target, client=...)`` on a LocalCluster of W
single-threaded worker processes started once. Checks that the two targets hold the same files, byte
for byte, and prints the medians.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
IC2_PYTHON = ROOT / ".peers" / "ic2" / "bin" / "python"

WRITE = r"""
import sys, numpy as np, zarr, icechunk as ic
out, n, mib = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
ic.set_logs_filter("error")
repo = ic.Repository.create(ic.local_filesystem_storage(out))
session = repo.writable_session("main")
root = zarr.group(store=session.store)
root.create_array("v", shape=(n, 1000), chunks=(1, 1000), dtype="f4", compressors=None, fill_value=0)
for start in range(0, n, 200_000):
    session.store.set_virtual_refs("v", [ic.VirtualChunkSpec(index=[i, 0], location=f"s3://b/file{i % 1000:04d}.nc",
                                          offset=4000 * (i // 1000), length=4000) for i in range(start, min(n, start + 200_000))],
                                   validate_containers=False)
side = 1 << 14  # float32 elements per 64 KiB chunk
c = root.create_array("c", shape=(mib * 16 * side,), chunks=(side,), dtype="f4", compressors=None)
c[:] = np.random.default_rng(0).random(mib * 16 * side, dtype="f4")
session.commit("virtual refs and chunk bytes")
import os; os._exit(0)
"""


def files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--refs", type=int, default=1_000_000)
    parser.add_argument("--chunk-mib", type=int, default=64)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    from distributed import Client, LocalCluster

    from zsarchive.archive import export
    from zsarchive.restore import restore

    cache = ROOT / ".bench" / f"dask-restore-{args.refs}-{args.chunk_mib}"
    archive = cache / "a.zs"
    if not archive.exists():
        shutil.rmtree(cache, ignore_errors=True)
        cache.mkdir(parents=True)
        subprocess.run(
            [str(IC2_PYTHON), "-c", WRITE, str(cache / "repo"), str(args.refs), str(args.chunk_mib)], check=True
        )
        export(cache / "repo", archive, include_chunks=True)
    here_s, there_s = [], []
    load = os.getloadavg()[0]
    with (
        LocalCluster(n_workers=args.workers, threads_per_worker=1, processes=True, dashboard_address=":0") as cluster,
        Client(cluster) as client,
        tempfile.TemporaryDirectory(dir=ROOT / ".bench") as tmp,
    ):
        here, there = Path(tmp) / "here", Path(tmp) / "there"
        for _ in range(args.runs):
            shutil.rmtree(here, ignore_errors=True)
            shutil.rmtree(there, ignore_errors=True)
            t0 = time.perf_counter()
            restore(archive, here)
            here_s.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            summary = restore(archive, there, client=client)
            there_s.append(time.perf_counter() - t0)
        same = files(here) == files(there)
    a, b = statistics.median(here_s), statistics.median(there_s)
    print(
        f"{args.refs:,} virtual refs and {summary.chunk_files} chunk files ({summary.chunk_bytes / 2**20:.0f} MiB); "
        f"{args.runs} run(s) each, medians; load average {load:.1f} at the start, {os.getloadavg()[0]:.1f} at the end"
    )
    print(f"  restore on this machine                 {a:7.2f} s")
    print(f"  restore on a LocalCluster of {args.workers} workers    {b:7.2f} s")
    print(f"  the two targets hold the same files, byte for byte: {same}")
    if not same:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
