"""Benchmark: the views of an archive — the page of ``zs serve`` and the xarray engine — in one run.

    .venv/bin/python scripts/bench_views.py [--refs N] [--runs K]

1. ``zs serve`` on the archive of the 1 M-ref benchmark repository (built once by the real icechunk
   2.x and cached under ``.bench/``, see scripts/bench_icechunk_manifest.py), a fresh server process
   per run, in Debian's chromium through Playwright: the first view (navigation until the graph, refs
   and commits are drawn; goal <= 1 s) and then the heatmap of the 1 M-chunk array (request, binning
   and drawing; goal <= 2 s).
2. xarray: opening one snapshot of a history written with ``Dataset.to_zarr`` (tests/toolkit/xarray_repo.py)
   through ``engine="zsarchive"`` against ``xr.open_zarr(session.store)`` on icechunk's own store, each
   in a fresh process of its own Python, timed inside it (imports of xarray, zarr and the store's module
   excluded: opening is what is timed), alternating; open only and
   open + load (goal for open: <= 1.2x).

Prints medians. The machine is shared: quote numbers with the load they ran under.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT))

import bench_icechunk_manifest as icbench  # noqa: E402

from zsarchive.archive import export  # noqa: E402

CHROMIUM = "/usr/bin/chromium"
XARRAY_REPO = ROOT / "tests" / "toolkit" / "xarray_repo.py"

OURS = """
import json, sys, time
t0 = time.perf_counter()
import xarray as xr, xarray.backends.zarr, zarr, zarr.storage
from zsarchive.frontends.xarray_backend import ZsarchiveBackendEntrypoint
import zsarchive.archive.zarrstore
import dask  # xarray imports it on first use where it is installed; icechunk's Python has none
t1 = time.perf_counter()
ds = xr.open_dataset(sys.argv[1], engine=ZsarchiveBackendEntrypoint, group="data", repo=sys.argv[2], chunks=None)
t2 = time.perf_counter()
ds.load()
t3 = time.perf_counter()
print(json.dumps({"open_s": t2 - t1, "load_s": t3 - t2}))
"""

THEIRS = """
import json, sys, time
t0 = time.perf_counter()
import icechunk as ic, xarray as xr, xarray.backends.zarr, zarr, zarr.storage
ic.set_logs_filter("error")
t1 = time.perf_counter()
repo = ic.Repository.open(ic.local_filesystem_storage(sys.argv[1]))
ds = xr.open_zarr(repo.readonly_session(branch="main").store, group="data", consolidated=False, chunks=None)
t2 = time.perf_counter()
ds.load()
t3 = time.perf_counter()
print(json.dumps({"open_s": t2 - t1, "load_s": t3 - t2}), flush=True)
import os; os._exit(0)
"""


def big_archive(refs: int) -> Path:
    """The archive of the cached benchmark repository (exported once)."""
    repo = icbench.ensure_repo(refs)
    archive = icbench.CACHE / f"views-{refs}.zs"
    if not archive.exists():
        export(repo, archive.with_suffix(".tmp"))
        archive.with_suffix(".tmp").rename(archive)
    return archive


def heatmap_seconds(page) -> float:
    """From the page showing main's commits: the time from a click on the array /v (in the changes of the one
    commit, which wrote it) until its heatmap is drawn."""
    page.click("#commits button.commit")
    page.wait_for_selector('#changes button.path[data-path="/v"]', timeout=60_000)
    t0 = time.perf_counter()
    page.click('#changes button.path[data-path="/v"]')
    page.wait_for_selector("#array-section:not([hidden])", timeout=120_000)
    return time.perf_counter() - t0


def serve(archive: Path) -> tuple[subprocess.Popen, str]:
    process = subprocess.Popen(
        [sys.executable, "-m", "zsarchive", "serve", str(archive), "--port", "0"],
        stdout=subprocess.PIPE,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    line = process.stdout.readline().decode()
    match = re.search(r"at (http://\S+/) ", line)
    if not match:
        process.terminate()
        raise SystemExit(f"bench: zs serve said {line!r}")
    return process, match.group(1)


def page_runs(archive: Path, runs: int) -> tuple[list[float], list[float]]:
    """(first view seconds, heatmap seconds) per run, each run a fresh server and page."""
    from playwright.sync_api import sync_playwright

    first, heat = [], []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        for _ in range(runs):
            process, url = serve(archive)
            try:
                page = browser.new_page()
                t0 = time.perf_counter()
                page.goto(url)
                page.wait_for_selector("body[data-ready=true]", timeout=60_000)
                first.append(time.perf_counter() - t0)
                heat.append(heatmap_seconds(page))
                if page.is_visible("#error"):
                    raise SystemExit(f"bench: the page says {page.text_content('#error')!r}")
                page.close()
            finally:
                process.terminate()
                process.wait()
        browser.close()
    return first, heat


def xarray_runs(runs: int) -> tuple[list[dict], list[dict]]:
    """(ours, icechunk's) timings per run, alternating, each in a fresh process."""
    with tempfile.TemporaryDirectory(dir=icbench.CACHE) as tmp:
        repo = Path(tmp) / "repo"
        subprocess.run([str(icbench.IC2_PYTHON), str(XARRAY_REPO), "write", str(repo)], check=True, capture_output=True)
        archive = Path(tmp) / "history.zs"
        export(repo, archive)
        ours, theirs = [], []
        env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONWARNINGS": "ignore"}
        for _ in range(runs):
            out = subprocess.run(
                [sys.executable, "-c", OURS, str(archive), str(repo)],
                check=True,
                capture_output=True,
                text=True,
                env=env,
            )
            ours.append(json.loads(out.stdout.splitlines()[-1]))
            out = subprocess.run(
                [str(icbench.IC2_PYTHON), "-c", THEIRS, str(repo)], check=True, capture_output=True, text=True, env=env
            )
            theirs.append(json.loads(out.stdout.splitlines()[-1]))
    return ours, theirs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--refs", type=int, default=1_000_000, help="chunk refs of the big array (1 M)")
    parser.add_argument("--runs", type=int, default=5, help="timed runs of each; medians reported")
    args = parser.parse_args()
    med = statistics.median

    archive = big_archive(args.refs)
    first, heat = page_runs(archive, args.runs)
    print(f"archive {archive} ({args.refs:,} chunk refs), median of {args.runs} runs, load {os.getloadavg()[0]:.1f}")
    print(f"  page: first view ready           {med(first):7.3f} s (goal <= 1)")
    print(f"  page: heatmap of /v drawn        {med(heat):7.3f} s (goal <= 2)")
    ours, theirs = xarray_runs(args.runs)
    for what in ("open_s", "load_s"):
        a, b = med(r[what] for r in ours), med(r[what] for r in theirs)
        print(
            f"  xarray {what[:-2]:<5} engine {a:7.3f} s, open_zarr on icechunk {b:7.3f} s: {a / b:.2f}x"
            + (" (goal <= 1.2)" if what == "open_s" else "")
        )


if __name__ == "__main__":
    main()
