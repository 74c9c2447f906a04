"""Benchmark: `zs export` and one archived chunk lookup vs icechunk itself, on 1 M virtual refs.

    .venv/bin/python scripts/bench_export.py [--refs N] [--runs K] [--codec deflate] [-j J]

Uses the V2 repository that scripts/bench_icechunk_manifest.py builds (cached under .bench/,
written by the real icechunk 2.x). In the same run, alternating, K times each:

1. export time (in-process ``zsarchive.archive.export``) vs icechunk opening the repository and
   enumerating every chunk coordinate (in-process, in a fresh icechunk process). Goal <= 2x.
2. a fresh ``zs chunk ARCHIVE main /v I,0 --json`` process (wall time) vs a fresh icechunk Python
   process that opens the repository and answers ``chunk_type`` for the same chunk. Goal <= 0.5x.
   Ours runs from ``bench_zs.user_python`` (started as a non-editable install is), with PYTHONPATH.
3. archive size vs the repository's metadata (every file but chunks/). Goal <= 1x.

Prints medians and ratios.
"""

from __future__ import annotations

import argparse
import json
import os
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

from zsarchive.archive import export  # noqa: E402

CHUNK_TYPE = """
import sys, icechunk as ic
repo = ic.Repository.open(ic.local_filesystem_storage(sys.argv[1]))
s = repo.readonly_session(branch="main")
print(s.chunk_type("/v", [int(sys.argv[2]), 0]))
"""


def metadata_size(repo: Path) -> int:
    """Bytes of every repository file outside chunks/."""
    total = 0
    for path in repo.rglob("*"):
        if path.is_file() and "chunks" not in path.relative_to(repo).parts[:1]:
            total += path.stat().st_size
    return total


def wall(cmd: list[str], env: dict | None = None) -> tuple[float, str]:
    t0 = time.perf_counter()
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env)
    return time.perf_counter() - t0, out.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--refs", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--codec", default="deflate")
    parser.add_argument("-j", "--parallelism", type=int, default=2)
    args = parser.parse_args()

    repo = icbench.ensure_repo(args.refs)
    bench_zs.precompile()  # the fresh `zs chunk` processes load byte code, as an installed copy does
    env = {**os.environ, "PYTHONWARNINGS": "ignore", "PYTHONPATH": str(ROOT)}
    export_s, enum_s, zs_chunk_s, ic_chunk_s = [], [], [], []
    with tempfile.TemporaryDirectory(dir=ROOT / ".bench") as tmp:
        archive = Path(tmp) / "bench.zs"
        probe = args.refs * 2 // 3
        for _ in range(args.runs):
            if archive.exists():
                archive.unlink()
            t0 = time.perf_counter()
            summary = export(repo, archive, codec=args.codec, parallelism=args.parallelism)
            export_s.append(time.perf_counter() - t0)
            out = subprocess.run(
                [str(icbench.IC2_PYTHON), icbench.__file__, "--icechunk-enumerate", str(repo)],
                check=True,
                capture_output=True,
                text=True,
                env=env,
            )
            run = json.loads(out.stdout.strip().splitlines()[-1])
            enum_s.append(run["open_s"] + run["enumerate_s"])
            seconds, text = wall(
                [
                    bench_zs.user_python(),
                    "-m",
                    "zsarchive",
                    "chunk",
                    str(archive),
                    "main",
                    "/v",
                    f"{probe},0",
                    "--json",
                ],
                env,
            )
            assert '"virtual"' in text, text
            zs_chunk_s.append(seconds)
            seconds, text = wall([str(icbench.IC2_PYTHON), "-c", CHUNK_TYPE, str(repo), str(probe)], env)
            assert "Virtual" in text or "VIRTUAL" in text.upper(), text
            ic_chunk_s.append(seconds)
        size = archive.stat().st_size
    meta = metadata_size(repo)
    med = statistics.median
    print(
        f"repository: {repo} ({args.refs:,} virtual refs); codec {args.codec}, -j {args.parallelism}; "
        f"median of {args.runs} runs"
    )
    print(f"records written: {sum(summary.counts.values()):,} ({summary.counts})")
    rows = [
        ("export (zsarchive, in-process)", med(export_s)),
        ("icechunk: open + enumerate all chunk coords", med(enum_s)),
        ("fresh `zs chunk ... --json` process", med(zs_chunk_s)),
        ("fresh icechunk process: open + chunk_type", med(ic_chunk_s)),
    ]
    for what, seconds in rows:
        print(f"  {what:<48} {seconds:8.3f} s")
    print(f"export / enumerate: {med(export_s) / med(enum_s):.2f}x (goal <= 2)")
    print(f"zs chunk / icechunk chunk_type: {med(zs_chunk_s) / med(ic_chunk_s):.2f}x (goal <= 0.5)")
    print(f"archive {size:,} B / repository metadata {meta:,} B = {size / meta:.2f}x (goal <= 1)")


if __name__ == "__main__":
    main()
