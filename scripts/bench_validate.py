#!/usr/bin/env python3
"""Benchmark ``zs validate``: zsarchive against the reference zs 0.10.0 on the same file.

Generates a sorted text file of ~1.5 M records (~70 MB), has the reference ``zs make`` pack it
(deflate by default), then runs both validators alternately and prints medians and the ratio.

    .venv/bin/python scripts/bench_validate.py [--codec deflate|lzma] [--runs 5] [--dir DIR]
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
REFERENCE = ROOT / ".peers" / "zs36" / "bin" / "zs"
OURS = [sys.executable, "-m", "zsarchive"]


def make_input(path: Path, records: int) -> None:
    """Sorted lines of four pseudo-words and a count: ~47 bytes each, deterministic."""
    rng = random.Random(20131)
    words = ["".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(4, 10))) for _ in range(30000)]
    lines = sorted(" ".join(rng.choices(words, k=4)) + "\t" + str(rng.randint(1, 10**6)) for _ in range(records))
    path.write_text("\n".join(lines) + "\n")


def timed(cmd: list[str]) -> tuple[float, float]:
    """Wall seconds and CPU seconds (user + system, all threads) of one run."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode:
        raise SystemExit(f"{cmd} failed with status {proc.returncode}")
    return wall, usage.ru_utime + usage.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--codec", default="deflate", choices=["deflate", "lzma"])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--records", type=int, default=1_500_000)
    parser.add_argument("--dir", type=Path, default=Path("/tmp/zsarchive-bench"))
    args = parser.parse_args()
    args.dir.mkdir(parents=True, exist_ok=True)
    text = args.dir / f"records-{args.records}.txt"
    if not text.exists():
        make_input(text, args.records)
    zs_file = args.dir / f"records-{args.records}-{args.codec}.zs"
    if not zs_file.exists():
        subprocess.run(
            [str(REFERENCE), "make", "--no-spinner", "--codec", args.codec, "{}", str(text), str(zs_file)],
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
    print(f"{zs_file.name}: {zs_file.stat().st_size / 1e6:.1f} MB, input {text.stat().st_size / 1e6:.1f} MB")
    ours, theirs = [], []
    for _ in range(args.runs):  # alternate, so both see the same machine load
        ours.append(timed([*OURS, "validate", "--no-spinner", str(zs_file)]))
        theirs.append(timed([str(REFERENCE), "validate", str(zs_file)]))
    for what, i in (("wall", 0), ("cpu", 1)):
        o = statistics.median(run[i] for run in ours)
        t = statistics.median(run[i] for run in theirs)
        print(
            f"zs validate ({args.codec}) {what}: zsarchive {o:.2f} s, reference {t:.2f} s, "
            f"ratio {o / t:.2f}x (median of {args.runs})"
        )


if __name__ == "__main__":
    main()
