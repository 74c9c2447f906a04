"""The JSON API of ``zs serve`` over HTTP: bounded heatmaps whose bins hold the right chunks (held against
the refs real icechunk wrote), and one-line JSON errors for every bad request."""

from __future__ import annotations

import json
import subprocess
import threading
import urllib.error
import urllib.request
from urllib.parse import quote

import numpy as np
import pytest

from toolkit.oracle import CLEAN_EXIT, repo_path
from toolkit.cli import one_line_error, run_hostile
from zsarchive.archive import RepoArchive, export
from zsarchive.frontends.webapi import MAX_BINS, MAX_COLUMNS
from zsarchive.frontends.webserver import ArchiveServer

ROWS, COLUMNS = 150, 140  # a grid of 21 000 chunks
GRID_SCRIPT = (
    f"""
import sys, icechunk as ic, zarr
from icechunk import VirtualChunkSpec
repo = ic.Repository.create(ic.local_filesystem_storage(sys.argv[1]))
s = repo.writable_session("main")
zarr.group(store=s.store).create_array("grid", shape=({ROWS}, {COLUMNS}), chunks=(1, 1), dtype="u1",
                                        compressors=None, fill_value=0)
specs = [VirtualChunkSpec(index=[i, j], location="s3://bucket/f", offset=i * {COLUMNS} + j, length=1)
         for i in range({ROWS}) for j in range({COLUMNS})]
s.store.set_virtual_refs("grid", specs, validate_containers=False)
s.commit("every chunk")
s = repo.writable_session("main")
s.store.set_virtual_refs("grid", [VirtualChunkSpec(index=[i, j], location="s3://bucket/g", offset=0, length=1)
                                  for i in range(10, 20) for j in range({COLUMNS})], validate_containers=False)
s.commit("rows 10 to 19")
"""
    + CLEAN_EXIT
)


def _get(server: ArchiveServer, path: str) -> tuple[int, dict | list]:
    try:
        with urllib.request.urlopen(server.url + path, timeout=60) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


@pytest.fixture(scope="module")
def grid_server(icechunk2_python, tmp_path_factory):
    base = tmp_path_factory.mktemp("grid")
    proc = subprocess.run(
        [str(icechunk2_python), "-c", GRID_SCRIPT, str(base / "repo")], capture_output=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")[-3000:]
    export(base / "repo", base / "grid.zs")
    with RepoArchive(base / "grid.zs") as arc, ArchiveServer(arc) as server:
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        yield server
        server.shutdown()


def test_heatmap_bins_hold_the_chunks_in_c_order(grid_server):
    status, heat = _get(grid_server, "api/heatmap?ref=main&path=/grid&bins=128")
    assert status == 200
    total = ROWS * COLUMNS
    assert heat["total_chunks"] == total and heat["num_chunks"] == [ROWS, COLUMNS]
    starts = heat["bin_starts"]
    assert len(starts) == 128 and starts == [b * total // 128 for b in range(128)]
    ends = starts[1:] + [total]
    first, second = heat["counts"]
    assert first == [end - start for start, end in zip(starts, ends)]  # the first commit wrote every chunk
    rewritten = range(10 * COLUMNS, 20 * COLUMNS)  # C-order indexes of rows 10 to 19
    assert second == [len(range(max(s, rewritten.start), min(e, rewritten.stop))) for s, e in zip(starts, ends)]
    assert [c["first"]["message"] for c in heat["columns"]] == ["every chunk", "rows 10 to 19"]
    # a cell lists its chunks, those the column's commit changed in the bin's index range
    b = next(i for i, n in enumerate(second) if n and n < ends[i] - starts[i])
    status, cell = _get(grid_server, f"api/cell?ref=main&path=/grid&bins=128&bin={b}&column=1")
    expected = [list(np.unravel_index(k, (ROWS, COLUMNS))) for k in range(starts[b], ends[b]) if k in rewritten]
    assert status == 200 and cell["coords"] == [[int(i), int(j)] for i, j in expected] and cell["more"] == 0


def test_heatmap_is_bounded(grid_server):
    status, heat = _get(grid_server, f"api/heatmap?ref=main&path=/grid&bins={MAX_BINS}")
    assert status == 200 and len(heat["bin_starts"]) == MAX_BINS
    assert len(heat["counts"]) <= MAX_COLUMNS and all(len(c) == MAX_BINS for c in heat["counts"])
    assert sum(map(sum, heat["counts"])) == heat["changes"] == ROWS * COLUMNS + 10 * COLUMNS
    status, cell = _get(grid_server, f"api/cell?ref=main&path=/grid&bins={MAX_BINS}&bin=0&column=0")
    assert status == 200 and len(cell["coords"]) + cell["more"] == ROWS * COLUMNS // MAX_BINS


@pytest.mark.parametrize(
    "path,status,words",
    [
        ("api/nosuch", 400, "no such request"),
        ("api/show", 400, "missing parameter 'ref'"),
        ("api/show?ref=nosuch", 404, "nosuch"),
        ("api/ls?ref=main%40" + quote("not a time"), 400, "not a time"),
        ("api/heatmap?ref=main&path=/grid&bins=0", 400, "bins"),
        ("api/heatmap?ref=main&path=/nosuch", 404, "/nosuch"),
        ("api/heatmap?ref=main&path=/", 404, "group"),
        ("api/cell?ref=main&path=/grid&bin=x&column=0", 400, "integer"),
        ("api/chunk-log?ref=main&path=/grid&coords=a,b", 400, "coords"),
    ],
)
def test_bad_requests_get_one_line_json_errors(grid_server, path, status, words):
    got, answer = _get(grid_server, path)
    assert set(answer) == {"error"} and "\n" not in answer["error"]
    assert got == status and words in answer["error"]


def test_only_the_page_files_are_served(grid_server):
    for path in ("../setup.cfg", "static/app.js", "index.html/", "%2e%2e/setup.cfg"):
        with pytest.raises(urllib.error.HTTPError) as info:
            urllib.request.urlopen(grid_server.url + path, timeout=30)
        assert info.value.code == 404
    with urllib.request.urlopen(grid_server.url, timeout=30) as response:
        assert response.headers["Content-Type"].startswith("text/html")
        assert "default-src 'none'" in response.headers["Content-Security-Policy"]
        assert b"<script type=\"module\" src=\"app.js\"></script>" in response.read()
    assert grid_server.server_address[0] == "127.0.0.1"


def test_the_graph_and_log_answers_are_the_library_s(tmp_path):
    archive = tmp_path / "v2.zs"
    export(repo_path(2), archive)
    with RepoArchive(archive) as arc, ArchiveServer(arc) as server:
        threading.Thread(target=server.serve_forever, daemon=True).start()
        try:
            assert _get(server, "api/graph") == (200, json.loads(json.dumps(arc.graph(all_refs=True))))
            assert _get(server, "api/log?ref=dev") == (200, json.loads(json.dumps(arc.log("dev"))))
        finally:
            server.shutdown()


MANY = MAX_COLUMNS + 14
MANY_SCRIPT = (
    f"""
import sys, icechunk as ic, zarr
repo = ic.Repository.create(ic.local_filesystem_storage(sys.argv[1]))
s = repo.writable_session("main")
zarr.group(store=s.store).create_array("a", shape=(4,), chunks=(1,), dtype="i4", fill_value=0)
s.commit("create")
for n in range({MANY}):
    s = repo.writable_session("main")
    zarr.open_array(store=s.store, path="a")[n % 4] = n + 1
    s.commit(f"write {{n}}")
"""
    + CLEAN_EXIT
)


def test_more_commits_than_columns_share_columns(icechunk2_python, tmp_path):
    proc = subprocess.run(
        [str(icechunk2_python), "-c", MANY_SCRIPT, str(tmp_path / "repo")], capture_output=True, timeout=600
    )
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")[-3000:]
    export(tmp_path / "repo", tmp_path / "many.zs")
    with RepoArchive(tmp_path / "many.zs") as arc, ArchiveServer(arc) as server:
        threading.Thread(target=server.serve_forever, daemon=True).start()
        try:
            status, heat = _get(server, "api/heatmap?ref=main&path=/a")
        finally:
            server.shutdown()
    assert status == 200 and len(heat["columns"]) == MAX_COLUMNS and heat["bin_starts"] == [0, 1, 2, 3]
    assert sum(c["commits"] for c in heat["columns"]) == MANY
    messages = [m for c in heat["columns"] for m in (c["first"]["message"], c["last"]["message"])]
    assert messages[0] == "write 0" and messages[-1] == f"write {MANY - 1}"
    for column, counts in zip(heat["columns"], heat["counts"]):  # each commit wrote chunk n % 4
        first, last = (int(column[k]["message"].split()[1]) for k in ("first", "last"))
        assert last - first + 1 == column["commits"] == sum(counts)
        assert all(counts[n % 4] >= 1 for n in range(first, last + 1))


def test_serve_errors_are_one_line(tmp_path):

    one_line_error(run_hostile("serve", str(tmp_path / "missing.zs"), "--port", "0"), "missing.zs")
    archive = tmp_path / "v2.zs"
    export(repo_path(2), archive)
    with RepoArchive(archive) as arc, ArchiveServer(arc) as taken:
        one_line_error(run_hostile("serve", str(archive), "--port", str(taken.server_address[1])), "cannot listen")


def _status_for_host(url: str, host: str) -> int:
    """The status of a request to ``url`` whose Host header is ``host``."""
    request = urllib.request.Request(url, headers={"Host": host})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code


def test_a_loopback_server_answers_only_to_local_names(grid_server):
    port = grid_server.server_address[1]
    for host, status in (
        (f"127.0.0.1:{port}", 200),
        (f"localhost:{port}", 200),
        ("localhost", 200),
        (f"evil.example:{port}", 403),
        ("127.0.0.1.evil.example", 403),
        ("", 403),
    ):
        assert _status_for_host(grid_server.url + "api/summary", host) == status, host


def test_a_server_on_every_address_answers_only_to_its_own_names(tmp_path):
    """``zs serve --host 0.0.0.0`` (a real process) keeps the Host check: it answers to loopback names and to
    the names given with --allow-host, and refuses any other (a site whose name was made to point at this
    machine: DNS rebinding), on every address it listens on."""
    import re
    import signal
    import sys

    archive = tmp_path / "v2.zs"
    export(repo_path(2), archive)
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "zsarchive",
            "serve",
            str(archive),
            "--host",
            "0.0.0.0",
            "--port",
            "0",
            "--allow-host",
            "Archive.Lab.Example",
            "--allow-host",
            "10.1.2.3:8000",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = proc.stdout.readline()
        port = int(re.search(r"http://0\.0\.0\.0:(\d+)/", line).group(1))
        for host, status in (
            (f"127.0.0.1:{port}", 200),
            ("localhost", 200),
            (f"archive.lab.example:{port}", 200),
            ("ARCHIVE.LAB.EXAMPLE", 200),
            ("10.1.2.3", 200),
            (f"evil.example:{port}", 403),
            ("0.0.0.0", 403),
            ("archive.lab.example.evil.example", 403),
            ("", 403),
        ):
            assert _status_for_host(f"http://127.0.0.1:{port}/api/summary", host) == status, host
    finally:
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
    assert proc.returncode in (0, 143) and "Traceback" not in err, (proc.returncode, err)
