"""Benchmark: `zs export s3://...` vs icechunk reading the same history from the same S3 server.

    .venv/bin/python scripts/bench_s3_export.py [--refs N] [--commits C] [--rewrite K] [--runs R]
                                                [--latency-ms MS] [-j J]

The repository is the manifest-delta benchmark's history (``scripts/bench_manifest_deltas.py``,
written by the real icechunk 2.x: an array of N virtual refs, C commits each rewriting K of them),
uploaded to moto's S3 server on loopback. In one run, alternating, R times each, both as fresh
processes timed from the outside:

- zsarchive: ``zs export s3://bench/history OUT -j J`` with only the ``AWS_*`` variables set;
- icechunk 2.x: open the same repository on the same server and enumerate every chunk coordinate
  of every snapshot in main's ancestry.

Then the same again through a proxy that holds every request ``--latency-ms`` before passing it on,
where fetching concurrently has to show. Goals: zsarchive at most 1.3x icechunk's time on loopback, 2x
through the proxy (``--commits 1``: the export-speed table's row, one commit after the first).
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT / "tests"))

import boto3  # noqa: E402
import moto.server as moto_server  # noqa: E402

import bench_manifest_deltas  # noqa: E402
from toolkit.servers import DelayingProxy, free_port  # noqa: E402

IC2_PYTHON = ROOT / ".peers" / "ic2" / "bin" / "python"

ENUMERATE = r"""
import asyncio, os, sys, icechunk as ic
ic.set_logs_filter("error")
storage = ic.s3_storage(bucket="bench", prefix="history", endpoint_url=os.environ["AWS_ENDPOINT_URL"],
                        allow_http=True, region="us-east-1", force_path_style=True, from_env=True)
repo = ic.Repository.open(storage)
async def count(session):
    return sum([1 async for _ in session.chunk_coordinates("/v", batch_size=100_000)])
total = 0
for info in repo.ancestry(branch="main"):
    if info.parent_id is None:
        continue  # the repository's initial snapshot holds no array yet
    total += asyncio.run(count(repo.readonly_session(snapshot_id=info.id)))
print(total, flush=True)
os._exit(0)  # icechunk 2.3 can crash while the interpreter shuts down after several asyncio.run calls
"""


def upload(directory: Path, endpoint: str) -> None:
    client = boto3.client(
        "s3", endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id="bench", aws_secret_access_key="bench"
    )
    client.create_bucket(Bucket="bench")
    for path in sorted(p for p in directory.rglob("*") if p.is_file()):
        client.upload_file(str(path), "bench", f"history/{path.relative_to(directory)}")


def wall(cmd: list[str], env: dict) -> tuple[float, str]:
    t0 = time.perf_counter()
    out = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if out.returncode:
        raise SystemExit(f"{cmd[0]} failed ({out.returncode}):\n{out.stdout[-1000:]}{out.stderr[-2000:]}")
    return time.perf_counter() - t0, out.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--refs", type=int, default=50_000)
    parser.add_argument("--commits", type=int, default=30)
    parser.add_argument("--rewrite", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--latency-ms", type=float, default=20.0)
    parser.add_argument("-j", "--parallelism", type=int, default=2)
    args = parser.parse_args()

    local = bench_manifest_deltas.repositories(args.refs, args.commits, args.rewrite) / "history"
    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # moto logs every request
    port = free_port()
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        upload(local, f"http://127.0.0.1:{port}")
        proxy = DelayingProxy(port, args.latency_ms / 1000)
        base = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
        base.update(
            AWS_ACCESS_KEY_ID="bench",
            AWS_SECRET_ACCESS_KEY="bench",
            AWS_REGION="us-east-1",
            AWS_EC2_METADATA_DISABLED="true",
            PYTHONWARNINGS="ignore",
        )
        results = {}
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "history.zs"
            for label, endpoint_port in (("loopback", port), (f"+{args.latency_ms:g} ms per request", proxy.port)):
                env = dict(base, AWS_ENDPOINT_URL=f"http://127.0.0.1:{endpoint_port}")
                ours, theirs = [], []
                for _ in range(args.runs):
                    out.unlink(missing_ok=True)
                    seconds, _ = wall(
                        [
                            sys.executable,
                            "-m",
                            "zsarchive",
                            "export",
                            "s3://bench/history",
                            str(out),
                            "-j",
                            str(args.parallelism),
                            "--no-progress",
                        ],
                        env,
                    )
                    ours.append(seconds)
                    seconds, counted = wall([str(IC2_PYTHON), "-c", ENUMERATE], env)
                    theirs.append(seconds)
                results[label] = (statistics.median(ours), statistics.median(theirs), int(counted))
    finally:
        server.stop()
    print(
        f"repository: {args.refs:,} virtual refs, {args.commits} commits of {args.rewrite:,} rewritten refs, "
        f"on moto S3 (loopback); zs export -j {args.parallelism}; medians of {args.runs} runs"
    )
    print(f"  {'':<24} {'zs export':>10} {'icechunk':>10} {'ratio':>7}")
    for (label, (ours, theirs, counted)), goal in zip(results.items(), (1.3, 2)):
        print(
            f"  {label:<24} {ours:9.2f}s {theirs:9.2f}s {ours / theirs:6.2f}x  (goal <= {goal}; icechunk "
            f"enumerated {counted:,} coords)"
        )


if __name__ == "__main__":
    main()
