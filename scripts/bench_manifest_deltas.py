"""Benchmark: the chunk ref timeline (archive format 2) on a long history of small rewrites.

    .venv/bin/python scripts/bench_manifest_deltas.py [--refs N] [--commits C] [--rewrite K] [--runs R]
                                                      [--baseline REV]

The real icechunk 2.x (.peers/ic2) writes, cached under .bench/: a repository of one array of N
virtual refs rewritten C times, K random refs per commit, and a second repository holding the final
state as one commit. In one run, medians of R alternating runs:

1. archive size / repository metadata size (goal <= 0.1) and / the one-commit archive (goal <= 2);
2. a fresh ``zs chunk ... --json`` process at the oldest and at the newest snapshot / the same lookup
   in the one-commit archive (goal <= 1.5 each);
3. 10,000 random ``chunk_ref`` lookups across all snapshots in one open reader / 10,000 in the
   one-commit archive (goal <= 3);
4. with ``--baseline REV``: export time / the exporter of that revision on the same repository (goal <= 1.2;
   716ef21 is format 1, a manifest's refs copied per manifest, and imports crcmod, no longer a dependency).
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from zsarchive.archive import RepoArchive, export  # noqa: E402

GENERATOR = r"""
import sys, icechunk as ic, zarr, numpy as np
out, refs, commits, per = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
def spec(i, gen):
    return ic.VirtualChunkSpec(index=[int(i), 0], location=f"s3://bench/gen{gen}/file{int(i) // 1000}.nc",
                               offset=int(i) * 4000 + gen, length=4000)
def start(path):
    repo = ic.Repository.create(ic.local_filesystem_storage(path))
    s = repo.writable_session("main")
    zarr.group(store=s.store).create_array("v", shape=(refs, 1000), chunks=(1, 1000), dtype="f4",
                                           compressors=None, fill_value=0)
    return repo, s
repo, s = start(out + "/history")
state = np.zeros(refs, np.int64)
s.store.set_virtual_refs("v", [spec(i, 0) for i in range(refs)], validate_containers=False)
s.commit("initial")
rng = np.random.default_rng(2026)
for c in range(1, commits + 1):
    s = repo.writable_session("main")
    idx = rng.choice(refs, per, replace=False)
    state[idx] = c
    s.store.set_virtual_refs("v", [spec(i, c) for i in idx], validate_containers=False)
    s.commit(f"rewrite {c}")
_, s = start(out + "/final")
s.store.set_virtual_refs("v", [spec(i, state[i]) for i in range(refs)], validate_containers=False)
s.commit("final state")
"""

EXPORT = (
    "import sys, time; from zsarchive.archive import export; t = time.perf_counter(); "
    "export(sys.argv[1], sys.argv[2], export_time=1); print(time.perf_counter() - t)"
)


def metadata_size(repo: Path) -> int:
    """Bytes of every repository file outside chunks/."""
    return sum(p.stat().st_size for p in repo.rglob("*") if p.is_file() and p.relative_to(repo).parts[0] != "chunks")


def repositories(refs: int, commits: int, rewrite: int) -> Path:
    out = ROOT / ".bench" / f"deltas-{refs}-{commits}-{rewrite}"
    if not (out / "final").exists():
        out.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            [
                str(ROOT / ".peers" / "ic2" / "bin" / "python"),
                "-c",
                GENERATOR,
                str(out),
                str(refs),
                str(commits),
                str(rewrite),
            ],
            check=True,
            capture_output=True,
        )
    return out


def timed_export(code_root: Path, repo: Path, archive: Path) -> float:
    env = dict(os.environ, PYTHONPATH=str(code_root))
    # run in code_root: "python -c" puts the working directory first on the import path
    out = subprocess.run(
        [sys.executable, "-c", EXPORT, str(repo), str(archive)],
        env=env,
        check=True,
        capture_output=True,
        text=True,
        cwd=code_root,
    )
    return float(out.stdout)


def cold_chunk(archive: Path, ref: str, index: int) -> float:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    t0 = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "zsarchive", "chunk", str(archive), ref, "/v", f"{index},0", "--json"],
        env=env,
        check=True,
        capture_output=True,
    )
    return time.perf_counter() - t0


def lookups(archive: Path, refs: list[str], n: int, size: int) -> float:
    rnd = random.Random(7)
    picks = [(rnd.choice(refs), rnd.randrange(size)) for _ in range(n)]
    with RepoArchive(archive) as arc:
        t0 = time.perf_counter()
        for ref, i in picks:
            arc.chunk_ref(ref, "/v", (i, 0))
        return time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--refs", type=int, default=100_000)
    parser.add_argument("--commits", type=int, default=50)
    parser.add_argument("--rewrite", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument(
        "--baseline",
        help="git revision whose exporter to time beside ours (e.g. 716ef21, format "
        "1; an old revision imports its own dependencies, which the current venv may lack)",
    )
    args = parser.parse_args()
    repos = repositories(args.refs, args.commits, args.rewrite)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        baseline = work / "baseline"
        if args.baseline:
            baseline.mkdir()
            archive = subprocess.run(
                ["git", "-C", str(ROOT), "archive", args.baseline, "zsarchive"], check=True, capture_output=True
            ).stdout
            subprocess.run(["tar", "-x", "-C", str(baseline)], input=archive, check=True)
            for built in (ROOT / "zsarchive").rglob("*.so"):  # the same optional C extensions on both sides
                if (baseline / built.relative_to(ROOT)).parent.is_dir():  # (those whose package it has)
                    shutil.copy(built, baseline / built.relative_to(ROOT))
        history, final, old = work / "history.zs", work / "final.zs", work / "old.zs"
        ours, theirs = [], []
        for _ in range(args.runs):
            ours.append(timed_export(ROOT, repos / "history", history))
            if args.baseline:
                theirs.append(timed_export(baseline, repos / "history", old))
        export(repos / "final", final, export_time=1)
        with RepoArchive(history) as arc:
            snapshots = [s["id"] for s in arc.log("main")][:-1]  # the repository's first snapshot is empty
        newest, oldest = f"snapshot:{snapshots[0]}", f"snapshot:{snapshots[-1]}"
        rows = []
        meta = metadata_size(repos / "history")
        size, final_size = history.stat().st_size, final.stat().st_size
        rows.append(("archive / repository metadata", size / meta, 0.1, f"{size:,} / {meta:,} B"))
        rows.append(("archive / one-commit archive", size / final_size, 2.0, f"{size:,} / {final_size:,} B"))
        if args.baseline:
            rows.append(("baseline archive / metadata", old.stat().st_size / meta, None, f"{old.stat().st_size:,} B"))
        for name, ref in (("oldest", oldest), ("newest", newest)):
            a = [cold_chunk(history, ref, 12345 % args.refs) for _ in range(args.runs)]
            b = [cold_chunk(final, "main", 12345 % args.refs) for _ in range(args.runs)]
            rows.append(
                (
                    f"cold zs chunk at the {name} snapshot",
                    statistics.median(a) / statistics.median(b),
                    1.5,
                    f"{statistics.median(a) * 1e3:.0f} / {statistics.median(b) * 1e3:.0f} ms",
                )
            )
        a = [lookups(history, [f"snapshot:{s}" for s in snapshots], 10_000, args.refs) for _ in range(args.runs)]
        b = [lookups(final, ["main"], 10_000, args.refs) for _ in range(args.runs)]
        rows.append(
            (
                "10,000 chunk_ref lookups, all snapshots",
                statistics.median(a) / statistics.median(b),
                3.0,
                f"{statistics.median(a):.2f} / {statistics.median(b):.2f} s",
            )
        )
        if args.baseline:
            rows.append(
                (
                    "export time / baseline exporter",
                    statistics.median(ours) / statistics.median(theirs),
                    1.2,
                    f"{statistics.median(ours):.2f} / {statistics.median(theirs):.2f} s",
                )
            )
    print(f"{args.refs:,} virtual refs, {args.commits} commits rewriting {args.rewrite:,} each; medians of {args.runs}")
    for name, ratio, goal, detail in rows:
        verdict = "" if goal is None else ("  ok" if ratio <= goal else f"  MISSES goal <= {goal}")
        print(f"{name:42s} {ratio:7.3f}x  ({detail}){verdict}")


if __name__ == "__main__":
    main()
