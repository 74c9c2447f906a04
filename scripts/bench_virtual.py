"""Benchmark: virtual chunk bytes kept in an archive (``zs export --include-virtual``) and ``zs sources
--check``, each beside the peer doing the same work on the same data, in one run.

    .venv/bin/python scripts/bench_virtual.py local [--mib 1024] [--runs 3]
    .venv/bin/python scripts/bench_virtual.py s3 [--objects 4000] [--range-kib 256] [--concurrency 16] [--runs 3]
    .venv/bin/python scripts/bench_virtual.py check [--objects 10000] [--runs 3]

``local``: NetCDF-4 files written by h5netcdf (16 files, chunks of 1 MiB, ``--mib`` MiB in all) and a
repository VirtualiZarr writes over them with icechunk 2.x (``.peers/ic2``), cached under ``.bench/``. Each
round, fresh processes, each writing into an emptied directory, ``sync`` before each: ``cp -r`` of the files
+ ``sync`` (the anchor), ``zs export REPO A.zs --include-virtual`` (it fsyncs the archive), and the floor: a
short program doing only what any archive of the bytes must (read them, SHA-256 them in order on a thread
of its own, write and fsync them). Goal: at least 0.6x cp's throughput.

``s3``: moto's S3 server on loopback holding ``--objects`` objects of ``--range-kib`` KiB, and a repository
icechunk writes with one virtual ref per object (the whole object, pinned by its ETag). Each round:
obstore's own ``get_ranges`` fetching the same ranges with ``--concurrency`` requests in flight; ``zs export
--include-virtual``; icechunk reading every virtual chunk through its store (zarr reads the array). Goals:
at least 0.8x obstore's throughput and 1.5x icechunk's.

``check``: ``--objects`` small objects on moto, one virtual ref to each: ``zs sources A.zs --check --json``
beside ``--objects`` HEADs made by obstore directly, 64 in flight (what ``--check`` runs side by side).
Goal: at most 1.2x obstore's time.

Prints medians and ratios; the machine may be shared: quote medians and the load printed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
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
sys.path.insert(0, str(ROOT / "tests"))

NETCDF = r'''
import sys, os, numpy as np, h5netcdf
directory, files, mib = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
os.makedirs(directory, exist_ok=True)
rows = mib * (1 << 20) // files // (1 << 20)  # 1 MiB chunks: rows of 128 x 1024 float64
for i in range(files):
    with h5netcdf.File(os.path.join(directory, f"f{i:02d}.nc"), "w") as f:
        f.dimensions = {"time": rows, "y": 128, "x": 1024}
        v = f.create_variable("v", ("time", "y", "x"), "f8", chunks=(1, 128, 1024))
        for t in range(rows):
            v[t] = np.random.default_rng(i * 100000 + t).random((128, 1024))
'''

VIRTUALIZARR = r'''
import sys, glob, icechunk as ic
from obspec_utils.registry import ObjectStoreRegistry
from obstore.store import LocalStore
from virtualizarr import open_virtual_dataset
from virtualizarr.parsers import HDFParser
directory, path = sys.argv[1], sys.argv[2]
ic.set_logs_filter("error")
prefix = "file://" + directory + "/"
config = ic.RepositoryConfig.default()
config.set_virtual_chunk_container(ic.VirtualChunkContainer(prefix, ic.local_filesystem_store(directory)))
access = ic.containers_credentials({prefix: ic.credentials.LocalFileSystemAccess})
repo = ic.Repository.create(ic.local_filesystem_storage(path), config=config, authorize_virtual_chunk_access=access)
registry = ObjectStoreRegistry({prefix: LocalStore(prefix=directory)})
for i, name in enumerate(sorted(glob.glob(directory + "/*.nc"))):
    vds = open_virtual_dataset(url="file://" + name, parser=HDFParser(), registry=registry)
    s = repo.writable_session("main")
    vds.vz.to_icechunk(s.store, append_dim="time" if i else None)
    s.commit(f"file {i}")
'''

S3_REPO = r'''
import sys, json, datetime, zarr, icechunk as ic
path, endpoint, bucket = sys.argv[1], sys.argv[2], sys.argv[3]
refs = json.load(open(sys.argv[4]))
ic.set_logs_filter("error")
prefix = f"s3://{bucket}/"
config = ic.RepositoryConfig.default()
config.set_virtual_chunk_container(ic.VirtualChunkContainer(prefix, ic.s3_store(
    endpoint_url=endpoint, allow_http=True, region="us-east-1", force_path_style=True)))
access = ic.containers_credentials({prefix: ic.s3_credentials(access_key_id="testing", secret_access_key="testing")})
repo = ic.Repository.create(ic.local_filesystem_storage(path), config=config, authorize_virtual_chunk_access=access)
s = repo.writable_session("main")
n, size = len(refs), refs[0][2]
zarr.group(store=s.store).create_array("v", shape=(n, size), chunks=(1, size), dtype="u1", compressors=None)
s.store.set_virtual_refs("v", [ic.VirtualChunkSpec(index=[i, 0], location=loc, offset=0, length=length,
                                                   etag_checksum=etag) for i, (loc, etag, length) in enumerate(refs)],
                         validate_containers=False)
s.commit("one ref per object")
'''

FLOOR = r'''
import ctypes, hashlib, os, queue, sys, threading
# What any archive of these bytes must do, and nothing else: read them a MiB at a time, SHA-256 all of
# them in order on a thread of its own, write them out (the kernel asked to start writing every 32 MiB)
# and fsync. No repository is read, no record framed, no CRC taken.
out, sources = sys.argv[1], sys.argv[2:]
sync_file_range = ctypes.CDLL(None).sync_file_range
sync_file_range.argtypes = (ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint)
pending, hasher = queue.Queue(16), hashlib.sha256()
def hash_all():
    while (piece := pending.get()) is not None:
        hasher.update(piece)
worker = threading.Thread(target=hash_all)
worker.start()
fd, written, started = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644), 0, 0
for name in sources:
    source = os.open(name, os.O_RDONLY)
    while piece := os.read(source, 1 << 20):
        pending.put(piece)
        written += os.write(fd, piece)
        if written - started >= 32 << 20:
            sync_file_range(fd, started, written - started, 2)
            started = written
    os.close(source)
pending.put(None)
worker.join()
os.fsync(fd)
'''

ICECHUNK_READ = r'''
import sys, time, zarr, icechunk as ic
path, endpoint, bucket = sys.argv[1:4]
ic.set_logs_filter("error")
access = ic.containers_credentials({f"s3://{bucket}/": ic.s3_credentials(access_key_id="testing",
                                                                        secret_access_key="testing")})
start = time.perf_counter()
repo = ic.Repository.open(ic.local_filesystem_storage(path), authorize_virtual_chunk_access=access)
data = zarr.open_array(repo.readonly_session("main").store, path="v", mode="r")[:]
print(time.perf_counter() - start, data.nbytes)
'''


def _env() -> dict:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # users have compiled bytecode
    return env


def timed(cmd: list[str], sync: bool = False) -> float:
    """Seconds of ``cmd`` in a fresh process (then ``sync`` if asked)."""
    subprocess.run(["sync"], check=True)
    start = time.perf_counter()
    done = subprocess.run(cmd, env=_env(), capture_output=True, text=True)
    if done.returncode not in (0, 3):
        raise SystemExit(f"{cmd[:4]} failed ({done.returncode}): {done.stderr[-2000:]}")
    if sync:
        subprocess.run(["sync"], check=True)
    return time.perf_counter() - start


def _empty(directory: Path) -> None:
    """``directory``, emptied (made if missing)."""
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)


def zs(*args: str) -> list[str]:
    return [sys.executable, "-m", "zsarchive", *args]


def report(
    title: str, size: int, times: dict[str, list[float]], anchor: str, goals: dict[str, tuple[str, float]]
) -> None:
    print(f"{title}: {len(next(iter(times.values())))} rounds (medians), load average {os.getloadavg()[0]:.1f}")
    base = statistics.median(times[anchor])
    for name, runs in times.items():
        median = statistics.median(runs)
        line = f"  {name:40s} {median:7.2f} s" + (f"  {size / 1e6 / median:8.1f} MB/s" if size else "")
        if name in goals:
            kind, goal = goals[name]
            ratio = base / median if kind == "throughput" else median / base
            line += f"  {ratio:.2f}x {anchor}'s {kind}"
            if goal:  # none for a measure shown beside the goals (a floor)
                line += f" (goal {'>=' if kind == 'throughput' else '<='} {goal}x)"
        print(line)
    print("  runs, seconds: " + "; ".join(f"{k} " + " ".join(f"{t:.2f}" for t in v) for k, v in times.items()))


def local(args: argparse.Namespace) -> None:
    base = CACHE / f"virtual-local-{args.mib}"
    sources, repo = base / "src", base / "repo"
    if not (repo / "repo").exists():
        shutil.rmtree(base, ignore_errors=True)
        subprocess.run([str(IC2_PYTHON), "-c", NETCDF, str(sources), "16", str(args.mib)], check=True)
        subprocess.run([str(IC2_PYTHON), "-c", VIRTUALIZARR, str(sources), str(repo)], check=True)
    size = sum(p.stat().st_size for p in sources.iterdir())
    work = CACHE / "virtual-local-out"
    floor = "floor: read, SHA-256, write, fsync"
    times: dict[str, list[float]] = {"cp -r + sync": [], "zs export --include-virtual": [], floor: []}
    export = zs("export", str(repo), str(work / "a.zs"), "--include-virtual", "--no-progress")
    files = sorted(str(p) for p in sources.iterdir())
    for _ in range(args.runs):
        # Each writes where the other's output was just deleted: here a writer that follows another's
        # fresh gigabyte, still on the disk, ran 0.3-0.6 s slower (cp or zs, whichever went second).
        _empty(work)
        times["cp -r + sync"].append(timed(["cp", "-r", str(sources), str(work / "cp")], sync=True))
        _empty(work)
        times[floor].append(timed([sys.executable, "-c", FLOOR, str(work / "floor"), *files]))
        _empty(work)
        times["zs export --include-virtual"].append(timed([*export, "--authorize", f"file://{sources}/"]))
    kept = (work / "a.zs").stat().st_size
    shutil.rmtree(work, ignore_errors=True)
    report(
        f"{size / (1 << 20):.0f} MiB of NetCDF-4 in 16 files (archive {kept / (1 << 20):.0f} MiB)",
        size,
        times,
        "cp -r + sync",
        {"zs export --include-virtual": ("throughput", 0.6), floor: ("throughput", 0)},
    )


async def _obstore_ranges(store, refs: list, concurrency: int) -> int:
    import obstore

    gate = asyncio.Semaphore(concurrency)

    async def one(key: str, length: int) -> int:
        async with gate:
            parts = await obstore.get_ranges_async(store, key, starts=[0], ends=[length])
            return sum(len(p) for p in parts)

    return sum(await asyncio.gather(*(one(key, length) for key, length in refs)))


async def _obstore_heads(store, keys: list[str], concurrency: int) -> int:
    import obstore

    gate = asyncio.Semaphore(concurrency)

    async def one(key: str) -> int:
        async with gate:
            return (await obstore.head_async(store, key))["size"]

    return len(await asyncio.gather(*(one(key) for key in keys)))


def _bucket(objects: int, size: int):
    """moto on loopback with ``objects`` objects of ``size`` bytes in bucket ``sources``: (server context, refs)."""
    from toolkit.servers import moto_s3

    import logging
    from concurrent.futures import ThreadPoolExecutor

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # moto logs every request
    context = moto_s3({"sources": {}})
    client = context.__enter__()
    body = os.urandom(size)

    def put(i: int) -> tuple[str, str, int]:
        key = f"g/{i:06d}.bin"
        etag = client.put_object(Bucket="sources", Key=key, Body=body[i % size :] + body[: i % size])["ETag"]
        return f"s3://sources/{key}", etag, size

    with ThreadPoolExecutor(16) as pool:
        refs = list(pool.map(put, range(objects)))
    return context, client, refs


def s3(args: argparse.Namespace) -> None:
    from obstore.store import S3Store

    size = args.range_kib << 10
    context, client, refs = _bucket(args.objects, size)
    try:
        endpoint = client.meta.endpoint_url
        base = CACHE / "virtual-s3"
        shutil.rmtree(base, ignore_errors=True)
        base.mkdir(parents=True)
        (base / "refs.json").write_text(json.dumps(refs))
        subprocess.run(
            [str(IC2_PYTHON), "-c", S3_REPO, str(base / "repo"), endpoint, "sources", str(base / "refs.json")],
            check=True,
        )
        store = S3Store("sources", endpoint=endpoint, region="us-east-1", client_options={"allow_http": True})
        keys = [(loc.removeprefix("s3://sources/"), n) for loc, _, n in refs]
        times: dict[str, list[float]] = {
            "obstore get_ranges": [],
            "zs export --include-virtual": [],
            "icechunk reading every chunk": [],
        }
        for _ in range(args.runs):
            start = time.perf_counter()
            got = asyncio.run(_obstore_ranges(store, keys, args.concurrency))
            times["obstore get_ranges"].append(time.perf_counter() - start)
            assert got == size * len(refs)
            archive = base / "a.zs"
            archive.unlink(missing_ok=True)
            times["zs export --include-virtual"].append(
                timed(
                    zs(
                        "export",
                        str(base / "repo"),
                        str(archive),
                        "--include-virtual",
                        "--no-progress",
                        "--authorize",
                        "s3://sources/ region=us-east-1",
                    )
                )
            )
            read = subprocess.run(
                [str(IC2_PYTHON), "-c", ICECHUNK_READ, str(base / "repo"), endpoint, "sources"],
                capture_output=True,
                text=True,
                check=True,
                env=dict(os.environ, RUST_LOG="error"),
            )
            seconds, nbytes = read.stdout.split()
            assert int(nbytes) == size * len(refs)
            times["icechunk reading every chunk"].append(float(seconds))
    finally:
        context.__exit__(None, None, None)
    total = size * len(refs)
    report(
        f"{len(refs)} objects of {args.range_kib} KiB on moto S3, {args.concurrency} requests in flight",
        total,
        times,
        "obstore get_ranges",
        {"zs export --include-virtual": ("throughput", 0.8)},
    )
    ours, theirs = (
        statistics.median(times["zs export --include-virtual"]),
        statistics.median(times["icechunk reading every chunk"]),
    )
    print(f"  zs export --include-virtual is {theirs / ours:.2f}x icechunk's throughput (goal >= 1.5x)")


def check(args: argparse.Namespace) -> None:
    from obstore.store import S3Store

    context, client, refs = _bucket(args.objects, 1024)
    try:
        endpoint = client.meta.endpoint_url
        base = CACHE / "virtual-check"
        shutil.rmtree(base, ignore_errors=True)
        base.mkdir(parents=True)
        (base / "refs.json").write_text(json.dumps(refs))
        subprocess.run(
            [str(IC2_PYTHON), "-c", S3_REPO, str(base / "repo"), endpoint, "sources", str(base / "refs.json")],
            check=True,
        )
        archive = base / "a.zs"
        subprocess.run(zs("export", str(base / "repo"), str(archive), "--no-progress"), check=True, env=_env())
        store = S3Store("sources", endpoint=endpoint, region="us-east-1", client_options={"allow_http": True})
        keys = [loc.removeprefix("s3://sources/") for loc, _, _ in refs]
        times: dict[str, list[float]] = {"obstore HEADs": [], "zs sources --check": []}
        for _ in range(args.runs):
            start = time.perf_counter()
            assert asyncio.run(_obstore_heads(store, keys, 64)) == len(keys)
            times["obstore HEADs"].append(time.perf_counter() - start)
            times["zs sources --check"].append(
                timed(zs("sources", str(archive), "--check", "--json", "--authorize", "s3://sources/ region=us-east-1"))
            )
    finally:
        context.__exit__(None, None, None)
    report(f"{len(refs)} objects on moto S3", 0, times, "obstore HEADs", {"zs sources --check": ("time", 1.2)})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="what", required=True)
    one = sub.add_parser("local")
    one.add_argument("--mib", type=int, default=1024)
    two = sub.add_parser("s3")
    two.add_argument("--objects", type=int, default=4000)
    two.add_argument("--range-kib", type=int, default=256)
    two.add_argument("--concurrency", type=int, default=16)
    three = sub.add_parser("check")
    three.add_argument("--objects", type=int, default=10_000)
    for each in (one, two, three):
        each.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    {"local": local, "s3": s3, "check": check}[args.what](args)


if __name__ == "__main__":
    main()
