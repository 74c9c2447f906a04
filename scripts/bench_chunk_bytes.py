"""Benchmark: chunk bytes in and out of an archive -- ``zs export --include-chunks`` and ``zs checkout`` of
1 GiB of chunk files -- each beside ``cp -r`` + ``sync`` of the same files, in one run.

    .venv/bin/python scripts/bench_chunk_bytes.py [--mib 1024] [--chunk-mib 1] [--runs 3]

Builds (once, cached under ``.bench/``) a spec V2 repository written by the real icechunk 2.x
(``.peers/ic2``): array ``a`` of ``--mib`` MiB of uncompressed float64 in chunks of ``--chunk-mib`` MiB
(native chunk files). Then ``--runs`` rounds, each measuring in turn (fresh processes, fresh output
directories, the page cache as it is, ``sync`` before each, cp's copy deleted before the export):

- cp: ``cp -r REPO/chunks OUT && sync`` (the repository's chunk files, the same bytes: the anchor);
- export: ``zs export REPO ARCHIVE --include-chunks`` with default options (it fsyncs the archive);
- checkout: ``zs checkout ARCHIVE main OUT`` of that archive (it syncs before it puts the directory
  in place).

Prints the medians in seconds and MB/s, each ratio of throughputs (goals: export at least 0.6x cp's,
checkout at least 0.5x) and the peak memory (max RSS) of our processes. The machine may be shared:
quote medians, and the load.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CACHE = ROOT / ".bench"
IC2_PYTHON = ROOT / ".peers" / "ic2" / "bin" / "python"

BUILD = r'''
import sys, shutil, numpy as np, icechunk as ic, zarr
path, mib, chunk_mib = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
ic.set_logs_filter("error")
shutil.rmtree(path, ignore_errors=True)
repo = ic.Repository.create(ic.local_filesystem_storage(path))
s = repo.writable_session("main")
rows = chunk_mib * (1 << 20) // 8 // 1024  # rows of 1024 float64 per chunk
a = zarr.group(store=s.store).create_array("a", shape=(rows * mib // chunk_mib, 1024), chunks=(rows, 1024),
                                           dtype="f8", compressors=None, fill_value=0)
for i in range(mib // chunk_mib):
    a[i * rows:(i + 1) * rows] = np.random.default_rng(i).random((rows, 1024))
s.commit("%d MiB of native chunks" % mib)
'''


def ensure(mib: int, chunk_mib: int) -> Path:
    """The cached repository."""
    repo = CACHE / f"checkout-{mib}-{chunk_mib}" / "repo"
    if not (repo / "repo").exists():
        repo.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run([str(IC2_PYTHON), "-c", BUILD, str(repo), str(mib), str(chunk_mib)], check=True)
    return repo


def _env() -> dict:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # users have compiled bytecode
    return env


def timed(cmd: list[str], shell_sync: bool = False) -> tuple[float, int]:
    """Seconds of ``cmd`` (then ``sync`` if asked) and its peak RSS in KiB."""
    start = time.perf_counter()
    child = subprocess.Popen(cmd, env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(child.pid, 0)
    if status:
        raise SystemExit(f"{cmd[:4]} failed with status {status}")
    if shell_sync:
        subprocess.run(["sync"], check=True)
    return time.perf_counter() - start, usage.ru_maxrss


def zs(*args: str) -> list[str]:
    return [sys.executable, "-m", "zsarchive", *args, "--no-progress"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mib", type=int, default=1024)
    parser.add_argument("--chunk-mib", type=int, default=1)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    repo = ensure(args.mib, args.chunk_mib)
    files = list((repo / "chunks").iterdir())
    size = sum(p.stat().st_size for p in files)
    work = CACHE / "chunk-bytes-out"
    times: dict[str, list[float]] = {"cp": [], "export": [], "checkout": []}
    rss = {"export": 0, "checkout": 0}
    for _ in range(args.runs):
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir(parents=True)
        for name, cmd, sync in (
            ("cp", ["cp", "-r", str(repo / "chunks"), str(work / "cp")], True),
            ("export", zs("export", str(repo), str(work / "a.zs"), "--include-chunks"), False),
            ("checkout", zs("checkout", str(work / "a.zs"), "main", str(work / "co")), False),
        ):
            subprocess.run(["sync"], check=True)
            seconds, peak = timed(cmd, shell_sync=sync)
            times[name].append(seconds)
            rss[name] = max(rss.get(name, 0), peak)
            # cp's copy goes before the export writes: a writer that follows another's fresh gigabyte,
            # still on the disk, ran 0.3-0.6 s slower here (the checkout must follow its archive)
            shutil.rmtree(work / "cp", ignore_errors=True)
        written = sum(p.stat().st_size for p in (work / "co").rglob("*") if p.is_file() and p.name != "zarr.json")
        assert written == size, (written, size)
    shutil.rmtree(work, ignore_errors=True)
    mb = size / 1e6
    cp_s = statistics.median(times["cp"])
    print(
        f"{size / (1 << 20):.0f} MiB in {len(files)} chunk files, {args.runs} rounds (medians), "
        f"load average {os.getloadavg()[0]:.1f}"
    )
    print(f"cp -r + sync                 {cp_s:6.2f} s  {mb / cp_s:7.1f} MB/s")
    for name, goal in (("export", 0.6), ("checkout", 0.5)):
        ours = statistics.median(times[name])
        label = "zs export --include-chunks" if name == "export" else "zs checkout"
        print(
            f"{label:28s} {ours:6.2f} s  {mb / ours:7.1f} MB/s  {cp_s / ours:.2f}x cp's throughput "
            f"(goal >= {goal}x)  peak RSS {rss[name] / 1024:.0f} MiB"
        )
    print("runs, seconds: " + "; ".join(f"{k} " + " ".join(f"{t:.2f}" for t in v) for k, v in times.items()))


if __name__ == "__main__":
    main()
