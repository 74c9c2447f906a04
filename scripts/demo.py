"""The main job on bundled data: a ZS file made, searched and validated, then an Icechunk
history exported to one archive and queried. Run it with ``scripts/dev demo``."""

from __future__ import annotations

import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

from zsarchive import RepoArchive

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "testdata" / "sample" / "ngrams.txt"
REPO = ROOT / "testdata" / "icechunk" / "v2"


def zs(*args: str) -> str:
    """Run ``zs ARGS`` as a user would, echo the command and its output, and return the output."""
    print(f"$ zs {' '.join(shlex.quote(a) for a in args)}", flush=True)
    done = subprocess.run([sys.executable, "-m", "zsarchive", *args], capture_output=True, text=True)
    out = done.stdout if len(done.stdout) < 2000 else done.stdout[:2000] + "...\n"
    print(out, end="" if out.endswith("\n") or not out else "\n", flush=True)
    if done.returncode != 0:
        sys.exit(f"demo failed: {done.stderr.strip()}")
    return done.stdout


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="zsarchive-demo-") as tmp:
        sample_zs = str(Path(tmp) / "ngrams.zs")
        print("# 1. A ZS file from a sorted text file: make, look up, validate")
        zs("make", "--no-spinner", '{"corpus": "bundled n-grams"}', str(SAMPLE), sample_zs)
        zs("dump", "--prefix", "ocean salinity", sample_zs)
        zs("validate", "--no-spinner", sample_zs)
        zs("info", sample_zs)

        archive = str(Path(tmp) / "history.zs")
        print("\n# 2. A whole Icechunk history (real icechunk 2.x fixture) in one archive")
        zs("export", "--no-progress", "--codec", "lzma", str(REPO), archive)
        zs("validate", "--no-spinner", archive)
        zs("refs", archive)
        zs("log", archive, "main")
        times = [commit["flushed_at"] for commit in RepoArchive(archive).log("main")]
        zs("log", archive, "--since", times[5], "--until", times[3])
        zs("ls", archive, "tag:v1.0")
        zs("chunk", archive, "tag:v1.0", "data/temperature", "0,0")
        zs("chunk", archive, f"main@{times[-2]}", "data/temperature", "0,0", "--json")
        zs("diff", archive, "tag:v1.0", "main")
        zs("chunk-log", archive, "main", "data/temperature", "0,0")


if __name__ == "__main__":
    main()
