"""Benchmark: chunk bytes embedded in an archive, against icechunk, cp and zarr over nginx, in one run.

    .venv/bin/python scripts/bench_chunks.py [--mib 1024] [--runs 3]

Builds (once, cached under ``.bench/``) a spec V2 repository written by the real icechunk 2.x
(``.peers/ic2``): array ``plain`` of ``--mib`` MiB of random float32 in uncompressed 1 MiB chunks,
and array ``sharded``: one 64 MiB shard of 128 KiB inner chunks (index at the end, crc32c). Then:

1. export: ``zs export --include-chunks --codec none`` (fsyncs) against ``cp -r chunks/`` + ``sync``
   of the same repository (goal: our throughput at least 0.5x cp's);
2. local read: every chunk of ``plain`` through the archive's zarr store (codec none: views into the
   map) against a fresh icechunk 2.x process reading it through its own store (goal: at least 0.8x
   icechunk's throughput);
3. HTTP: nginx on loopback serves the archive and the same sharded array written by zarr-python as a
   plain zarr v3 directory; from an opened store (one inner chunk of the first shard read before),
   the requests and bytes nginx logs for the first inner chunk read of the second shard, then for
   another of that shard, through our store and through zarr-python's FsspecStore on the directory
   (goal: 1 request of at most the inner chunk plus one piece, against zarr's 2).
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT))

from toolkit.servers import Nginx  # noqa: E402

CACHE = ROOT / ".bench"
IC2_PYTHON = ROOT / ".peers" / "ic2" / "bin" / "python"

BUILD = r'''
import sys, shutil, numpy as np, icechunk as ic, zarr
path, plain_dir, mib = sys.argv[1], sys.argv[2], int(sys.argv[3])
ic.set_logs_filter("error")
shutil.rmtree(path, ignore_errors=True)
repo = ic.Repository.create(ic.local_filesystem_storage(path))
s = repo.writable_session("main")
root = zarr.group(store=s.store)
rng = np.random.default_rng(0)
plain = root.create_array("plain", shape=(mib * 256, 1024), chunks=(256, 1024), dtype="f4", compressors=None)
for i in range(0, mib * 256, 256 * 64):
    plain[i:i + 256 * 64] = rng.random((min(256 * 64, mib * 256 - i), 1024), dtype="f4")
data = rng.random((4096, 4096), dtype="f4")
for g in (root, zarr.group(store=zarr.storage.LocalStore(plain_dir), overwrite=True)):
    g.create_array("sharded", shape=(8192, 4096), chunks=(128, 256), shards=(4096, 4096), dtype="f4",
                   compressors=None)[...] = np.concatenate([data, data[::-1]])
s.commit("plain and sharded")
'''

ICECHUNK_READ = r'''
import sys, time, json, hashlib, icechunk as ic, zarr
ic.set_logs_filter("error")
repo = ic.Repository.open(ic.local_filesystem_storage(sys.argv[1]))
t0 = time.perf_counter()
data = zarr.open_array(store=repo.readonly_session(branch="main").store, path="plain", mode="r")[...]
elapsed = time.perf_counter() - t0
print(json.dumps({"seconds": elapsed, "sha256": hashlib.sha256(data.tobytes()).hexdigest()}))
'''


def ensure_repo(mib: int) -> tuple[Path, Path]:
    """The cached repository and the zarr directory of the sharded array."""
    repo, plain = CACHE / f"chunks-{mib}", CACHE / f"chunks-{mib}-zarr"
    if not (repo / "refs").is_dir():
        print(f"building {repo} with icechunk 2.x ...", file=sys.stderr)
        CACHE.mkdir(exist_ok=True)
        shutil.rmtree(plain, ignore_errors=True)
        subprocess.run([str(IC2_PYTHON), "-c", BUILD, str(repo), str(plain), str(mib)], check=True)
    return repo, plain


def bench_export(repo: Path, work: Path, runs: int) -> tuple[float, float, int]:
    """Median seconds of our export and of cp -r + sync, and the bytes of chunks/."""
    from zsarchive.archive import export

    size = sum(p.stat().st_size for p in (repo / "chunks").iterdir())
    ours, cp = [], []
    for _ in range(runs):
        target = work / "a.zs"
        target.unlink(missing_ok=True)
        t0 = time.perf_counter()
        export(repo, target, include_chunks=True, codec="none", parallelism=2)
        ours.append(time.perf_counter() - t0)
        shutil.rmtree(work / "copy", ignore_errors=True)
        t0 = time.perf_counter()
        subprocess.run(["cp", "-r", str(repo / "chunks"), str(work / "copy")], check=True)
        subprocess.run(["sync"], check=True)
        cp.append(time.perf_counter() - t0)
    return statistics.median(ours), statistics.median(cp), size


def bench_local_read(repo: Path, archive: Path, runs: int) -> tuple[float, float]:
    """Median seconds reading ``plain`` whole: ours (zero-copy store), icechunk's own store."""
    import hashlib

    import zarr

    from zsarchive import open_store

    ours, theirs, digests = [], [], set()
    for _ in range(runs):
        t0 = time.perf_counter()
        store = open_store(archive, "main")
        data = zarr.open_array(store=store, path="plain", mode="r")[...]
        ours.append(time.perf_counter() - t0)
        digests.add(hashlib.sha256(data.tobytes()).hexdigest())
        del data
        store.close()
        out = subprocess.run([str(IC2_PYTHON), "-c", ICECHUNK_READ, str(repo)], check=True, capture_output=True)
        answer = json.loads(out.stdout)
        theirs.append(answer["seconds"])
        digests.add(answer["sha256"])
    if len(digests) != 1:
        raise SystemExit("the archive's array differs from icechunk's")
    return statistics.median(ours), statistics.median(theirs)


def bench_http(archive: Path, plain: Path) -> dict[str, tuple[int, int]]:
    """(requests, bytes) nginx logs for one inner chunk read: ours, and zarr's from the directory."""
    import zarr

    from zsarchive import open_store

    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        nginx = Nginx(Path(tmp) / "root", Path(tmp) / "prefix")
        nginx.root.mkdir()
        nginx.prefix.mkdir()
        shutil.copy(archive, nginx.root / "a.zs")
        shutil.copytree(plain, nginx.root / "plain.zarr")
        nginx.start()
        try:
            store = open_store(nginx.url("a.zs"), "main")
            array = zarr.open_array(store=store, path="sharded", mode="r")
            array[0:128, 0:256]  # warm: the index blocks on the way
            fs = zarr.storage.FsspecStore.from_url(nginx.url("plain.zarr"), read_only=True)
            theirs = zarr.open_array(store=fs, path="sharded", mode="r")
            theirs[0:128, 0:256]
            got, same = [], []
            # an inner chunk of the second shard (its part of the archive's index not read yet), then
            # another inner chunk of that shard
            for n, (rows, cols) in enumerate(
                ((slice(4224, 4352), slice(512, 768)), (slice(4480, 4608), slice(1024, 1280)))
            ):
                for who, arr, into in (("zsarchive", array, got), ("zarr directory", theirs, same)):
                    mark = nginx.mark()
                    into.append(arr[rows, cols])
                    seen = nginx.requests_since(mark)
                    out[f"{who}, {'first' if n == 0 else 'next'} inner chunk of a shard"] = (
                        len(seen),
                        sum(r.bytes_sent for r in seen),
                    )
            if not all((a == b).all() for a, b in zip(got, same)):
                raise SystemExit("the archive's inner chunk differs from zarr's")
            store.close()
        finally:
            nginx.stop()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=int, default=1024, help="size of the plain array in MiB (default 1024)")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    repo, plain = ensure_repo(args.mib)
    with tempfile.TemporaryDirectory(dir=CACHE) as tmp:
        work = Path(tmp)
        ours, cp, size = bench_export(repo, work, args.runs)
        print(
            f"export --include-chunks ({size / 2**20:.0f} MiB of chunks): zsarchive {ours:.2f} s "
            f"({size / ours / 2**20:.0f} MiB/s), cp -r + sync {cp:.2f} s ({size / cp / 2**20:.0f} MiB/s); "
            f"throughput ratio {cp / ours:.2f}x (goal >= 0.5x)"
        )
        archive = work / "a.zs"
        read_ours, read_ic = bench_local_read(repo, archive, args.runs)
        mib = args.mib
        print(
            f"local read of {mib} MiB: zsarchive {read_ours:.2f} s ({mib / read_ours:.0f} MiB/s), icechunk "
            f"{read_ic:.2f} s ({mib / read_ic:.0f} MiB/s); throughput ratio {read_ic / read_ours:.2f}x "
            "(goal >= 0.8x)"
        )
        for who, (requests, nbytes) in bench_http(archive, plain).items():
            print(f"128 KiB inner chunks of 64 MiB shards over nginx, {who}: {requests} requests, {nbytes} bytes")


if __name__ == "__main__":
    main()
