"""Benchmark: export on a dask.distributed LocalCluster vs the single-machine export, same repository.

    .venv/bin/python scripts/bench_dask_export.py [--refs N] [--runs K] [--workers W]

Uses the repository of ``scripts/bench_icechunk_manifest.py`` (N virtual refs written by icechunk 2.x,
cached under .bench/). Alternating, K times each: ``export(..., parallelism=W)`` (worker processes on
this machine) and ``export(..., client=...)`` on a LocalCluster of W single-threaded worker processes
started once. Checks that both archives are the same bytes, prints medians and the ratio (goal <= 1.3x).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT))

import bench_icechunk_manifest as icbench  # noqa: E402
from distributed import Client, LocalCluster  # noqa: E402

from zsarchive.archive import export  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--refs", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()

    repo = icbench.ensure_repo(args.refs)
    local, cluster_s = [], []
    with LocalCluster(n_workers=args.workers, threads_per_worker=1, processes=True, dashboard_address=":0") as cluster, \
            Client(cluster) as client, tempfile.TemporaryDirectory(dir=ROOT / ".bench") as tmp:
        here, there = Path(tmp) / "here.zs", Path(tmp) / "there.zs"
        for _ in range(args.runs):
            for path, times, options in ((here, local, {"parallelism": args.workers}),
                                         (there, cluster_s, {"client": client})):
                path.unlink(missing_ok=True)
                t0 = time.perf_counter()
                export(repo, path, export_time=1, **options)
                times.append(time.perf_counter() - t0)
        assert here.read_bytes() == there.read_bytes(), "the cluster's archive differs"
    a, b = statistics.median(local), statistics.median(cluster_s)
    print(f"repository: {repo} ({args.refs:,} virtual refs); medians of {args.runs} runs")
    print(f"  export -j {args.workers} (this machine's worker processes)   {a:7.2f} s")
    print(f"  export on a LocalCluster of {args.workers} workers            {b:7.2f} s")
    print(f"cluster / single machine: {b / a:.2f}x (goal <= 1.3); the archives are identical")


if __name__ == "__main__":
    main()
