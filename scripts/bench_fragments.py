"""Benchmark: incremental export (`zs export --base`) and reads through a chain of fragments.

    .venv/bin/python scripts/bench_fragments.py [--refs N] [--rewrite K] [--runs R] [--lookups L]

On a copy of the export benchmark's repository (scripts/bench_icechunk_manifest.py: N virtual refs
in one commit, written by the real icechunk 2.x), in one run:

1. a full export; then icechunk commits K rewritten refs; then, R times alternating: the fragment
   (export --base), a full export of the same repository, and a fresh icechunk process reading the
   new commit (open + enumerate every chunk coordinate). Goals: fragment <= 0.02x the full archive's
   bytes, fragment time <= 0.5x the full export and <= 1.2x the icechunk read.
2. nine more such commits, each exported as a fragment on the last: a chain of 10 fragments over the
   full archive; it is consolidated. A fresh `zs chunk` process through the chain vs through the
   consolidated archive (goal <= 1.5x), and L random lookups in one open reader (goal <= 2x).

Prints medians and ratios.
"""

from __future__ import annotations

import argparse
import json
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
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT))

import bench_icechunk_manifest as icbench  # noqa: E402
import bench_zs  # noqa: E402

from zsarchive.archive import RepoArchive, export  # noqa: E402
from zsarchive.archive.write.incremental import consolidate  # noqa: E402

REWRITE = """
import sys, icechunk as ic
ic.set_logs_filter("error")
repo = ic.Repository.open(ic.local_filesystem_storage(sys.argv[1]))
s = repo.writable_session("main")
start, k, n = int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
specs = [ic.VirtualChunkSpec(index=[(start + 7919 * j) % n, 0], location="s3://bench/rewritten.nc",
                             offset=4096 * j, length=4096) for j in range(k)]
s.store.set_virtual_refs("v", specs, validate_containers=False)
s.commit(f"rewrite {k} refs from {start}")
"""


def seconds(fn) -> tuple[float, object]:
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def wall(cmd: list[str], env: dict) -> float:
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, capture_output=True, env=env)
    return time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--refs", type=int, default=1_000_000)
    parser.add_argument("--rewrite", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--lookups", type=int, default=2000)
    parser.add_argument("-j", "--parallelism", type=int, default=2)
    args = parser.parse_args()
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    bench_zs.precompile()
    source = icbench.ensure_repo(args.refs)
    (ROOT / ".bench").mkdir(exist_ok=True)
    med = statistics.median
    with tempfile.TemporaryDirectory(dir=ROOT / ".bench") as tmp:
        work = Path(tmp)
        repo = work / "repo"
        shutil.copytree(source, repo)

        def commit(i: int) -> None:
            subprocess.run(
                [str(icbench.IC2_PYTHON), "-c", REWRITE, str(repo), str(i * 104729), str(args.rewrite), str(args.refs)],
                check=True,
                capture_output=True,
                env=env,
            )

        export(repo, work / "f00.zs", parallelism=args.parallelism)
        commit(1)
        frag_s, full_s, ic_s = [], [], []
        for _ in range(args.runs):
            for path in (work / "f01.zs", work / "full.zs"):
                path.unlink(missing_ok=True)
            took, fragment = seconds(
                lambda: export(repo, work / "f01.zs", base=work / "f00.zs", parallelism=args.parallelism)
            )
            frag_s.append(took)
            took, full = seconds(lambda: export(repo, work / "full.zs", parallelism=args.parallelism))
            full_s.append(took)
            out = subprocess.run(
                [str(icbench.IC2_PYTHON), icbench.__file__, "--icechunk-enumerate", str(repo)],
                check=True,
                capture_output=True,
                text=True,
                env=env,
            )
            run = json.loads(out.stdout.strip().splitlines()[-1])
            ic_s.append(run["open_s"] + run["enumerate_s"])
        for i in range(2, 11):
            commit(i)
            export(repo, work / f"f{i:02}.zs", base=work / f"f{i - 1:02}.zs", parallelism=args.parallelism)
        newest = work / "f10.zs"
        consolidate(newest, work / "consolidated.zs")
        rng = random.Random(1)
        probes = [rng.randrange(args.refs) for _ in range(args.lookups)]
        cold_chain, cold_one, warm_chain, warm_one = [], [], [], []
        for r in range(args.runs):
            coords = f"{probes[r]},0"
            for archive, into in ((newest, cold_chain), (work / "consolidated.zs", cold_one)):
                into.append(
                    wall(
                        [sys.executable, "-m", "zsarchive", "chunk", str(archive), "main", "/v", coords, "--json"], env
                    )
                )
            for archive, into in ((newest, warm_chain), (work / "consolidated.zs", warm_one)):
                with RepoArchive(archive) as ra:
                    took, answers = seconds(lambda: [ra.chunk_ref("main", "/v", (p, 0)) for p in probes])
                into.append(took / len(probes))
        with RepoArchive(newest) as chain, RepoArchive(work / "consolidated.zs") as one:
            assert all(
                chain.chunk_ref("main", "/v", (p, 0)) == one.chunk_ref("main", "/v", (p, 0)) for p in probes[:200]
            )
        frag_size, full_size = fragment.size, full.size
    print(
        f"repository: {args.refs:,} virtual refs, commits rewriting {args.rewrite:,} refs; -j {args.parallelism}; "
        f"median of {args.runs} runs"
    )
    rows = [
        ("fragment export (--base)", med(frag_s)),
        ("full export", med(full_s)),
        ("fresh icechunk: open + enumerate the new commit", med(ic_s)),
        ("fresh `zs chunk` through 10 fragments", med(cold_chain)),
        ("fresh `zs chunk` through the consolidated file", med(cold_one)),
        ("lookup in an open reader, 10 fragments (ms)", 1000 * med(warm_chain)),
        ("lookup in an open reader, consolidated (ms)", 1000 * med(warm_one)),
    ]
    for what, value in rows:
        print(f"  {what:<52} {value:8.3f}")
    print(f"fragment {frag_size:,} B / full archive {full_size:,} B = {frag_size / full_size:.4f}x (goal <= 0.02)")
    print(f"fragment / full export: {med(frag_s) / med(full_s):.2f}x (goal <= 0.5)")
    print(f"fragment / icechunk read: {med(frag_s) / med(ic_s):.2f}x (goal <= 1.2)")
    print(f"cold zs chunk, chain / consolidated: {med(cold_chain) / med(cold_one):.2f}x (goal <= 1.5)")
    print(f"open-reader lookups, chain / consolidated: {med(warm_chain) / med(warm_one):.2f}x (goal <= 2)")


if __name__ == "__main__":
    main()
