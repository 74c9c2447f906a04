"""Benchmark: the rows of the export-speed table, each beside its icechunk (or full-export) anchor.

    .venv/bin/python scripts/bench_speed.py [--refs N] [--runs K]

On the V2 repository of N virtual refs that scripts/bench_icechunk_manifest.py builds (cached under
.bench/, written by icechunk 2.x), and a copy of it with one more commit of 1,000 rewritten refs, in
one run, K times each, interleaved (every measure once per round), whole processes with default
options:

1. ``zs export`` vs a fresh icechunk process opening the repository and enumerating every chunk
   coordinate (its in-process open + enumerate time). Goal <= 1.0x.
2. the archive's size vs the repository's metadata (every file but chunks/). Goal <= 0.5x.
3. one cold ``zs chunk --json`` lookup vs a fresh icechunk process asking ``chunk_type``. Goal <= 0.12x.
   Both are whole processes with a normal interpreter start (site and its .pth files): icechunk's
   venv in .peers/ic2, and ours an interpreter that starts as a user's (non-editable) install does
   (``bench_zs.user_python``: the development venv's site-packages without its editable-install
   finder, whose imports at every start no installed copy pays), zsarchive from PYTHONPATH, byte
   code compiled.
4. ``zs export --base`` after the 1,000-ref commit vs a full export of that repository. Goal <= 0.3x.

``--against TREE`` (a directory holding another version's ``zsarchive/`` package, e.g. ``git archive
COMMIT | tar -x -C TREE``) also times that version's ``zs export``, full and ``--base``, in the same
rounds beside this tree's once more, wall-clock and CPU seconds (user + system, which a loaded machine
disturbs least): a change must not make export slower (goal <= 1.0x, within the noise the runs show).

Prints medians; the manifest-delta history size is scripts/bench_manifest_deltas.py's.
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))

import bench_export  # noqa: E402
import bench_icechunk_manifest as icbench  # noqa: E402
import bench_zs  # noqa: E402

COMMIT = """
import sys, icechunk as ic
ic.set_logs_filter("error")
repo = ic.Repository.open(ic.local_filesystem_storage(sys.argv[1]))
session = repo.writable_session("main")
n, row = int(sys.argv[2]), int(sys.argv[3])
specs = [ic.VirtualChunkSpec(index=[i, 0], location=f"{sys.argv[4]}rewritten.nc", offset=4 * row * k, length=4 * row)
         for k, i in enumerate(range(0, n, max(1, n // 1000)))][:1000]
session.store.set_virtual_refs(sys.argv[5], specs, validate_containers=False)
session.commit("rewrite 1,000 refs")
"""


def committed_copy(repo: Path) -> Path:
    """The repository with one more commit rewriting 1,000 refs (cached beside it)."""
    target = repo.with_name(repo.name + "-plus1000")
    if not (target / "repo").is_file():
        partial = target.with_name(target.name + ".partial")
        shutil.rmtree(partial, ignore_errors=True)
        shutil.copytree(repo, partial)
        refs = int(repo.name.rsplit("-", 1)[1])
        subprocess.run(
            [
                str(icbench.IC2_PYTHON),
                "-c",
                COMMIT,
                str(partial),
                str(refs),
                str(icbench.ROW),
                icbench.PREFIX,
                icbench.ARRAY,
            ],
            check=True,
        )
        partial.rename(target)
    return target


def zs(*args: str) -> list[str]:
    return [bench_zs.user_python(), "-m", "zsarchive", *args]


def wall_and_cpu(cmd: list[str], env: dict) -> tuple[float, float]:
    """Seconds of ``cmd`` in a fresh process: on the clock, and of CPU (user + system, the figure a
    loaded machine disturbs least)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    seconds = bench_export.wall(cmd, env)[0]
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return seconds, after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime


def against(
    tree: Path, ours: dict[str, list[tuple[float, float]]], theirs: dict[str, list[tuple[float, float]]]
) -> None:
    """This tree's export times beside those of the version in ``tree``, row by row (medians of the
    wall-clock and the CPU seconds)."""
    print(f"this tree vs {tree} (the same rounds, interleaved): wall / CPU seconds")
    print(f"{'measure':<30} {'other':>12} {'this':>12} {'ratio':>13}  goal")
    for key, what in (
        ("export", "zs export"),
        ("full", "zs export (one commit more)"),
        ("fragment", "zs export --base"),
    ):
        this = [statistics.median(t[i] for t in ours[key]) for i in (0, 1)]
        other = [statistics.median(t[i] for t in theirs[key]) for i in (0, 1)]
        print(
            f"{what:<30} {other[0]:5.2f}/{other[1]:5.2f} {this[0]:5.2f}/{this[1]:5.2f} "
            f"{this[0] / other[0]:5.2f}x/{this[1] / other[1]:5.2f}x  <= 1.0x"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--refs", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--against", type=Path, help="another version's source tree, timed beside this one")
    args = parser.parse_args()
    if args.against is not None and not (args.against / "zsarchive" / "__init__.py").is_file():
        parser.error(f"--against {args.against}: no zsarchive package there")

    repo = icbench.ensure_repo(args.refs)
    grown = committed_copy(repo)
    bench_zs.precompile()  # fresh processes load byte code, as an installed copy does
    env = {**os.environ, "PYTHONWARNINGS": "ignore", "PYTHONPATH": str(ROOT)}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    other_env = None
    if args.against is not None:
        compileall.compile_dir(str(args.against / "zsarchive"), quiet=1)
        other_env = {**env, "PYTHONPATH": str(args.against.resolve())}
    mine: dict[str, list[tuple[float, float]]] = {k: [] for k in ("export", "fragment", "full")}
    theirs: dict[str, list[tuple[float, float]]] = {k: [] for k in ("export", "fragment", "full")}
    times: dict[str, list[float]] = {k: [] for k in ("export", "enumerate", "lookup", "chunk_type", "fragment", "full")}
    probe = args.refs * 2 // 3
    with tempfile.TemporaryDirectory(dir=ROOT / ".bench") as tmp:
        archive, base, fragment, full = (Path(tmp) / name for name in ("a.zs", "base.zs", "f.zs", "full.zs"))
        subprocess.run(zs("export", str(repo), str(base)), check=True, capture_output=True, env=env)
        other_base = Path(tmp) / "other-base.zs"  # each version's fragment on its own version's base
        if other_env is not None:
            subprocess.run(zs("export", str(repo), str(other_base)), check=True, capture_output=True, env=other_env)
        for _ in range(args.runs):
            for path in (archive, fragment, full):
                path.unlink(missing_ok=True)
            times["export"].append(bench_export.wall(zs("export", str(repo), str(archive)), env)[0])
            out = subprocess.run(
                [str(icbench.IC2_PYTHON), icbench.__file__, "--icechunk-enumerate", str(repo)],
                check=True,
                capture_output=True,
                text=True,
                env=env,
            )
            run = json.loads(out.stdout.strip().splitlines()[-1])
            times["enumerate"].append(run["open_s"] + run["enumerate_s"])
            seconds, text = bench_export.wall(
                zs("chunk", str(archive), "main", "/" + icbench.ARRAY, f"{probe},0", "--json"), env
            )
            assert '"virtual"' in text, text
            times["lookup"].append(seconds)
            seconds, text = bench_export.wall(
                [str(icbench.IC2_PYTHON), "-c", bench_export.CHUNK_TYPE, str(repo), str(probe)], env
            )
            times["chunk_type"].append(seconds)
            times["fragment"].append(
                bench_export.wall(zs("export", str(grown), str(fragment), "--base", str(base)), env)[0]
            )
            times["full"].append(bench_export.wall(zs("export", str(grown), str(full)), env)[0])
            if other_env is not None:  # both versions once more, the other first, CPU seconds counted
                for side, side_env, side_base in ((theirs, other_env, other_base), (mine, env, base)):
                    for path in (archive, fragment, full):
                        path.unlink(missing_ok=True)
                    side["export"].append(wall_and_cpu(zs("export", str(repo), str(archive)), side_env))
                    side["fragment"].append(
                        wall_and_cpu(zs("export", str(grown), str(fragment), "--base", str(side_base)), side_env)
                    )
                    side["full"].append(wall_and_cpu(zs("export", str(grown), str(full)), side_env))
        size, meta = archive.stat().st_size, bench_export.metadata_size(repo)
    med = {k: statistics.median(v) for k, v in times.items()}
    load = os.getloadavg()[0]
    print(
        f"{args.refs:,} virtual refs ({repo}); medians of {args.runs} interleaved runs; load average {load:.1f} "
        f"on {os.cpu_count()} cores (a shared machine: wall times are noisy, read the ratios)"
    )
    rows = [
        (
            "zs export vs icechunk open + enumerate",
            f"{med['enumerate']:.2f} s",
            f"{med['export']:.2f} s",
            med["export"] / med["enumerate"],
            1.0,
        ),
        ("archive size vs repository metadata", f"{meta / 1e6:.1f} MB", f"{size / 1e6:.1f} MB", size / meta, 0.5),
        (
            "cold zs chunk vs icechunk chunk_type",
            f"{med['chunk_type']:.3f} s",
            f"{med['lookup']:.3f} s",
            med["lookup"] / med["chunk_type"],
            0.12,
        ),
        (
            "export --base after 1,000 refs vs full",
            f"{med['full']:.2f} s",
            f"{med['fragment']:.2f} s",
            med["fragment"] / med["full"],
            0.3,
        ),
    ]
    print(f"{'measure':<42} {'anchor':>10} {'zsarchive':>10} {'ratio':>7}  goal")
    for what, anchor, ours, ratio, goal in rows:
        print(f"{what:<42} {anchor:>10} {ours:>10} {ratio:6.2f}x  <= {goal}x{'' if ratio <= goal else '  (missed)'}")
    if args.against is not None:
        against(args.against, mine, theirs)


if __name__ == "__main__":
    main()
