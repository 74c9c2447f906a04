"""Benchmark: `zs restore` of the export benchmark's repository vs exporting it and vs icechunk writing it.

    .venv/bin/python scripts/bench_restore.py [--refs N] [--runs K]

Uses the V2 repository of N virtual refs in one commit that scripts/bench_icechunk_manifest.py builds
(cached under .bench/, written by the real icechunk 2.x). In the same run, alternating, K times each,
every task in a fresh process (wall time and peak resident memory of that process):

1. ``zs export REPO ARCHIVE``;
2. ``zs restore ARCHIVE TARGET`` (goal: at most 1.5x the export, and at most icechunk's write);
3. icechunk itself writing the same repository: create it, set the N virtual refs, commit.

Prints medians, ratios and peak memory.
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--refs", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=1)
    args = parser.parse_args()
    repo = icbench.ensure_repo(args.refs)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
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
            results["icechunk write"].append(measured(
                [str(icbench.IC2_PYTHON), icbench.__file__, "--build-only", str(written), "--refs", str(args.refs)]))
    print(f"{args.refs} virtual refs, {args.runs} run(s) each, medians (a noisy shared machine: ratios matter)")
    medians = {}
    for task, samples in results.items():
        seconds = statistics.median(s for s, _ in samples)
        memory = max(m for _, m in samples)
        medians[task] = seconds
        print(f"  {task:15s} {seconds:8.2f} s   peak {memory:8.0f} MiB")
    print(f"  restore / export         {medians['restore'] / medians['export']:.2f}x (goal <= 1.5x)")
    print(f"  restore / icechunk write {medians['restore'] / medians['icechunk write']:.2f}x (goal <= 1x)")


if __name__ == "__main__":
    main()
