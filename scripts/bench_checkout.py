"""Benchmark: ``zs checkout`` of 1 GiB of embedded chunk bytes vs ``cp -r`` + ``sync`` of the same files.

    .venv/bin/python scripts/bench_checkout.py [--mib 1024] [--chunk-mib 1] [--runs 3]

Builds (once, cached under ``.bench/``) a spec V2 repository written by the real icechunk 2.x
(``.peers/ic2``): array ``a`` of ``--mib`` MiB of uncompressed float64 in chunks of ``--chunk-mib`` MiB
(native chunk files), and its archive exported with ``--include-chunks --codec none``. Then, in the
same run, alternating ``--runs`` times (each into a fresh directory, the page cache as it is):

- cp: ``cp -r REPO/chunks OUT && sync`` (the repository's chunk files, the same bytes);
- checkout: ``zs checkout ARCHIVE main OUT`` in a fresh process (it syncs before it puts the
  directory in place).

Prints the medians in seconds and MB/s, the ratio (goal: checkout at least 0.5x the throughput of
cp + sync) and the checkout's peak memory (max RSS). The machine may be shared: quote medians.
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


def ensure(mib: int, chunk_mib: int) -> tuple[Path, Path]:
    """The cached repository and its archive (chunks embedded, blocks stored)."""
    base = CACHE / f"checkout-{mib}-{chunk_mib}"
    repo, archive = base / "repo", base / "a.zs"
    if not archive.exists():
        base.mkdir(parents=True, exist_ok=True)
        subprocess.run([str(IC2_PYTHON), "-c", BUILD, str(repo), str(mib), str(chunk_mib)], check=True)
        subprocess.run([sys.executable, "-m", "zsarchive", "export", str(repo), str(archive), "--include-chunks",
                        "--codec", "none", "--no-progress"], check=True, env=_env())
    return repo, archive


def _env() -> dict:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # users have compiled bytecode
    return env


def timed(cmd: list[str], shell_sync: bool = False) -> tuple[float, int]:
    """Seconds of ``cmd`` (then ``sync`` if asked) and its peak RSS in KiB."""
    start = time.perf_counter()
    child = subprocess.Popen(cmd, env=_env(), stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(child.pid, 0)
    if status:
        raise SystemExit(f"{cmd[:4]} failed with status {status}")
    if shell_sync:
        subprocess.run(["sync"], check=True)
    return time.perf_counter() - start, usage.ru_maxrss


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mib", type=int, default=1024)
    parser.add_argument("--chunk-mib", type=int, default=1)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    repo, archive = ensure(args.mib, args.chunk_mib)
    size = sum(p.stat().st_size for p in (repo / "chunks").iterdir())
    work = CACHE / "checkout-out"
    cp, co, rss = [], [], 0
    for run in range(args.runs):
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir(parents=True)
        subprocess.run(["sync"], check=True)
        cp.append(timed(["cp", "-r", str(repo / "chunks"), str(work / "cp")], shell_sync=True)[0])
        seconds, rss = timed([sys.executable, "-m", "zsarchive", "checkout", str(archive), "main",
                              str(work / "co"), "--no-progress"])
        co.append(seconds)
        written = sum(p.stat().st_size for p in (work / "co").rglob("*") if p.is_file() and p.name != "zarr.json")
        assert written == size, (written, size)
    shutil.rmtree(work, ignore_errors=True)
    mb = size / 1e6
    cp_s, co_s = statistics.median(cp), statistics.median(co)
    print(f"{size / (1 << 20):.0f} MiB in {len(list((repo / 'chunks').iterdir()))} chunk files, {args.runs} runs "
          "(medians)")
    print(f"cp -r + sync   {cp_s:6.2f} s  {mb / cp_s:7.1f} MB/s")
    print(f"zs checkout    {co_s:6.2f} s  {mb / co_s:7.1f} MB/s  peak RSS {rss / 1024:.0f} MiB")
    print(f"checkout throughput / cp throughput: {cp_s / co_s:.2f} (goal >= 0.5)")


if __name__ == "__main__":
    main()
