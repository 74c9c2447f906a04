#!/usr/bin/env python3
"""The lzma encoder alone: zsarchive's ``-z 0e`` (its own LZMA2 encoder, liblzma checking each
block) against the reference's liblzma preset 0e.

``zs make --codec lzma`` spends ~97% of its time in the encoder on both sides, so this is the part
of make that the encoder decides. It cuts bench_zs.py's n-gram file into ~384 KiB data-block
payloads (every --step-th block), compresses each with both encoders, alternating, on one
thread, and prints sizes and the minimum CPU seconds of --runs rounds. With --cachegrind it also
counts, under valgrind, the instructions and mispredicted branches of one round of each (the
same numbers on a busy machine as on an idle one) and an estimate of cycles as
instructions / 2 + 15 x mispredictions, start-up and block cutting subtracted (a model that
matched the measured make-time ratios on this machine).

    .venv/bin/python scripts/bench_lzma_encoder.py [--runs 5] [--step 10] [--cachegrind]
"""

from __future__ import annotations

import argparse
import lzma
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT))
from bench_zs import generate  # noqa: E402
from zsarchive.zs.format import uleb128  # noqa: E402
from zsarchive.zs.format.codecs import get_codec  # noqa: E402

BLOCK = 393216
REFERENCE = [{"id": lzma.FILTER_LZMA2, "preset": 0 | lzma.PRESET_EXTREME}]


def payloads(text: Path, step: int) -> list[bytes]:
    """Every ``step``-th data-block payload the writer would make of the text file's lines."""
    blocks, out = [], bytearray()
    for line in text.read_bytes().split(b"\n")[:-1]:
        out += uleb128.encode(len(line)) + line
        if len(out) >= BLOCK:
            blocks.append(bytes(out))
            out.clear()
    return blocks[::step]


def compressors() -> dict:
    ours = get_codec("lzma", "0e").compress
    return {"reference": lambda b: lzma.compress(b, format=lzma.FORMAT_RAW, filters=REFERENCE), "zsarchive": ours,
            "nothing": lambda b: b""}


def one_round(who: str, blocks: list[bytes]) -> tuple[float, int]:
    """CPU seconds and compressed bytes of one pass over the blocks."""
    compress = compressors()[who]
    c0 = time.process_time()
    size = sum(len(compress(b)) for b in blocks)
    return time.process_time() - c0, size


def cachegrind(who: str, text: Path, step: int) -> tuple[int, int]:
    """Instructions and mispredicted branches (conditional + indirect) of one round under valgrind.

    ``who="nothing"`` counts the start-up and block cutting every round pays, to subtract."""
    with tempfile.NamedTemporaryFile(suffix=".cg") as out:
        run = subprocess.run(
            ["valgrind", "--tool=cachegrind", "--cache-sim=no", "--branch-sim=yes",
             f"--cachegrind-out-file={out.name}", sys.executable, __file__, "--child", who,
             "--text", str(text), "--step", str(step)], capture_output=True, text=True, check=True)
    counts = {}
    for name in ("I +refs", "Mispredicts"):
        m = re.search(name + r":\s+([\d,]+)", run.stderr)
        counts[name] = int(m.group(1).replace(",", ""))
    return counts["I +refs"], counts["Mispredicts"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5, help="alternating rounds (default 5)")
    ap.add_argument("--step", type=int, default=10, help="use every STEP-th block (default 10: 18 blocks)")
    ap.add_argument("--cachegrind", action="store_true", help="also count instructions and mispredictions")
    ap.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()) / "zsarchive-bench")
    ap.add_argument("--text", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    text = args.text or args.workdir / "ngrams-1500000.txt"
    if not text.exists():
        args.workdir.mkdir(parents=True, exist_ok=True)
        print(f"generating {text} ...", file=sys.stderr)
        generate(text, 1_500_000)
    blocks = payloads(text, args.step)
    if args.child:
        one_round(args.child, blocks)
        return 0
    cpu: dict[str, list[float]] = {"reference": [], "zsarchive": []}
    size = {}
    for rnd in range(args.runs):
        for who in (("reference", "zsarchive") if rnd % 2 == 0 else ("zsarchive", "reference")):
            seconds, size[who] = one_round(who, blocks)
            cpu[who].append(seconds)
    print(f"{len(blocks)} blocks, {sum(map(len, blocks)) / 1e6:.1f} MB of {text.name}; {args.runs} rounds\n")
    print(f"{'':12s} {'bytes':>11s} {'min CPU':>9s}" + ("  instructions  mispredicts  est. cycles" if args.cachegrind else ""))
    est = {}
    base = cachegrind("nothing", text, args.step) if args.cachegrind else (0, 0)
    for who in cpu:
        line = f"{who:12s} {size[who]:11,d} {min(cpu[who]):8.2f}s"
        if args.cachegrind:
            ir, bm = (a - b for a, b in zip(cachegrind(who, text, args.step), base))
            est[who] = ir / 2 + 15 * bm
            line += f"  {ir / 1e9:10.2f} G  {bm / 1e6:9.1f} M  {est[who] / 1e9:9.2f} G"
        print(line)
    print(f"\nzsarchive / reference: size {size['zsarchive'] / size['reference']:.4f}x, "
          f"CPU {min(cpu['zsarchive']) / min(cpu['reference']):.2f}x"
          + (f", est. cycles {est['zsarchive'] / est['reference']:.2f}x" if est else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
