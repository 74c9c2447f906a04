"""Benchmark: `zs restore` of 1 GiB of chunk bytes to S3 vs obstore putting the same files, same concurrency.

    .venv/bin/python scripts/bench_restore_s3.py [--mib 1024] [--files 4096] [--runs K] [-j 64]

A repository of M MiB of incompressible chunks in F chunk files, written by the real icechunk 2.x and
exported with ``--include-chunks`` (both cached under ``.bench/``). moto's S3 server runs on loopback.
In one run, alternating, K times each, every task a fresh process timed whole:

- ``zs restore ARCHIVE s3://bench/restored-N -j J``: the whole repository (chunk files from the archive,
  then the metadata, the ``repo`` file last);
- obstore: a process reading the repository's chunk files from the disk and putting each under a key of
  its own with ``put_async``, J in flight.

The objects are deleted after each run. Prints the medians and the throughput ratio (goal: zsarchive at
least 0.8x obstore's).
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
IC2_PYTHON = ROOT / ".peers" / "ic2" / "bin" / "python"

WRITE = r"""
import sys, numpy as np, zarr, icechunk as ic
out, mib, files = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
ic.set_logs_filter("error")
repo = ic.Repository.create(ic.local_filesystem_storage(out))
session = repo.writable_session("main")
per = mib * 2**20 // files // 4  # float32 elements per chunk
array = zarr.group(store=session.store).create_array("v", shape=(files * per,), chunks=(per,), dtype="f4",
                                                     compressors=None)
rng = np.random.default_rng(0)
for i in range(0, files, 256):
    n = min(256, files - i)
    array[i * per:(i + n) * per] = rng.random(n * per, dtype="f4")
session.commit("chunks")
import os; os._exit(0)
"""

PUT = r"""
import asyncio, os, sys
from pathlib import Path
import obstore
from obstore.store import S3Store
directory, prefix, window = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
store = S3Store("bench", endpoint=os.environ["AWS_ENDPOINT_URL"], region="us-east-1", client_options={"allow_http": True})

async def main():
    gate = asyncio.Semaphore(window)
    async def one(path):
        async with gate:
            await obstore.put_async(store, f"{prefix}/chunks/{path.name}", path.read_bytes())
    await asyncio.gather(*(one(p) for p in sorted(directory.iterdir())))
asyncio.run(main())
os._exit(0)  # obstore's runtime sometimes aborts while the interpreter shuts down, after the work is done
"""


def timed(cmd: list[str], env: dict) -> float:
    t0 = time.perf_counter()
    done = subprocess.run(cmd, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - t0
    if done.returncode:
        raise SystemExit(f"{cmd[:3]} failed ({done.returncode}): {done.stderr[-2000:]}")
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=int, default=1024)
    parser.add_argument("--files", type=int, default=4096)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("-j", "--transfers", type=int, default=64)
    args = parser.parse_args()

    import boto3
    import moto.server

    cache = ROOT / ".bench" / f"restore-s3-{args.mib}-{args.files}"
    repo, archive = cache / "repo", cache / "a.zs"
    if not archive.exists():
        shutil.rmtree(cache, ignore_errors=True)
        cache.mkdir(parents=True)
        subprocess.run([str(IC2_PYTHON), "-c", WRITE, str(repo), str(args.mib), str(args.files)], check=True)
        subprocess.run(
            [sys.executable, "-m", "zsarchive", "export", str(repo), str(archive), "--include-chunks", "--no-progress"],
            check=True,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
    chunks = repo / "chunks"
    size = sum(p.stat().st_size for p in chunks.iterdir())
    count = len(list(chunks.iterdir()))

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # moto logs every request
    server = moto.server.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    port = server._server.server_port
    endpoint = f"http://127.0.0.1:{port}"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env.update(
        AWS_ACCESS_KEY_ID="bench",
        AWS_SECRET_ACCESS_KEY="bench",
        AWS_REGION="us-east-1",
        AWS_ENDPOINT_URL=endpoint,
        AWS_EC2_METADATA_DISABLED="true",
        PYTHONPATH=str(ROOT),
    )
    s3 = boto3.client(
        "s3", endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id="bench", aws_secret_access_key="bench"
    )
    s3.create_bucket(Bucket="bench")

    def clear() -> None:
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket="bench"):
            keys = [{"Key": o["Key"]} for o in page.get("Contents", [])]
            for at in range(0, len(keys), 1000):
                s3.delete_objects(Bucket="bench", Delete={"Objects": keys[at : at + 1000]})

    ours, theirs = [], []
    load = os.getloadavg()[0]
    try:
        for run in range(args.runs):
            ours.append(
                timed(
                    [
                        sys.executable,
                        "-m",
                        "zsarchive",
                        "restore",
                        str(archive),
                        f"s3://bench/restored-{run}",
                        "-j",
                        str(args.transfers),
                        "--no-progress",
                    ],
                    env,
                )
            )
            clear()
            theirs.append(timed([sys.executable, "-c", PUT, str(chunks), f"put-{run}", str(args.transfers)], env))
            clear()
    finally:
        server.stop()
    a, b = statistics.median(ours), statistics.median(theirs)
    mib = size / 2**20
    print(
        f"{count} chunk files, {mib:.0f} MiB, to moto's S3 server on loopback, {args.transfers} in flight; "
        f"{args.runs} run(s) each, medians; load average {load:.1f} at the start, {os.getloadavg()[0]:.1f} at the end"
    )
    print(f"  zs restore         {a:7.2f} s  {mib / a:7.1f} MiB/s  ({min(ours):.2f}-{max(ours):.2f})")
    print(f"  obstore put_async  {b:7.2f} s  {mib / b:7.1f} MiB/s  ({min(theirs):.2f}-{max(theirs):.2f})")
    print(f"  throughput ratio {b / a:.2f}x (goal >= 0.8x)")


if __name__ == "__main__":
    main()
