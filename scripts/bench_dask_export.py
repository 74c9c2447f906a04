"""Benchmark: export on a dask.distributed LocalCluster vs the single-machine export, same repository,
and the client's serial CPU time per chunk ref.

    .venv/bin/python scripts/bench_dask_export.py [--refs N] [--runs K] [--workers W]

Uses the repositories of ``scripts/bench_icechunk_manifest.py`` (N and N/10 virtual refs written by
icechunk 2.x, cached under .bench/). Alternating, K times each: ``export(..., parallelism=W)`` (worker
processes on this machine) and ``export(..., client=...)`` on a LocalCluster of W single-threaded worker
processes started once, for both repositories. Checks that the archives of the two engines are the same
bytes and prints medians: the wall-time ratio (goal <= 1.3x) and the client process's CPU time (every
thread: planning, receiving, hashing, indexing, writing) per chunk ref — the marginal cost between the two
sizes, which bounds an export of many refs on many workers (goal <= 0.2 µs), and the whole cost divided
by N — with the time docs/distributed-export.rst's model gives 500 M refs on 32 workers.
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

WORKER_US = 1.4  # worker CPU per ref (docs/distributed-export.rst), for the 500 M-ref model


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--refs", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()

    sizes = (args.refs // 10, args.refs)
    repos = {n: icbench.ensure_repo(n) for n in sizes}
    local, cluster_s = [], []
    client_cpu: dict[int, list[float]] = {n: [] for n in sizes}
    with (
        LocalCluster(n_workers=args.workers, threads_per_worker=1, processes=True, dashboard_address=":0") as cluster,
        Client(cluster) as client,
        tempfile.TemporaryDirectory(dir=ROOT / ".bench") as tmp,
    ):
        here, there = Path(tmp) / "here.zs", Path(tmp) / "there.zs"
        export(repos[sizes[0]], there, export_time=1, client=client)  # the workers' first imports, untimed
        for _ in range(args.runs):
            for n in sizes:
                there.unlink(missing_ok=True)
                cpu = time.process_time()
                t0 = time.perf_counter()
                export(repos[n], there, export_time=1, client=client)
                client_cpu[n].append(time.process_time() - cpu)
                if n == args.refs:
                    cluster_s.append(time.perf_counter() - t0)
            here.unlink(missing_ok=True)
            t0 = time.perf_counter()
            export(repos[args.refs], here, export_time=1, parallelism=args.workers)
            local.append(time.perf_counter() - t0)
        assert here.read_bytes() == there.read_bytes(), "the cluster's archive differs"
    a, b = statistics.median(local), statistics.median(cluster_s)
    small, big = (statistics.median(client_cpu[n]) for n in sizes)
    marginal = (big - small) / (sizes[1] - sizes[0]) * 1e6
    print(f"repository: {repos[args.refs]} ({args.refs:,} virtual refs); medians of {args.runs} runs")
    print(f"  export -j {args.workers} (this machine's worker processes)   {a:7.2f} s")
    print(f"  export on a LocalCluster of {args.workers} workers            {b:7.2f} s")
    print(f"cluster / single machine: {b / a:.2f}x (goal <= 1.3); the archives are identical")
    print(
        f"client CPU: {small:.3f} s for {sizes[0]:,} refs, {big:.3f} s for {sizes[1]:,}: {marginal:.3f} µs per "
        f"further ref (goal <= 0.2), {big / sizes[1] * 1e6:.3f} µs per ref in all"
    )
    refs, workers = 500e6, 32
    print(
        f"model, {refs / 1e6:.0f} M refs on {workers} workers: {refs * WORKER_US / workers / 1e6 / 60:.1f} min of "
        f"worker time per worker, {refs * marginal / 1e6 / 60:.1f} min on the client"
    )


if __name__ == "__main__":
    main()
