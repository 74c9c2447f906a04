"""Benchmark: ``zs site``'s page in Chromium on a 1 M-ref archive served by nginx, and the JavaScript reader's cold
chunk ref lookup beside the Python reader's over the same server, in one run.

    .venv/bin/python scripts/bench_site.py [--refs N] [--runs K] [--lookups L]

The archive is that of the 1 M-ref benchmark repository (built once by the real icechunk 2.x and cached under
``.bench/``, see scripts/bench_icechunk_manifest.py; exported once, as scripts/bench_views.py does); ``zs site`` writes its page beside it, nginx (Debian's)
serves the folder on 127.0.0.1, and Debian's chromium opens it through Playwright, a fresh browser context (no
cache) per run:

1. first paint of the commit list: navigation until the page has drawn the graph, the refs and main's commits
   (its ``data-ready`` mark), the reader's modules and the archive's range requests included. Goal <= 1 s.
2. one cold chunk ref lookup at a random coordinate: a fresh reader opens the archive and asks the ref, in the
   page (JavaScript) and in this process (Python's ``RepoArchive`` over the same URL), alternating, ``--lookups``
   of each per run; the time and the requests nginx logged for it. Goals: <= 3 requests, <= 2x Python's time.
   Beside them: the reader in Node (the same code on undici's fetch), and a fresh ``zs chunk --json`` process as
   a user runs it.
3. the same cold lookups in a chromium that no driver instruments (started on a page that runs them and sends
   its times back as one request nginx logs): a user's browser, without the network events Playwright asks
   for. Beside them that browser's floor, a bare ``fetch`` of 15,000 bytes and two of 64 KiB at once: the
   two round trips every cold lookup makes cost at least the sum, whatever a reader does with the bytes.
4. the heatmap of the array's chunk changes, computed in the page (every chunk ref record read and binned).
5. one range request of a data block's size by each reader's own transport, once the archive is open (the
   browser's fetch, Python's HTTP client): what each round trip of a lookup costs before any decoding.
6. both again through a loopback proxy adding ``--delay-ms`` to every round trip (the page too), as a network
   does: there the round trips, which both readers spend alike, decide.

Prints medians. The machine is shared: quote numbers with the load they ran under.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT))

import bench_icechunk_manifest as icbench  # noqa: E402
from bench_http import DelayProxy  # noqa: E402
from bench_views import big_archive, heatmap_seconds  # noqa: E402
from toolkit.servers import Nginx  # noqa: E402

from zsarchive.archive import RepoArchive  # noqa: E402
from zsarchive.frontends.site import write_site  # noqa: E402
from zsarchive.io import open_transport  # noqa: E402

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-background-networking", "--disable-component-update", "--no-first-run"]

LOOKUP = """async ([url, coords]) => {
    const {openArchive} = await import("./reader/index.js");
    const t0 = performance.now();
    const archive = await openArchive(url);
    const chunk = await archive.chunkRef("main", "/v", coords);
    const seconds = (performance.now() - t0) / 1000;
    return {seconds, requests: archive.zs.transport.stats.requests, location: chunk.location, depth: archive.zs.rootIndexLevel};
}"""


ONE_READ = """async ([url, offset, length, runs]) => {
    const {openTransport} = await import("./reader/io/transport.js");
    const transport = await openTransport(url);
    await transport.readHeadTail(1, 1);
    const times = [];
    for (let i = 0; i < runs; i++) {
        const t0 = performance.now();
        await transport.read(offset + i * length, length);
        times.push((performance.now() - t0) / 1000);
    }
    return times;
}"""


def python_reads(url: str, offset: int, length: int, runs: int) -> list[float]:
    """One range request at a time by the Python reader's HTTP transport, once it is open."""
    transport = open_transport(url)
    try:
        transport.read_head_tail(1, 1)
        times = []
        for i in range(runs):
            t0 = time.perf_counter()
            transport.read(offset + i * length, length)
            times.append(time.perf_counter() - t0)
        return times
    finally:
        transport.close()


NODE_LOOKUPS = """
import { openArchive } from "%s";
const [url, ...rows] = process.argv.slice(1);
const out = [];
for (const row of rows) {
  const t0 = performance.now();
  const archive = await openArchive(url);
  const chunk = await archive.chunkRef("main", "/v", [Number(row), 0]);
  out.push({seconds: (performance.now() - t0) / 1000, requests: archive.zs.transport.stats.requests, location: chunk.location});
}
console.log(JSON.stringify(out.slice(1)));  // the first warmed the process up (modules, JIT)
""" % (ROOT / "js" / "src" / "index.js").as_uri()


def node_lookups(url: str, rows: list[int]) -> list[dict]:
    """Cold lookups by the reader in one Node process, each with a freshly opened archive."""
    done = subprocess.run(
        ["node", "--input-type=module", "-e", NODE_LOOKUPS, url, *map(str, rows)],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(done.stdout)


def cli_lookup(url: str, coords: tuple[int, int]) -> float:
    """A fresh ``zs chunk URL main /v I,J --json`` process, as a user runs it."""
    t0 = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "zsarchive", "chunk", url, "main", "/v", f"{coords[0]},{coords[1]}", "--json"],
        check=True,
        capture_output=True,
        env={k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"},
        cwd=ROOT,
    )
    return time.perf_counter() - t0


PLAIN_PAGE = """<!doctype html><meta charset="utf-8"><title>cold lookups</title><script type="module">
// Run by a browser that no driver watches; the answers go back as one request nginx logs.
const [url, rows, warm, length] = %s;
const out = {lookup: [], one: [], pair: [], requests: [], error: null};
const bare = async (offset, n) => {
  const response = await fetch(url, {headers: {Range: `bytes=${offset}-${offset + n - 1}`}, cache: "no-store"});
  return response.arrayBuffer();
};
try {
  const {openArchive} = await import("./reader/index.js");
  for (const [i, row] of rows.entries()) {
    const t0 = performance.now();
    const archive = await openArchive(url);
    await archive.chunkRef("main", "/v", [row, 0]);
    if (i >= warm) {
      out.lookup.push(performance.now() - t0);
      out.requests.push(archive.zs.transport.stats.requests);
    }
    let t1 = performance.now();
    await bare(length * (i + 1), length);
    out.one.push(performance.now() - t1);
    t1 = performance.now();
    await Promise.all([bare(0, 65536), bare(length * (i + 7), 65536)]);  // as opening asks head and tail
    out.pair.push(performance.now() - t1);
  }
} catch (err) {
  out.error = String(err && err.message ? err.message : err);
}
await fetch("__result__?" + encodeURIComponent(JSON.stringify(out)));
</script>
"""


def plain_browser(nginx: Nginx, site: Path, name: str, refs: int, count: int, rng: random.Random) -> dict:
    """Cold lookups in a chromium that no driver instruments (Playwright's network events cost every fetch
    a few milliseconds more, which a user's browser does not pay), and beside them the browser's floor: a bare
    fetch of 15,000 bytes, and two of 64 KiB at once as opening asks them. Times in seconds."""
    warm = 5  # the page's own drawing runs the reader first in the driven runs; here a few lookups do
    rows = [rng.randrange(refs) for _ in range(warm + count)]
    (site / "plain.html").write_text(PLAIN_PAGE % json.dumps([name, rows, warm, 15_000]))
    mark = nginx.mark()
    with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as profile:
        browser = subprocess.Popen(
            [
                CHROMIUM,
                "--headless=new",
                "--disable-gpu",
                f"--user-data-dir={profile}",
                *ARGS,
                nginx.url("site/plain.html"),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,  # its helper processes go with it
        )
        try:
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                done = [r for r in nginx.requests_since(mark) if r.path.startswith("/site/__result__?")]
                if done:
                    break
                time.sleep(0.2)
            else:
                raise SystemExit("bench: the plain browser sent no answer within 120 s")
        finally:
            os.killpg(browser.pid, signal.SIGKILL)
            browser.wait()
    out = json.loads(urllib.parse.unquote(done[0].path.split("?", 1)[1]))
    if out["error"]:
        raise SystemExit(f"bench: the plain browser's reader failed: {out['error']}")
    return {key: [ms / 1000 for ms in value] if key != "requests" else value for key, value in out.items() if value}


def far_lookups(nginx: Nginx, name: str, args: argparse.Namespace, rng: random.Random) -> dict[str, list]:
    """The page and the cold lookups again, through a proxy that adds ``--delay-ms`` to every round trip (the
    page comes through it too: one origin): (seconds, round trips) of each."""
    from playwright.sync_api import sync_playwright

    proxy = DelayProxy(nginx.port, args.delay_ms / 1000)
    out: dict[str, list] = {"paint": [], "js": [], "py": []}
    try:
        base = f"http://127.0.0.1:{proxy.port}/site/"
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
            for _ in range(args.runs):
                context = browser.new_context()
                page = context.new_page()
                t0 = time.perf_counter()
                page.goto(base + "index.html")
                page.wait_for_selector("body[data-ready=true]", state="attached", timeout=60_000)
                out["paint"].append(time.perf_counter() - t0)
                page.evaluate("import('./reader/index.js')")
                for _ in range(args.lookups):
                    coords = [rng.randrange(args.refs), 0]
                    proxy.round_trips()
                    got = page.evaluate(LOOKUP, [base + name, coords])
                    out["js"].append((got["seconds"], proxy.round_trips()))
                    seconds, _ = python_lookup(base + name, tuple(coords))
                    out["py"].append((seconds, proxy.round_trips()))
                context.close()
            browser.close()
    finally:
        proxy.stop()
    return out


def python_lookup(url: str, coords: tuple[int, int]) -> tuple[float, str]:
    t0 = time.perf_counter()
    with RepoArchive(url) as arc:
        location = arc.chunk_ref("main", "/v", coords)["location"]
    return time.perf_counter() - t0, location


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--refs", type=int, default=1_000_000, help="chunk refs of the archive's array (1 M)")
    parser.add_argument("--runs", type=int, default=7, help="timed runs of each; medians reported")
    parser.add_argument("--lookups", type=int, default=5, help="cold lookups of each reader per run")
    parser.add_argument("--delay-ms", type=float, default=20.0, help="round trip the proxy adds in the second part")
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    archive = big_archive(args.refs)
    rng = random.Random(1)
    med = statistics.median
    with tempfile.TemporaryDirectory(dir=icbench.CACHE) as tmp:
        base = Path(tmp)
        (base / "root").mkdir()
        (base / "prefix").mkdir()
        write_site(archive, base / "root" / "site")
        nginx = Nginx(base / "root", base / "prefix")
        nginx.start()
        try:
            url = nginx.url(f"site/{archive.name}")
            paint, js, py, js_requests, py_requests, cli, heat, js_read, py_read = [], [], [], [], [], [], [], [], []
            read_at, read_length = archive.stat().st_size // 3, 15_000  # about a data block of the archive
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
                for _ in range(args.runs):
                    context = browser.new_context()  # a cold browser cache every run
                    page = context.new_page()
                    t0 = time.perf_counter()
                    page.goto(nginx.url("site/index.html"))
                    page.wait_for_selector("body[data-ready=true]", state="attached", timeout=60_000)
                    paint.append(time.perf_counter() - t0)
                    if page.is_visible("#error"):
                        raise SystemExit(f"bench: the page says {page.text_content('#error')!r}")
                    page.evaluate("import('./reader/index.js')")  # the page's modules loaded: the reader's time alone
                    for _ in range(args.lookups):  # each a fresh reader; JavaScript and Python alternate
                        coords = [rng.randrange(args.refs), 0]
                        mark = nginx.mark()
                        got = page.evaluate(LOOKUP, [url, coords])
                        js_requests.append(sum(r.path == f"/site/{archive.name}" for r in nginx.requests_since(mark)))
                        js.append(got["seconds"])
                        mark = nginx.mark()
                        seconds, location = python_lookup(url, tuple(coords))
                        py_requests.append(len(nginx.requests_since(mark)))
                        py.append(seconds)
                        assert location == got["location"], (location, got)
                    cli.append(cli_lookup(url, tuple(coords)))
                    js_read += page.evaluate(ONE_READ, [url, read_at, read_length, 5])
                    py_read += python_reads(url, read_at, read_length, 5)
                    heat.append(heatmap_seconds(page))
                    context.close()
                browser.close()
            plain = plain_browser(nginx, base / "root" / "site", archive.name, args.refs, args.runs * args.lookups, rng)
            node = node_lookups(url, [rng.randrange(args.refs) for _ in range(args.runs + 1)])
            slow = far_lookups(nginx, archive.name, args, rng)
        finally:
            nginx.stop()
    print(
        f"archive {archive} ({args.refs:,} chunk refs, {archive.stat().st_size:,} bytes, index depth {got['depth']}), "
        f"nginx on loopback, medians of {args.runs} runs ({args.lookups} lookups each), load {os.getloadavg()[0]:.1f}"
    )
    print(f"  page: first paint of the commit list   {med(paint):7.3f} s (goal <= 1)")
    print(
        f"  cold chunk ref lookup, JavaScript      {med(js) * 1000:7.1f} ms, {med(js_requests):.0f} requests (goal <= 3)"
    )
    print(f"  cold chunk ref lookup, Python          {med(py) * 1000:7.1f} ms, {med(py_requests):.0f} requests")
    print(f"  JavaScript / Python                    {med(js) / med(py):7.2f}x (goal <= 2)")
    floor = med(plain["pair"]) + med(plain["one"])
    print(
        f"  cold chunk ref lookup, JavaScript in a chromium no driver watches {med(plain['lookup']) * 1000:6.1f} ms, "
        f"{med(plain['requests']):.0f} requests ({med(plain['lookup']) / med(py):.2f}x Python)"
    )
    print(
        f"    its browser's floor: a bare fetch {med(plain['one']) * 1000:.1f} ms, two at once {med(plain['pair']) * 1000:.1f} ms; "
        f"a lookup's two round trips {floor * 1000:.1f} ms = {floor / med(py):.2f}x Python's whole lookup "
        f"(the reader's lookup: {med(plain['lookup']) / floor:.2f}x its floor)"
    )
    print(
        f"  cold chunk ref lookup, JavaScript in Node {med(r['seconds'] for r in node) * 1000:6.1f} ms, "
        f"{med(r['requests'] for r in node):.0f} requests ({med(r['seconds'] for r in node) / med(py):.2f}x Python)"
    )
    print(
        f"  a fresh zs chunk --json process        {med(cli) * 1000:7.1f} ms (the browser's lookup: "
        f"{med(js) / med(cli):.2f}x)"
    )
    print(
        f"  one range request of {read_length:,} bytes: the browser's fetch {med(js_read) * 1000:.1f} ms, Python's "
        f"HTTP client {med(py_read) * 1000:.1f} ms ({med(js_read) / med(py_read):.2f}x)"
    )
    print(f"  page: heatmap of /v (1 M chunks) drawn {med(heat):7.3f} s (zs serve's goal for its own: <= 2)")
    js_far, py_far = med(t for t, _ in slow["js"]), med(t for t, _ in slow["py"])
    print(f"with {args.delay_ms:.0f} ms added to every round trip (a loopback proxy):")
    print(f"  page: first paint of the commit list   {med(slow['paint']):7.3f} s")
    print(
        f"  cold chunk ref lookup, JavaScript      {js_far * 1000:7.1f} ms, {med(r for _, r in slow['js']):.0f} round trips"
    )
    print(
        f"  cold chunk ref lookup, Python          {py_far * 1000:7.1f} ms, {med(r for _, r in slow['py']):.0f} round trips"
    )
    print(f"  JavaScript / Python                    {js_far / py_far:7.2f}x")


if __name__ == "__main__":
    main()
