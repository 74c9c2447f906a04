"""Benchmark: our ZS reader vs the reference zs 0.10.0, both reading the same file from one nginx.

    .venv/bin/python scripts/bench_http.py [--records N] [--runs K] [--delay-ms D]

Files are made by the reference ``zs make`` (deflate): ``flat`` (default layout, one index level)
and ``deep`` (small blocks, branching factor 8). nginx (Debian's) serves them on 127.0.0.1 and
its access log counts requests. Measured, ours then the reference's (.peers/zs36/bin/python,
``zs.ZS(url=...)``), K runs each, medians:

1. cold lookup: open a reader and find one key. Requests from the access log; sequential round
   trips counted by a loopback proxy that delays every client->server packet by
   D ms (a stand-in for network latency; TCP handshakes are not delayed): requests that reach
   the proxy less than D/2 apart went out together. Goal <= depth + 1.
2. 200 random point lookups on one reader (direct to nginx): time and requests. Goal >= 2x
   faster, never more requests.
3. full dump to /dev/null (direct): time. Goal no slower.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT))

from toolkit.servers import Nginx, free_port  # noqa: E402

from zsarchive import ZS  # noqa: E402

REFERENCE_PYTHON = ROOT / ".peers" / "zs36" / "bin" / "python"
REFERENCE_ZS = ROOT / ".peers" / "zs36" / "bin" / "zs"

# Runs inside the reference's Python 3.6: the same three measurements, timed in-process.
REFERENCE_SCRIPT = r"""
import sys, time
from zs import ZS
mode, url, keys = sys.argv[1], sys.argv[2], [k.encode() for k in sys.argv[3:]]
t0 = time.perf_counter()
z = ZS(url=url)
if mode == "cold":
    assert list(z.search(prefix=keys[0]))
elif mode == "lookups":
    t0 = time.perf_counter()
    for key in keys:
        assert list(z.search(prefix=key))
else:
    with open("/dev/null", "wb") as out:
        z.dump(out)
print(time.perf_counter() - t0)
"""


class DelayProxy:
    """A loopback TCP proxy that delays client->server bytes by ``delay`` seconds (order kept)."""

    def __init__(self, target_port: int, delay: float) -> None:
        self.port = free_port()
        self.arrivals: list[float] = []  # when each request reached the proxy
        self._target = target_port
        self._delay = delay
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        self._ready.wait(5)

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        server = self._loop.run_until_complete(asyncio.start_server(self._handle, "127.0.0.1", self.port))
        self._ready.set()
        self._loop.run_forever()
        server.close()
        tasks = asyncio.all_tasks(self._loop)
        for task in tasks:
            task.cancel()
        self._loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
        self._loop.close()

    async def _handle(self, client_r, client_w) -> None:
        server_r, server_w = await asyncio.open_connection("127.0.0.1", self._target)

        async def upstream() -> None:
            while data := await client_r.read(65536):
                if data[:4] in (b"GET ", b"HEAD"):
                    self.arrivals.append(self._loop.time())
                # same delay for every chunk: deadlines only grow, so order is kept
                self._loop.call_later(self._delay, server_w.write, data)
            self._loop.call_later(self._delay, server_w.close)

        async def downstream() -> None:
            while data := await server_r.read(65536):
                client_w.write(data)
                await client_w.drain()
            client_w.close()

        try:
            await asyncio.gather(upstream(), downstream())
        except (ConnectionError, OSError):
            client_w.close()
            server_w.close()

    def round_trips(self) -> int:
        """Sequential round trips since the last call: requests arriving within half the delay of
        the previous one went out together; a later one had to wait for an answer."""
        times, self.arrivals = sorted(self.arrivals), []
        return len(times) and 1 + sum(b - a > self._delay / 2 for a, b in zip(times, times[1:]))

    def stop(self) -> None:
        """Stop the proxy's event loop."""
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)


def make_file(records: int, target: Path, *options: str) -> None:
    """A reference-made ZS file of ``records`` sorted text records."""
    rng = random.Random(1)
    lines = sorted(b"%010d %s" % (i * 13, b"w%d " % rng.randrange(10**6) * rng.randrange(1, 8)) for i in range(records))
    source = target.with_suffix(".txt")
    source.write_bytes(b"".join(line + b"\n" for line in lines))
    subprocess.run(
        [str(REFERENCE_ZS), "make", "--no-spinner", "--codec=deflate", *options, "{}", str(source), str(target)],
        check=True,
        capture_output=True,
    )
    source.unlink()


def reference(mode: str, url: str, keys: list[bytes]) -> float:
    """Run one measurement in the reference's Python; return its in-process seconds."""
    out = subprocess.run(
        [str(REFERENCE_PYTHON), "-c", REFERENCE_SCRIPT, mode, url, *(k.decode() for k in keys)],
        check=True,
        capture_output=True,
        text=True,
    )
    return float(out.stdout)


def ours(mode: str, url: str, keys: list[bytes]) -> float:
    """The same measurement with our reader, in this process (a new reader each time)."""
    t0 = time.perf_counter()
    if mode == "cold":
        with ZS(url=url) as z:
            found = list(z.search(prefix=keys[0]))
        assert found, keys[0]
    elif mode == "lookups":
        with ZS(url=url) as z:
            t0 = time.perf_counter()
            for key in keys:
                assert list(z.search(prefix=key)), key
    else:
        with ZS(url=url) as z, open("/dev/null", "wb") as out:
            z.dump(out)
    return time.perf_counter() - t0


def measure(nginx: Nginx, who, mode: str, url: str, keys: list[bytes]) -> tuple[float, int]:
    """(seconds, requests nginx logged) of one run."""
    mark = nginx.mark()
    seconds = who(mode, url, keys)
    return seconds, len(nginx.requests_since(mark))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--delay-ms", type=float, default=50.0)
    args = parser.parse_args()
    delay = args.delay_ms / 1000
    with tempfile.TemporaryDirectory(prefix="bench-http-") as tmp:
        base = Path(tmp)
        (base / "root").mkdir()
        (base / "prefix").mkdir()
        nginx = Nginx(base / "root", base / "prefix")
        print(f"making files ({args.records} records) with the reference zs make ...", file=sys.stderr)
        make_file(args.records, nginx.root / "flat.zs")
        make_file(args.records // 4, nginx.root / "deep.zs", "--approx-block-size=8192", "--branching-factor=8")
        nginx.start()
        proxy = DelayProxy(nginx.port, delay)
        rows = []
        try:
            for name in ("flat.zs", "deep.zs"):
                url = nginx.url(name)
                slow_url = f"http://127.0.0.1:{proxy.port}/{name}"
                with ZS(url=url) as z:
                    depth = z.root_index_level
                    keys = [r[:10] for r in z.search()]
                    size = z.total_file_length
                rng = random.Random(2)
                label = f"{name} ({size / 1e6:.1f} MB, depth {depth})"
                print(f"measuring {label} ...", file=sys.stderr)
                results = {}
                for who_name, who in (("ours", ours), ("reference", reference)):
                    cold, trips = [], []
                    for _ in range(args.runs):
                        proxy.round_trips()
                        cold.append(measure(nginx, who, "cold", slow_url, [rng.choice(keys)]))
                        trips.append(proxy.round_trips())
                    lookups = [measure(nginx, who, "lookups", url, rng.sample(keys, 200)) for _ in range(args.runs)]
                    dump = [measure(nginx, who, "dump", url, []) for _ in range(max(3, args.runs // 2))]
                    results[who_name] = {
                        "cold round trips": statistics.median(trips),
                        "cold lookup s": statistics.median(s for s, _ in cold),
                        "cold requests": statistics.median(n for _, n in cold),
                        "200 lookups s": statistics.median(s for s, _ in lookups),
                        "200 lookups requests": statistics.median(n for _, n in lookups),
                        "full dump s": statistics.median(s for s, _ in dump),
                    }
                rows.append((label, depth, results))
        finally:
            proxy.stop()
            nginx.stop()
    print(f"\nmedians of {args.runs} runs; cold lookups through {args.delay_ms:g} ms injected latency\n")
    print(f"{'file':34} {'measure':22} {'ours':>10} {'reference':>10} {'ref/ours':>9}")
    for label, depth, results in rows:
        for key in results["ours"]:
            a, b = results["ours"][key], results["reference"][key]
            print(f"{label:34} {key:22} {a:10.3f} {b:10.3f} {b / a if a else float('inf'):8.2f}x")
        print(f"{'':34} {'goal: cold round trips <= depth + 1 =':22} {depth + 1}")


if __name__ == "__main__":
    main()
