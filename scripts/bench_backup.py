"""Benchmark: `zs backup` and `zs status` on a repository with a long history, against icechunk and `zs export`.

    .venv/bin/python scripts/bench_backup.py [--commits C] [--runs K]

Real icechunk 2.x writes a repository of C commits (a small array changed by each, three branches, a
tag per 50 commits) under .bench/; a backup set of it is made, and one more commit follows. Then, in
the same run, alternating, K times each, every task a fresh process (whole-process wall time):

1. ``zs status SET REPO`` (the set is one commit behind), against icechunk itself answering the same
   questions: open the repository, look up every branch and tag, walk each branch's ancestry, read the
   ops log (the peer's whole process);
2. ``zs backup REPO SET`` writing the fragment of that commit (each run on a fresh copy of the set),
   against ``zs export REPO FULL.zs``, the full archive a backup would write without a set;
3. ``zs backup REPO SET`` finding the set up to date.

Prints medians (with the range of the runs) and the ratios.
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

WRITE = """
import sys, numpy as np, zarr, icechunk as ic
path, commits = sys.argv[1], int(sys.argv[2])
repo = ic.Repository.create(ic.local_filesystem_storage(path))
s = repo.writable_session("main")
zarr.group(store=s.store).create_array("t", shape=(64, 64), chunks=(8, 8), dtype="f4", fill_value=0)
s.commit("layout")
for i in range(commits):
    branch = ("main", "dev", "ops")[i % 3] if i >= 3 else "main"
    if i == 3:
        for name in ("dev", "ops"):
            repo.create_branch(name, repo.lookup_branch("main"))
    s = repo.writable_session(branch)
    zarr.open_group(store=s.store)["t"][(i * 8) % 64:(i * 8) % 64 + 8, :8] = float(i)
    s.commit(f"commit {i}")
    if i % 50 == 49:
        repo.create_tag(f"v{i // 50}", repo.lookup_branch("main"))
import os; os._exit(0)
"""

ONE_MORE = """
import sys, zarr, icechunk as ic
repo = ic.Repository.open(ic.local_filesystem_storage(sys.argv[1]))
s = repo.writable_session("main")
zarr.open_group(store=s.store)["t"][:8, 8:16] = -1.0
s.commit("one more")
import os; os._exit(0)
"""

ICECHUNK_STATUS = """
import sys, icechunk as ic
repo = ic.Repository.open(ic.local_filesystem_storage(sys.argv[1]))
for name in sorted(repo.list_branches()):
    repo.lookup_branch(name)
    sum(1 for _ in repo.ancestry(branch=name))
for name in sorted(repo.list_tags()):
    repo.lookup_tag(name)
sum(1 for _ in repo.ops_log())
import os; os._exit(0)
"""


def timed(cmd: list[str], env: dict) -> float:
    """Wall seconds of one process (which must succeed; exit status 1 is ``zs status`` saying "behind")."""
    started = time.perf_counter()
    done = subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    seconds = time.perf_counter() - started
    if done.returncode not in (0, 1) or (done.returncode == 1 and cmd[3] != "status"):
        raise SystemExit(f"{cmd[3:5]} failed ({done.returncode}): {done.stderr[-2000:]}")
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commits", type=int, default=300)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}  # users have bytecode
    env["PYTHONPATH"] = str(ROOT)
    zs = [sys.executable, "-m", "zsarchive"]
    (ROOT / ".bench").mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="bench-backup-", dir=ROOT / ".bench") as tmp:
        work = Path(tmp)
        repo, made = work / "repo", work / "set"
        subprocess.run(
            [str(IC2_PYTHON), "-c", WRITE, str(repo), str(args.commits)], check=True, stderr=subprocess.DEVNULL
        )
        subprocess.run(
            [*zs, "backup", str(repo), str(made), "--no-progress"], check=True, env=env, stderr=subprocess.DEVNULL
        )
        subprocess.run([str(IC2_PYTHON), "-c", ONE_MORE, str(repo)], check=True, stderr=subprocess.DEVNULL)
        times: dict[str, list[float]] = {k: [] for k in ("status", "icechunk", "fragment", "export", "up to date")}
        for run in range(args.runs):
            times["status"].append(timed([*zs, "status", str(made), str(repo)], env))
            times["icechunk"].append(timed([str(IC2_PYTHON), "-c", ICECHUNK_STATUS, str(repo)], env))
            copy = work / f"set{run}"
            shutil.copytree(made, copy)
            times["fragment"].append(timed([*zs, "backup", str(repo), str(copy), "--no-progress"], env))
            times["export"].append(timed([*zs, "export", str(repo), str(work / f"full{run}.zs"), "--no-progress"], env))
            times["up to date"].append(timed([*zs, "backup", str(repo), str(copy), "--no-progress"], env))
    med = {k: statistics.median(v) for k, v in times.items()}
    load = os.getloadavg()[0]
    print(f"repository: {args.commits + 2} snapshots, 3 branches; {args.runs} runs each, medians, load {load:.1f}")
    for name, label in (
        ("status", "zs status (one commit behind)"),
        ("icechunk", "icechunk: refs, ancestry, ops log"),
        ("fragment", "zs backup writing a fragment"),
        ("export", "zs export (full archive)"),
        ("up to date", "zs backup, up to date"),
    ):
        print(f"  {label:38} {med[name]:7.3f} s  ({min(times[name]):.3f}-{max(times[name]):.3f})")
    print(f"  zs status / icechunk:                {med['status'] / med['icechunk']:.2f}x")
    print(f"  fragment run / full export:          {med['fragment'] / med['export']:.2f}x")


if __name__ == "__main__":
    main()
