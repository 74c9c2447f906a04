"""Benchmark: `zs restore` of the export benchmark's repository vs exporting it and vs icechunk writing it.

    .venv/bin/python scripts/bench_restore.py [--refs N] [--runs K]

Uses the V2 repository of N virtual refs in one commit that scripts/bench_icechunk_manifest.py builds
(cached under .bench/, written by the real icechunk 2.x). In the same run, alternating, K times each,
every task in a fresh process (wall time and peak resident memory of that process):

1. ``zs export REPO ARCHIVE``;
2. ``zs restore ARCHIVE TARGET`` (goal: at most 1.5x the export, and at most icechunk's write);
3. icechunk itself writing the same repository: create it, set the N virtual refs, commit.

With ``--chunk-mib M``, instead: a repository of M MiB of native chunks (4 MiB each, incompressible),
exported with ``--include-chunks``; ``zs restore`` of that archive vs ``cp -r`` of the repository's
``chunks/`` followed by ``sync`` (goal: at least 0.5x its throughput).

Prints medians (with the range of the runs), ratios and peak memory (the largest of the runs).
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
sys.path.insert(0, str(ROOT / "scripts"))

import bench_icechunk_manifest as icbench  # noqa: E402


def measured(cmd: list[str], env: dict | None = None) -> tuple[float, float]:
    """(wall seconds, peak resident MiB) of one process."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - t0
    err = proc.stderr.read().decode(errors="replace")
    proc.stderr.close()
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode:
        raise SystemExit(f"{cmd[:4]} failed ({proc.returncode}): {err[-2000:]}")
    return seconds, usage.ru_maxrss / 1024


WRITE_CHUNKS = """
import sys, numpy as np, zarr, icechunk as ic
mib = int(sys.argv[2])
repo = ic.Repository.create(ic.local_filesystem_storage(sys.argv[1]))
session = repo.writable_session("main")
side = 1 << 19  # float64 elements per 4 MiB chunk
array = zarr.group(store=session.store).create_array("v", shape=(mib // 4 * side,), chunks=(side,), dtype="f8",
                                                     compressors=None)
rng = np.random.default_rng(0)
for i in range(mib // 4):
    array[i * side:(i + 1) * side] = rng.random(side)
session.commit("chunks")
import os; os._exit(0)
"""


def chunk_bytes(mib: int, runs: int, env: dict) -> None:
    """Restore of embedded chunk bytes vs ``cp -r`` + ``sync`` of the same files."""
    zs = [sys.executable, "-m", "zsarchive"]
    with tempfile.TemporaryDirectory(prefix="bench-restore-", dir=ROOT / ".bench") as tmp:
        work = Path(tmp)
        subprocess.run([str(icbench.IC2_PYTHON), "-c", WRITE_CHUNKS, str(work / "repo"), str(mib)], check=True)
        subprocess.run(
            [*zs, "export", str(work / "repo"), str(work / "a.zs"), "--include-chunks", "--no-progress"],
            check=True,
            env=env,
        )
        size = sum(p.stat().st_size for p in (work / "repo" / "chunks").iterdir())
        ours, theirs = [], []
        for _ in range(runs):
            shutil.rmtree(work / "restored", ignore_errors=True)
            shutil.rmtree(work / "copy", ignore_errors=True)
            subprocess.run(["sync"], check=True)
            ours.append(measured([*zs, "restore", str(work / "a.zs"), str(work / "restored"), "--no-progress"], env))
            subprocess.run(["sync"], check=True)
            t0 = time.perf_counter()
            subprocess.run(["cp", "-r", str(work / "repo" / "chunks"), str(work / "copy")], check=True)
            subprocess.run(["sync"], check=True)
            theirs.append(time.perf_counter() - t0)
    seconds, peak = statistics.median(s for s, _ in ours), max(m for _, m in ours)
    copy = statistics.median(theirs)
    print(f"{size / 2**20:.0f} MiB of chunk bytes, {runs} run(s), medians (a noisy shared machine)")
    print(f"  zs restore      {seconds:6.2f} s  {size / 2**20 / seconds:7.1f} MiB/s   peak {peak:.0f} MiB")
    print(f"  cp -r + sync    {copy:6.2f} s  {size / 2**20 / copy:7.1f} MiB/s")
    print(f"  throughput ratio {copy / seconds:.2f}x (goal >= 0.5x)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--refs", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--chunk-mib", type=int, default=0, help="measure chunk bytes instead (e.g. 1024)")
    args = parser.parse_args()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    if args.chunk_mib:
        return chunk_bytes(args.chunk_mib, args.runs, env)
    repo = icbench.ensure_repo(args.refs)
    zs = [sys.executable, "-m", "zsarchive"]
    results: dict[str, list[tuple[float, float]]] = {"export": [], "restore": [], "icechunk write": []}
    with tempfile.TemporaryDirectory(prefix="bench-restore-", dir=ROOT / ".bench") as tmp:
        work = Path(tmp)
        for run in range(args.runs):
            archive, target, written = work / "a.zs", work / "restored", work / "written"
            for path in (archive, target, written):
                shutil.rmtree(path, ignore_errors=True) if path.is_dir() else path.unlink(missing_ok=True)
            results["export"].append(measured([*zs, "export", str(repo), str(archive), "--no-progress"], env))
            results["restore"].append(measured([*zs, "restore", str(archive), str(target), "--no-progress"], env))
            results["icechunk write"].append(
                measured(
                    [str(icbench.IC2_PYTHON), icbench.__file__, "--build-only", str(written), "--refs", str(args.refs)]
                )
            )
    print(f"{args.refs} virtual refs, {args.runs} run(s) each, medians (a noisy shared machine: ratios matter)")
    medians, peaks = {}, {}
    for task, samples in results.items():
        seconds = statistics.median(s for s, _ in samples)
        peaks[task] = max(m for _, m in samples)
        medians[task] = seconds
        spread = f"({min(s for s, _ in samples):.2f}-{max(s for s, _ in samples):.2f})" if len(samples) > 1 else ""
        print(f"  {task:15s} {seconds:8.2f} s {spread:13s}  peak {peaks[task]:8.0f} MiB")
    print(f"  restore / export         {medians['restore'] / medians['export']:.2f}x (goal <= 1.5x)")
    print(f"  restore / icechunk write {medians['restore'] / medians['icechunk write']:.2f}x (goal <= 1x)")
    print(f"  peak memory, restore / icechunk write {peaks['restore'] / peaks['icechunk write']:.2f}x (goal <= 1x)")


if __name__ == "__main__":
    main()
