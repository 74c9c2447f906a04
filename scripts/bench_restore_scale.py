"""Benchmark: `zs restore` at scale, beside icechunk writing the same repository and `zs export` of it.

    .venv/bin/python scripts/bench_restore_scale.py [--refs 1000000,4000000] [--shapes files,rows] [--runs K]
    .venv/bin/python scripts/bench_restore_scale.py --refs 10000000 --shapes files
    .venv/bin/python scripts/bench_restore_scale.py --refs 10000000 --shapes split

Each repository holds one array of N virtual refs (chunks of 1,000 float32, ``index=[i, 0]``) pointing
into 1,000 source files of 4,000-byte ranges, written in one commit by the real icechunk 2.x, in one of
these shapes:

- ``files`` (the default's first): the refs of one file are consecutive (file ``i * 1000 // N``, its
  ranges one after the other), ONE manifest (icechunk's default, no splitting);
- ``rows``: the export benchmark's (``scripts/bench_icechunk_manifest.py``): ref ``i`` in file ``i % 1000``,
  ONE manifest;
- ``split``: as ``files``, with manifest splitting every 1,000,000 chunks along the first axis (N / 1 M
  manifests).

``--plain`` stores the locations plain instead of compressed with a dictionary (icechunk's default).

For every shape and size, K times, alternating, each a fresh process timed whole (wall time, peak
resident memory and CPU time, user + system, from ``wait4``: on a loaded machine the CPU time moves
less): icechunk writing the repository (create, set the refs, commit), ``zs export`` of what it wrote,
``zs restore`` of that archive. Prints medians and the ratios the goals name:
restore / icechunk write (time and peak memory, goal <= 0.5x), restore / export at 1 M refs (goal <=
1.5x), and restore at each size over restore at the smallest (goal: at 4x the refs, <= 4.5x the time).
Each restored repository's manifests are checked to be as long as the snapshots say.

``--sweep`` measures instead the manifest encoder alone, in this process, on refs of every shape the
restore meets (plain and dictionary-compressed locations, 1 to 1,000,000 distinct locations, native,
inline, virtual and mixed refs, etags and last-modified times), at each size of ``--refs``: seconds,
nanoseconds per ref and the ratio between sizes (linear: the ratio of the sizes).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
IC2_PYTHON = ROOT / ".peers" / "ic2" / "bin" / "python"
ROW = 1000  # float32 elements per chunk: 4,000 bytes
FILES = 1000
PREFIX = "s3://zsarchive-bench/granules/"
SPLIT = 1_000_000  # chunks per manifest in the ``split`` shape


def build(directory: Path, n: int, shape: str, plain: bool) -> None:
    """Write the repository (run under icechunk 2.x)."""
    import icechunk as ic
    import zarr

    ic.set_logs_filter("error")
    config = ic.RepositoryConfig.default()
    if plain:  # no training samples, no dictionary: the locations stay plain
        never = ic.ManifestVirtualChunkLocationCompressionConfig(dictionary_max_training_samples=0)
        config.manifest = ic.ManifestConfig(virtual_chunk_location_compression=never)
    if shape == "split":
        splitting = ic.ManifestSplittingConfig.from_dict(
            {ic.ManifestSplitCondition.AnyArray(): {ic.ManifestSplitDimCondition.Axis(0): SPLIT}}
        )
        config.manifest = ic.ManifestConfig(
            splitting=splitting,
            virtual_chunk_location_compression=config.manifest.virtual_chunk_location_compression
            if config.manifest
            else None,
        )
    repo = ic.Repository.create(ic.local_filesystem_storage(str(directory)), config=config)
    session = repo.writable_session("main")
    zarr.group(store=session.store).create_array(
        "v", shape=(n, ROW), chunks=(1, ROW), dtype="f4", compressors=None, fill_value=0
    )
    per_file = -(-n // FILES)
    batch = 200_000
    for start in range(0, n, batch):
        if shape == "rows":
            specs = [
                ic.VirtualChunkSpec(
                    index=[i, 0],
                    location=f"{PREFIX}file{i % FILES:04d}.nc",
                    offset=4 * ROW * (i // FILES),
                    length=4 * ROW,
                )
                for i in range(start, min(n, start + batch))
            ]
        else:
            specs = [
                ic.VirtualChunkSpec(
                    index=[i, 0],
                    location=f"{PREFIX}file{i // per_file:04d}.nc",
                    offset=4 * ROW * (i % per_file),
                    length=4 * ROW,
                )
                for i in range(start, min(n, start + batch))
            ]
        session.store.set_virtual_refs("v", specs, validate_containers=False)
        del specs
    session.commit(f"{n} virtual refs")


def sweep_table(shape: str, n: int):
    """A RefTable of ``n`` refs of ``shape`` (one array, 2-d coordinates, in order), and its dictionary."""
    import numpy as np

    from zsarchive.icechunk.manifest.refs import INLINE, NATIVE, VIRTUAL, RefTable

    kind_of = {"native": NATIVE, "inline": INLINE}.get(shape.split(":")[0], VIRTUAL)
    distinct = min(n, int(shape.split(":")[1])) if ":" in shape and shape.split(":")[1].isdigit() else 1000
    coords = np.stack([np.arange(n), np.zeros(n, np.int64)], axis=1).astype(np.uint32)
    kind = np.full(n, kind_of, np.uint8)
    if shape == "mixed":
        kind = np.array([VIRTUAL, NATIVE, INLINE], np.uint8)[np.arange(n) % 3]
    per = -(-n // distinct)
    from zsarchive.icechunk import ids as object_ids

    ids = (
        [object_ids.encode(i.to_bytes(12, "big")) for i in range(n)] if kind_of == NATIVE or shape == "mixed" else []
    )  # a chunk file per native ref
    locations = [
        f"s3://bucket/granules/{'plain' if shape.startswith('plain') else 'set'}/file{i:07d}.nc"
        for i in range(distinct)
    ]
    text = np.arange(n, dtype=np.int64) // per
    texts = locations
    if kind_of == NATIVE or shape == "mixed":
        texts = locations + ids
        native = kind == NATIVE
        text[native] = len(locations) + np.arange(n)[native] % len(ids)
    blobs = (
        [bytes([i % 251]) * 16 + i.to_bytes(4, "little") for i in range(min(n, 100_000))]
        if kind_of == INLINE or shape == "mixed"
        else []
    )
    inline = np.where(kind == INLINE, np.arange(n) % max(len(blobs), 1), -1)
    offset = (4000 * (np.arange(n) % per)).astype(np.uint64)
    etags = ["etag-a", "etag-b"] if shape == "etags" else []
    etag = np.where(np.arange(n) % 7 == 0, np.arange(n) % 2, -1) if etags else np.full(n, -1, np.int64)
    modified = (
        np.where(np.arange(n) % 5 == 0, 1_700_000_000, 0).astype(np.uint32)
        if shape == "etags"
        else np.zeros(n, np.uint32)
    )
    table = RefTable(
        coords, kind, text, texts, offset, np.full(n, 4000, np.uint64), etag, etags, modified, inline, blobs
    )
    dictionary = None
    if not shape.startswith("plain") and kind_of == VIRTUAL or shape == "mixed":
        import zstandard

        samples = [f"s3://bucket/granules/set/file{i:07d}.nc".encode() for i in range(0, 10**6, 500)]
        dictionary = zstandard.train_dictionary(2048, samples).as_bytes()
    return table, dictionary


SWEEP = [
    "virtual:1",
    "virtual:1000",
    "virtual:1000000",
    "plain:1000",
    "plain:1000000",
    "native",
    "inline",
    "mixed",
    "etags",
]


def sweep(sizes: list[int]) -> None:
    """The encoder's time per shape and size, in this process."""
    from zsarchive.icechunk.manifest.encode import encode_manifest

    print(f"load average at the start: {os.getloadavg()[0]:.1f}; the manifest encoder alone, one process")
    print(f"{'shape':18s} " + " ".join(f"{n:>22,}" for n in sizes) + "   ratio (refs ratio)")
    for shape in SWEEP:
        cells, seconds = [], []
        for n in sizes:
            table, dictionary = sweep_table(shape, n)
            t0 = time.perf_counter()
            raw = encode_manifest(
                "M" * 19 + "0", [("A" * 12 + "0", table)], 2, "ic-2.3.0", location_dictionary=dictionary
            )
            seconds.append(time.perf_counter() - t0)
            cells.append(f"{seconds[-1]:6.2f} s {seconds[-1] / n * 1e9:5.0f} ns/ref")
            del table, raw
        print(
            f"{shape:18s} "
            + " ".join(f"{c:>22s}" for c in cells)
            + f"   {seconds[-1] / seconds[0]:.2f}x ({sizes[-1] / sizes[0]:.0f}x)",
            flush=True,
        )


def timed(cmd: list[str], env: dict | None = None) -> tuple[float, float, float, str]:
    """(wall seconds, peak resident MiB, CPU seconds (user + system), stdout) of one process, waited for
    with wait4."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, env=env, stdout=out, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)
        seconds = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        if proc.returncode:
            raise SystemExit(
                f"{' '.join(map(str, cmd[:5]))} failed ({proc.returncode}): "
                f"{err.read().decode(errors='replace')[-2000:]}"
            )
        return seconds, usage.ru_maxrss / 1024, usage.ru_utime + usage.ru_stime, out.read().decode(errors="replace")


def check_lengths(original: Path, restored: Path) -> str:
    """How the restored manifests' lengths compare with the original's (the snapshots name those)."""
    same = differ = 0
    for path in (original / "manifests").iterdir():
        if (restored / "manifests" / path.name).stat().st_size == path.stat().st_size:
            same += 1
        else:
            differ += 1
    return f"{same} manifest(s) of the original's length" + (f", {differ} resized" if differ else "")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--refs", default="1000000,4000000", help="comma-separated sizes (refs)")
    parser.add_argument("--shapes", default="files,rows", help="comma-separated: files, rows, split")
    parser.add_argument("--plain", action="store_true", help="plain locations (no dictionary)")
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--sweep", action="store_true", help="time the manifest encoder alone on every shape")
    parser.add_argument("--build-only", type=Path, metavar="DIR", help=argparse.SUPPRESS)
    args = parser.parse_args()
    sizes = [int(s) for s in args.refs.split(",")]
    shapes = args.shapes.split(",")
    if args.build_only:
        build(args.build_only, sizes[0], shapes[0], args.plain)
        os._exit(0)  # icechunk's runtime teardown is not part of the write
    if args.sweep:
        sys.path.insert(0, str(ROOT))
        return sweep(sizes)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}  # users have bytecode
    env["PYTHONPATH"] = str(ROOT)
    zs = [sys.executable, "-m", "zsarchive"]
    print(
        f"load average at the start: {os.getloadavg()[0]:.1f}; {args.runs} run(s) each, medians; locations "
        f"{'plain' if args.plain else 'dictionary-compressed'}"
    )
    print(
        f"{'shape':6s} {'refs':>10s}  {'icechunk write':>20s}  {'zs export':>20s}  {'zs restore':>20s}  "
        f"{'restore/write':>13s} {'memory':>6s} {'restore/export':>14s}"
    )
    rows: dict[tuple[str, int], dict[str, tuple[float, float, float]]] = {}
    (ROOT / ".bench").mkdir(exist_ok=True)
    for shape in shapes:
        for n in sizes:
            samples: dict[str, list[tuple[float, float, float]]] = {"write": [], "export": [], "restore": []}
            note = ""
            with tempfile.TemporaryDirectory(prefix="bench-restore-scale-", dir=ROOT / ".bench") as tmp:
                work = Path(tmp)
                for _ in range(args.runs):
                    repo, archive, target = work / "repo", work / "a.zs", work / "restored"
                    shutil.rmtree(repo, ignore_errors=True)
                    shutil.rmtree(target, ignore_errors=True)
                    archive.unlink(missing_ok=True)
                    build_cmd = [
                        str(IC2_PYTHON),
                        __file__,
                        "--build-only",
                        str(repo),
                        "--refs",
                        str(n),
                        "--shapes",
                        shape,
                    ] + (["--plain"] if args.plain else [])
                    samples["write"].append(timed(build_cmd)[:3])
                    samples["export"].append(timed([*zs, "export", str(repo), str(archive), "--no-progress"], env)[:3])
                    samples["restore"].append(
                        timed([*zs, "restore", str(archive), str(target), "--no-progress"], env)[:3]
                    )
                    note = check_lengths(repo, target)
            row = rows[shape, n] = {
                task: (
                    statistics.median(s for s, _, _ in got),
                    max(m for _, m, _ in got),
                    statistics.median(c for _, _, c in got),
                )
                for task, got in samples.items()
            }
            w, e, r = row["write"], row["export"], row["restore"]
            print(
                f"{shape:6s} {n:>10,}  {w[0]:7.2f} s {w[1]:6.0f} MiB  {e[0]:7.2f} s {e[1]:6.0f} MiB  "
                f"{r[0]:7.2f} s {r[1]:6.0f} MiB  {r[0] / w[0]:12.2f}x {r[1] / w[1]:5.2f}x "
                f"{r[0] / e[0]:13.2f}x   CPU {w[2]:.2f} / {e[2]:.2f} / {r[2]:.2f} s   {note}",
                flush=True,
            )
    print("goals: restore/write <= 0.5x in time and memory; restore/export <= 1.5x at 1 M refs")
    for shape in shapes:
        first = sizes[0]
        for n in sizes[1:]:
            wall = rows[shape, n]["restore"][0] / rows[shape, first]["restore"][0]
            cpu = rows[shape, n]["restore"][2] / rows[shape, first]["restore"][2]
            print(
                f"{shape}: restore at {n:,} refs / at {first:,}: {wall:.2f}x the wall time, {cpu:.2f}x the CPU "
                f"time for {n / first:.0f}x the refs (goal at 4x: <= 4.5x)"
            )


if __name__ == "__main__":
    main()
