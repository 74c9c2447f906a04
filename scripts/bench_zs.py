#!/usr/bin/env python3
"""Benchmark zsarchive's ZS engine against the reference zs 0.10.0, side by side, same data.

Generates a deterministic sorted n-gram-like text file (~70 MB, 1.5 M records; --quick: ~7 MB),
then, alternating reference and ours in every round, times:

  make      ``zs make`` of the text file (deflate and lzma, default settings otherwise)
  dump      ``zs dump`` of the reference-made file to /dev/null
  validate  ``zs validate`` of the reference-made file
  lookups   2,000 random ``search(prefix=record)`` on one open reader (the reference's Python API
            run by its own interpreter; ours by this one), on the reference-made file

and prints medians, ratios, the goals and the file sizes. Run from the repository:

    .venv/bin/python scripts/bench_zs.py [--quick] [--runs N]
"""

from __future__ import annotations

import argparse
import compileall
import os
import random
import resource
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PEERS = Path(os.environ.get("ZSARCHIVE_PEERS", ROOT / ".peers"))
REF_ZS = PEERS / "zs36" / "bin" / "zs"
REF_PY = PEERS / "zs36" / "bin" / "python"
OURS_ZS = [sys.executable, "-m", "zsarchive"]

# Goals: ours/reference wall-time ratio at most this; lookups: at least this many times the
# reference's rate; size: at most 2 % larger. make with lzma is liblzma on both sides, so its goal
# is what overlapping the rest with compression and ending match searches earlier can give.
GOALS = {"make": 0.8, "make lzma": 0.95, "dump": 0.6, "validate": 0.6, "lookups": 20.0}

_LOOKUP_SCRIPT = r"""
import sys, time
from {module} import ZS
records = open(sys.argv[2], "rb").read().split(b"\n")[:-1]
z = ZS(sys.argv[1])
t0, c0 = time.perf_counter(), time.process_time()
for r in records:
    for _ in z.search(prefix=r):
        pass
print(time.perf_counter() - t0, time.process_time() - c0)
"""


def generate(path: Path, n: int) -> None:
    """Write ``n`` distinct sorted lines like Google Books n-gram rows: 'w1 w2 w3 w4\\tyear\\tcount\\tbooks'."""
    rng = random.Random(20140101)
    syllables = [
        "ka",
        "to",
        "ri",
        "an",
        "el",
        "mo",
        "su",
        "ve",
        "qu",
        "ix",
        "or",
        "la",
        "ne",
        "pi",
        "st",
        "ch",
        "ou",
        "er",
        "th",
        "ing",
    ]
    vocab = sorted({"".join(rng.choices(syllables, k=rng.randint(2, 5))) for _ in range(40000)})
    cum = []
    total = 0.0
    for i in range(len(vocab)):
        total += 1.0 / (i + 1) ** 0.9  # Zipf-like word frequencies
        cum.append(total)
    lines: set[bytes] = set()
    while len(lines) < n:
        need = n - len(lines)
        words = [w.encode() for w in rng.choices(vocab, cum_weights=cum, k=4 * need)]
        for i in range(0, 4 * need, 4):
            count = int(rng.paretovariate(1.1))
            lines.add(
                b"%s %s %s %s\t%d\t%d\t%d" % (*words[i : i + 4], rng.randint(1800, 2008), count, max(1, count // 3))
            )
    path.write_bytes(b"\n".join(sorted(lines)) + b"\n")


def _children_cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def timed(cmd: list, **kw) -> tuple[float, float]:
    """Wall and CPU seconds (user + system, all threads and child processes) of one command."""
    c0, t0 = _children_cpu(), time.perf_counter()
    subprocess.run(cmd, check=True, **kw)
    return time.perf_counter() - t0, _children_cpu() - c0


def lookups(python: str, module: str, zs_file: Path, queries: Path) -> tuple[float, float]:
    """Wall and CPU seconds of the lookup loop alone (the interpreter's start-up excluded)."""
    out = subprocess.run(
        [python, "-c", _LOOKUP_SCRIPT.format(module=module), str(zs_file), str(queries)],
        check=True,
        capture_output=True,
    )
    wall, cpu = out.stdout.split()
    return float(wall), float(cpu)


def precompile() -> None:
    """Byte-compile zsarchive, as ``pip install`` does for the reference: a run with
    PYTHONDONTWRITEBYTECODE set (CI, this sandbox) would otherwise recompile every module at
    every start of ``zs``, a cost no installed copy pays."""
    compileall.compile_dir(str(ROOT / "zsarchive"), quiet=1)


def user_python() -> str:
    """An interpreter that starts as a user's install of zsarchive does: this one's site-packages on its path.

    The development environment installs zsarchive editable (``pip install -e``): its ``__editable__``
    .pth imports a finder (pathlib, re, urllib.parse ...) at every interpreter start, which a normal
    install never pays. This venv under .bench/ (made once) lists this interpreter's site-packages as a
    plain path line, so site still runs in full and processes the other .pth files (copied), but not
    the editable finder; zsarchive itself comes from PYTHONPATH, as the benchmarks set it.
    """
    venv = ROOT / ".bench" / "user-venv"
    python = venv / "bin" / "python"
    if not python.exists():
        shared = {sysconfig.get_paths()[kind] for kind in ("purelib", "platlib")}
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
        target = Path(
            subprocess.run(
                [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                check=True,
                capture_output=True,
                text=True,
            ).stdout.strip()
        )
        # first in name order: the .pth files copied below import modules from the shared site-packages
        (target / "_shared-site-packages.pth").write_text("".join(f"{path}\n" for path in sorted(shared)))
        for path in sorted(shared):
            for pth in Path(path).glob("*.pth"):
                if not pth.name.startswith("__editable__"):
                    (target / pth.name).write_bytes(pth.read_bytes())
    return str(python)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="150 k records (~7 MB) instead of 1.5 M")
    ap.add_argument("--runs", type=int, default=3, help="alternating rounds per measurement (default 3)")
    ap.add_argument("--codecs", default="deflate,lzma", help="comma-separated (default deflate,lzma)")
    ap.add_argument("--lookups", type=int, default=2000, help="random point lookups per round")
    ap.add_argument("--ops", default="make,dump,validate,lookups", help="which measurements (default all)")
    ap.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()) / "zsarchive-bench")
    args = ap.parse_args()
    if not REF_ZS.exists():
        print(f"reference zs not found at {REF_ZS}; run scripts/dev setup", file=sys.stderr)
        return 1
    precompile()
    n = 150_000 if args.quick else 1_500_000
    work = args.workdir
    work.mkdir(parents=True, exist_ok=True)
    text = work / f"ngrams-{n}.txt"
    if not text.exists():
        print(f"generating {text} ...", file=sys.stderr)
        generate(text, n)
    records = text.read_bytes().split(b"\n")[:-1]
    queries = work / f"queries-{n}-{args.lookups}.txt"
    queries.write_bytes(b"\n".join(random.Random(5).sample(records, args.lookups)) + b"\n")
    del records
    print(
        f"input: {text} ({text.stat().st_size / 1e6:.1f} MB, {n} records); {args.runs} rounds, "
        f"{os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}",
        flush=True,
    )

    ops = set(args.ops.split(","))
    rows = []
    for codec in args.codecs.split(","):
        times: dict[str, dict[str, list[float]]] = {}
        files = {who: work / f"{who}-{codec}.zs" for who in ("ref", "ours")}
        for rnd in range(args.runs):
            for who in ("ref", "ours") if rnd % 2 == 0 else ("ours", "ref"):
                zs_cmd = [str(REF_ZS)] if who == "ref" else OURS_ZS
                if "make" not in ops and files[who].exists():
                    continue
                files[who].unlink(missing_ok=True)
                t = timed(
                    [*zs_cmd, "make", "--no-spinner", f"--codec={codec}", "{}", str(text), str(files[who])],
                    stdout=subprocess.DEVNULL,
                )
                if "make" in ops:
                    times.setdefault("make", {}).setdefault(who, []).append(t)
            # Readers all work on the reference-made file: same bytes for both.
            for who in ("ref", "ours") if rnd % 2 == 0 else ("ours", "ref"):
                zs_cmd = [str(REF_ZS)] if who == "ref" else OURS_ZS
                for op in ("dump", "validate"):
                    if op in ops:
                        t = timed([*zs_cmd, op, str(files["ref"])], stdout=subprocess.DEVNULL)
                        times.setdefault(op, {}).setdefault(who, []).append(t)
                if "lookups" in ops:
                    python, module = (str(REF_PY), "zs") if who == "ref" else (sys.executable, "zsarchive")
                    t = lookups(python, module, files["ref"], queries)
                    times.setdefault("lookups", {}).setdefault(who, []).append(t)
            print(f"  {codec} round {rnd + 1}/{args.runs} done", file=sys.stderr, flush=True)
        for op, by in times.items():
            ref_t, our_t = (statistics.median(w for w, _ in by[who]) for who in ("ref", "ours"))
            ref_c, our_c = (statistics.median(c for _, c in by[who]) for who in ("ref", "ours"))
            cpu = f"{ref_c:.2f} / {our_c:.2f} s"
            if op == "lookups":
                ratio = ref_t / our_t
                rows.append(
                    (
                        f"{op} ({codec})",
                        f"{args.lookups / ref_t:,.0f}/s",
                        f"{args.lookups / our_t:,.0f}/s",
                        f"{ratio:.1f}x faster",
                        cpu,
                        f">= {GOALS[op]:.0f}x",
                        ratio >= GOALS[op],
                    )
                )
            else:
                ratio = our_t / ref_t
                goal = GOALS.get(f"{op} {codec}", GOALS[op])
                rows.append(
                    (
                        f"{op} ({codec})",
                        f"{ref_t:.2f} s",
                        f"{our_t:.2f} s",
                        f"{ratio:.2f}x time",
                        cpu,
                        f"<= {goal}x",
                        ratio <= goal,
                    )
                )
        ref_size, our_size = files["ref"].stat().st_size, files["ours"].stat().st_size
        ratio = our_size / ref_size
        rows.append(
            (f"size ({codec})", f"{ref_size:,} B", f"{our_size:,} B", f"{ratio:.4f}x", "", "<= 1.02x", ratio <= 1.02)
        )

    header = ("measure", "reference", "zsarchive", "ratio", "cpu ref / ours", "goal", "met")
    table = [header] + [(*r[:6], "yes" if r[6] else "NO") for r in rows]
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    print()
    for i, row in enumerate(table):
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip())
        if i == 0:
            print("  ".join("-" * w for w in widths))
    print(
        f"\nwall-time medians of {args.runs} alternating rounds (goals judge wall time; CPU = user + system\n"
        f"of all threads and processes, steadier on a busy machine); load average now {os.getloadavg()[0]:.1f}"
    )
    return 0 if all(r[6] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
