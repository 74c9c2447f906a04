"""``zs site``: the archive's page on a static host (nginx with range support), read in Chromium by the
JavaScript reader: it shows the history as ``zs log`` does, a commit's changes and an array's heatmap as
``zs serve``'s API answers them, reads an array at a tag through zarrita as icechunk does (embedded, inline and
virtual chunks, those from the server under an authorized prefix and pinned), keeps hostile names as text, and
refuses a damaged block naming it."""

from __future__ import annotations

import datetime
import json
import os
import re
import shutil
import threading

import numpy
import pytest

from toolkit.cli import one_line_error, run_zs
from toolkit.jsreader import JS, require_js
from toolkit.pages import (
    HOSTILE_SCRIPT,
    assert_hostile_names_stay_text,
    graph_rows,
    log_rows,
    table,
    wait_commits,
    zs_json,
)
from toolkit.peers import run_peer_json, run_peer_script
from toolkit.places import TESTDATA
from toolkit.servers import nginx_server  # noqa: F401
from toolkit.virtualshards import etag
from zsarchive.archive import RepoArchive, export
from zsarchive.frontends.site import write_site
from zsarchive.frontends.webserver import ArchiveServer

TIMEOUT_MS = 60_000

REPOSITORY = r"""
import sys, json, datetime, numpy as np, zarr, icechunk as ic
path, prefix, pins = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
config = ic.RepositoryConfig.default()
config.set_virtual_chunk_container(ic.VirtualChunkContainer(prefix, ic.http_store()))
repo = ic.Repository.create(ic.local_filesystem_storage(path), config=config,
                            authorize_virtual_chunk_access={prefix: None})
rng = np.random.default_rng(7)
s = repo.writable_session("main")
root = zarr.group(store=s.store, attributes={"title": "site"})
grid = root.create_group("grid")
t = grid.create_array("temperature", shape=(64, 48), chunks=(16, 16), dtype="f8", fill_value=-1.0)
t[:] = rng.random((64, 48))                                              # native chunks (zstd, > 512 bytes)
small = root.create_array("small", shape=(6,), chunks=(2,), dtype="i2", fill_value=0)
small[:] = np.arange(6)                                                 # inline chunks
sharded = root.create_array("sharded", shape=(16, 16), chunks=(4, 4), shards=(8, 8), dtype="f4", fill_value=0)
sharded[:] = rng.random((16, 16)).astype("f4")
moment = datetime.datetime.fromisoformat(pins["modified"])
for name, file, pin in (("virtual", "ints.bin", {"last_updated_at_checksum": moment}),
                        ("pinned", "ints.bin", {"etag_checksum": pins["ints"]}),
                        ("changed", "other.bin", {"etag_checksum": pins["other"]})):
    root.create_array(name, shape=(8,), chunks=(2,), dtype="<i4", compressors=None, fill_value=0)
    s.store.set_virtual_refs(name, [ic.VirtualChunkSpec(index=[i], location=prefix + file, offset=8 * i, length=8, **pin)
                                    for i in range(4)], validate_containers=False)
first = s.commit("first", metadata={"author": "site"})
repo.create_tag("v1", first)
for step in range(3):
    s = repo.writable_session("main")
    t = zarr.open_array(s.store, path="grid/temperature")
    t[16 * step:16 * step + 16, 0:16 * (step + 1)] = step
    s.commit(f"overwrite band {step}")
print(json.dumps({"first": first}))
"""
"""Runs under icechunk 2.x: ``PATH PREFIX PINS`` writes a repository of native, inline, sharded and virtual chunks
(those in files at PREFIX, pinned by a modification time or by the ETags nginx gives the files: icechunk 2.3 sends
an ETag unquoted in If-Match, which nginx refuses, so it reads only the first array), a tag v1 and three commits
after it."""

VALUES = r"""
import sys, json, numpy as np, zarr, icechunk as ic
path, prefix, ref, *arrays = sys.argv[1:]
repo = ic.Repository.open(ic.local_filesystem_storage(path), authorize_virtual_chunk_access={prefix: None})
kind, name = ref.split(":")
session = repo.readonly_session(tag=name) if kind == "tag" else repo.readonly_session(branch=name)
print(json.dumps({a: np.asarray(zarr.open_array(session.store, path=a.strip("/"), mode="r")[...]).ravel().tolist()
                  for a in arrays}))
"""
"""Runs under icechunk 2.x: ``PATH PREFIX REF ARRAY...``: each array's values at REF, as icechunk reads them."""


@pytest.fixture(scope="module", autouse=True)
def js_installed():
    require_js()


@pytest.fixture(scope="module")
def site(nginx_server, icechunk2_python, tmp_path_factory):  # noqa: F811
    """nginx serving the page zs site wrote for a repository's archive (chunk bytes embedded), the virtual
    chunks' file, the repository, and the reader's test page: (server, archive, repository, virtual prefix)."""
    root = nginx_server.root
    (root / "virtual").mkdir()
    ints, other = root / "virtual" / "ints.bin", root / "virtual" / "other.bin"
    ints.write_bytes(bytes(range(64)))
    other.write_bytes(bytes(range(64, 128)))
    modified = datetime.datetime.fromtimestamp(ints.stat().st_mtime + 1, datetime.timezone.utc).isoformat()
    prefix = nginx_server.url("virtual/")
    repo = tmp_path_factory.mktemp("site") / "repo"
    run_peer_json(
        icechunk2_python,
        REPOSITORY,
        str(repo),
        prefix,
        json.dumps({"ints": etag(ints), "other": etag(other), "modified": modified}),
    )
    archive = repo.parent / "history.zs"
    export(repo, archive, include_chunks=True)
    write_site(archive, root / "site")
    export(repo, root / "refs-only.zs")  # native chunks read from the repository, which nginx serves too
    (root / "repo").symlink_to(repo)
    (root / "js").symlink_to(JS)
    return nginx_server, archive, repo, prefix


def _open(browser, url: str):
    page = browser.new_page()
    page.set_default_timeout(TIMEOUT_MS)
    dialogs: list[str] = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    page.goto(url)
    page.wait_for_selector("body[data-ready=true]", state="attached")
    return page, dialogs


def test_the_static_page_shows_the_history_as_zs_log(browser, site):
    server, archive, _, _ = site
    mark = server.mark()
    page, dialogs = _open(browser, server.url("site/index.html"))
    try:
        graph = zs_json("log", archive, "--graph", "--all")
        assert graph_rows(page) == [
            {"id": g["id"], "refs": g["refs"], "message": g["message"], "time": g["flushed_at"]} for g in graph
        ]
        wait_commits(page, "branch:main")
        assert table(page, "#commits") == log_rows(zs_json("log", archive, "branch:main"))
        page.click('#refs button[data-ref="tag:v1"]')
        wait_commits(page, "tag:v1")
        assert table(page, "#commits") == log_rows(zs_json("log", archive, "tag:v1"))
        assert not page.is_visible("#error") and dialogs == []
    finally:
        page.close()
    reads = [r for r in server.requests_since(mark) if r.path == "/site/history.zs"]
    assert reads and all(r.status == 206 and r.range for r in reads), "the archive is read by ranges only"
    assert len(reads) <= 3, [r.range for r in reads]  # head and tail together; the small archive is in them


def test_the_page_s_answers_a_commit_s_changes_and_heatmap_match_zs_serve_s_api(browser, site):
    """Every request of the page answered in the browser as zs serve's API answers it (summary, graph, logs,
    show, ls, heatmaps, a cell, a chunk's log), and the page draws them alike."""
    server, archive, _, _ = site
    with RepoArchive(archive) as arc, ArchiveServer(arc) as api:
        threading.Thread(target=api.serve_forever, daemon=True).start()
        try:
            page, dialogs = _open(browser, server.url("site/index.html"))
            try:
                newest = zs_json("log", archive, "main")[0]
                page.click(f'#commits button.commit[data-id="{newest["id"]}"]')
                page.wait_for_function(f"document.querySelector('#commit-id').textContent === '{newest['id']}'")
                show = api.api.answer("show", {"ref": f"snapshot:{newest['id']}"})
                assert table(page, "#changes") == [
                    [c["path"], c["node_type"], c["change"], str(c["chunks"])] for c in show["changes"]
                ]
                page.click('#changes button.path[data-path="/grid/temperature"]')
                page.wait_for_selector("#array-section:not([hidden])")
                first_heat = api.api.answer("heatmap", {"ref": "main", "path": "/grid/temperature", "bins": "5"})
                busy = next(b for b, n in enumerate(first_heat["counts"][-1]) if n)
                asked = [
                    ("summary", {}),
                    ("graph", {}),
                    ("log", {}),
                    ("log", {"ref": "tag:v1"}),
                    ("log", {"ref": "main", "since": newest["flushed_at"][:10]}),
                    ("show", {"ref": "main~1"}),
                    ("ls", {"ref": "tag:v1"}),
                    ("heatmap", {"ref": "main", "path": "/grid/temperature", "bins": "128"}),
                    ("heatmap", {"ref": "main", "path": "/grid/temperature", "bins": "5"}),
                    ("heatmap", {"ref": "tag:v1", "path": "/virtual"}),
                    (
                        "cell",
                        {
                            "ref": "main",
                            "path": "/grid/temperature",
                            "bins": "5",
                            "bin": str(busy),
                            "column": str(len(first_heat["columns"]) - 1),
                        },
                    ),
                    ("chunk-log", {"ref": "main", "path": "/grid/temperature", "coords": "0,0"}),
                ]
                ours = page.evaluate(
                    """async (asked) => {
                    const {PageAPI} = await import("./reader/frontends/pageapi.js");
                    const api = await PageAPI.open("history.zs");
                    return Promise.all(asked.map(([name, params]) => api.answer(name, params)));
                }""",
                    asked,
                )
                for (name, params), answer in zip(asked, ours):
                    theirs = json.loads(json.dumps(api.api.answer(name, params)))
                    if name == "summary":  # the archive as each reader names it: a URL, a path
                        assert answer.pop("name").endswith("/history.zs") and theirs.pop("name") == str(archive)
                    assert answer == theirs, (name, params)
                heat = api.api.answer(
                    "heatmap", {"ref": f"snapshot:{newest['id']}", "path": "/grid/temperature", "bins": "128"}
                )
                canvas = page.eval_on_selector("#heatmap", "c => ({...c.dataset})")
                column = len(heat["columns"]) - 1
                cell = next(b for b, n in enumerate(heat["counts"][column]) if n)
                page.click(
                    "#heatmap",
                    position={
                        "x": (column + 0.5) * int(canvas["cellWidth"]),
                        "y": (cell + 0.5) * int(canvas["cellHeight"]),
                    },
                )
                page.wait_for_selector("#cell-chunks button.chunk")
                listed = page.eval_on_selector_all("#cell-chunks button.chunk", "b => b.map(x => x.dataset.coords)")
                answered = api.api.answer(
                    "cell",
                    {
                        "ref": f"snapshot:{newest['id']}",
                        "path": "/grid/temperature",
                        "bins": "128",
                        "bin": str(cell),
                        "column": str(column),
                    },
                )
                assert listed == [",".join(map(str, c)) for c in answered["coords"]]
                page.click(f'#cell-chunks button.chunk[data-coords="{listed[0]}"]')
                page.wait_for_selector("#chunk-section:not([hidden])")
                assert table(page, "#chunk-log") == log_rows(
                    api.api.answer(
                        "chunk-log",
                        {"ref": f"snapshot:{newest['id']}", "path": "/grid/temperature", "coords": listed[0]},
                    )
                )
                assert not page.is_visible("#error") and dialogs == []
            finally:
                page.close()
        finally:
            api.shutdown()


def test_zarrita_reads_arrays_at_a_tag_as_icechunk_does(browser, site, icechunk2_python):
    """Native and sharded chunks embedded in the archive or read from the repository's URL, inline ones, and
    virtual ones read from nginx under the authorized prefix on condition of their pins (ETag, modification time)."""
    server, archive, repo, prefix = site
    arrays = ["/grid/temperature", "/small", "/sharded", "/virtual"]
    page = browser.new_page()
    page.set_default_timeout(TIMEOUT_MS)
    try:
        page.goto(server.url("js/test/harness.html"))
        page.wait_for_selector("body[data-ready=true]", state="attached")
        for ref in ("tag:v1", "branch:main"):
            expected = run_peer_json(icechunk2_python, VALUES, str(repo), prefix, ref, *arrays)
            for path in arrays:
                for archive_url, repo_url in (
                    (server.url("site/history.zs"), None),
                    (server.url("refs-only.zs"), server.url("repo")),
                ):
                    got = page.evaluate(
                        """async ([url, repo, ref, path, prefix]) => {
                        const {openArchive, openStore} = await import("../src/index.js");
                        const zarr = await import("zarrita");
                        const archive = await openArchive(url, {authorize: [prefix]});
                        const store = await openStore(archive, ref, {repo});
                        const array = await zarr.open(zarr.root(store).resolve(path.slice(1)), {kind: "array"});
                        return Array.from((await zarr.get(array)).data, Number);
                    }""",
                        [archive_url, repo_url, ref, path, prefix],
                    )
                    assert got == expected[path], (archive_url, ref, path)
        read = """async ([url, ref, path, authorize]) => {
            const {openArchive, openStore} = await import("../src/index.js");
            const zarr = await import("zarrita");
            const archive = await openArchive(url, {authorize});
            const array = await zarr.open(zarr.root(await openStore(archive, ref)).resolve(path), {kind: "array"});
            return zarr.get(array).then((got) => Array.from(got.data, Number), (err) => err.message);
        }"""
        url = server.url("site/history.zs")
        values = numpy.frombuffer((server.root / "virtual" / "ints.bin").read_bytes()[:32], "<i4").tolist()
        assert page.evaluate(read, [url, "tag:v1", "pinned", [prefix]]) == values  # If-Match the ETag nginx gave
        assert "is not under an authorized prefix" in page.evaluate(read, [url, "tag:v1", "virtual", []])
        other = server.root / "virtual" / "other.bin"
        other.write_bytes(bytes(range(128, 192)))  # a new version of the file the refs pin by its ETag
        os.utime(other, (other.stat().st_atime + 5, other.stat().st_mtime + 5))
        refused = page.evaluate(read, [url, "tag:v1", "changed", [prefix]])
        assert "other.bin" in refused and "412" in refused, refused
    finally:
        page.close()


def test_a_hostile_archive_stays_text_on_the_static_page(browser, site, icechunk2_python, tmp_path):
    server, _, _, _ = site
    repo = tmp_path / "repo"
    run_peer_script(icechunk2_python, HOSTILE_SCRIPT, str(repo))
    archive = tmp_path / "hostile.zs"
    export(repo, archive)
    write_site(archive, server.root / "hostile")
    page = browser.new_page(bypass_csp=True)  # the page must make no markup of the archive's strings, policy or not
    page.set_default_timeout(TIMEOUT_MS)
    dialogs: list[str] = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    try:
        page.goto(server.url("hostile/index.html"))
        page.wait_for_selector("body[data-ready=true]", state="attached")
        assert_hostile_names_stay_text(page, dialogs, archive)
    finally:
        page.close()


def test_a_damaged_block_is_refused_on_the_page_naming_it(browser, site):
    server, archive, _, _ = site
    with RepoArchive(archive) as arc:
        blocks = list(arc.zs._extents(b"", None))
    damaged = server.root / "damaged"
    shutil.copytree(server.root / "site", damaged)
    data = bytearray((damaged / "history.zs").read_bytes())
    data[blocks[0].offset + blocks[0].length // 2] ^= 0xFF  # the first data block: the refs the page asks first
    (damaged / "history.zs").write_bytes(bytes(data))
    page = browser.new_page()
    page.set_default_timeout(TIMEOUT_MS)
    try:
        page.goto(server.url("damaged/index.html"))
        page.wait_for_selector("#error:not([hidden])")
        shown = page.text_content("#error")
        assert shown.startswith(
            f"{server.url('damaged/history.zs')}: block at offset {blocks[0].offset}: block CRC mismatch"
        )
        assert page.eval_on_selector_all("#commits tbody tr", "rows => rows.length") == 0
    finally:
        page.close()


def test_zs_site_refuses_a_folder_it_did_not_write(tmp_path):
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "mine.txt").write_text("keep")
    result = run_zs("site", str(TESTDATA / "archive" / "v6" / "archive.zs"), str(tmp_path / "out"))
    assert "choose another OUTDIR" in one_line_error(result)
    assert [p.name for p in (tmp_path / "out").iterdir()] == ["mine.txt"]


def test_the_site_ships_the_reader_its_modules_and_the_decoder_s_license(tmp_path):
    """Every module the page names in site.json is in the folder, and the third-party decoder carries its license."""
    write_site(TESTDATA / "archive" / "v6" / "archive.zs", tmp_path / "out")
    site = json.loads((tmp_path / "out" / "site.json").read_text())
    assert (
        site["archive"] == "archive.zs"
        and (tmp_path / "out" / "archive.zs").read_bytes() == (TESTDATA / "archive" / "v6" / "archive.zs").read_bytes()
    )
    assert "reader/index.js" in site["modules"] and "reader/vendor/fzstd.js" in site["modules"]
    assert all((tmp_path / "out" / module).is_file() for module in site["modules"])
    shipped = {p.relative_to(tmp_path / "out").as_posix() for p in (tmp_path / "out").rglob("*") if p.is_file()}
    assert {m for m in shipped if m.startswith("reader/") and m.endswith(".js")} == set(site["modules"])
    page = (tmp_path / "out" / "index.html").read_text()
    preloaded = re.findall(r'<link rel="modulepreload" href="([^"]+)">', page)
    assert preloaded == site["modules"] and page.index('src="app.js"') < page.index("modulepreload"), (
        "index.html names every module after the page's script, for the browser to ask for at once"
    )
    license_text = (tmp_path / "out" / "reader" / "vendor" / "fzstd.LICENSE").read_text()
    assert "MIT License" in license_text and "Arjun Barrett" in license_text
    assert "fzstd.LICENSE" in (tmp_path / "out" / "reader" / "vendor" / "fzstd.js").read_text().splitlines()[0]


def test_a_fragment_s_page_reads_its_chain_and_a_picked_file_opens_too(browser, site, tmp_path):
    """zs site copies a fragment with the archive it builds on (in the folder above it here: each at its place
    relative to the other), and the page reads the chain; a file picked from the disk (a Blob) opens in the same
    page, read without a server."""
    server, archive, _, _ = site
    base = tmp_path / "history.zs"
    export(TESTDATA / "icechunk" / "v2", base)
    (tmp_path / "later").mkdir()
    fragment = tmp_path / "later" / "history-2.zs"
    export(TESTDATA / "icechunk" / "v2", fragment, base=base)
    write_site(fragment, server.root / "chain")
    assert json.loads((server.root / "chain" / "site.json").read_text())["archive"] == "later/history-2.zs"
    assert (server.root / "chain" / "later" / "history-2.zs").read_bytes() == fragment.read_bytes()
    assert (server.root / "chain" / "history.zs").read_bytes() == base.read_bytes()
    page, dialogs = _open(browser, server.url("chain/index.html"))
    try:
        graph = zs_json("log", fragment, "--graph", "--all")
        assert graph_rows(page) == [
            {"id": g["id"], "refs": g["refs"], "message": g["message"], "time": g["flushed_at"]} for g in graph
        ]
        page.set_input_files("#open-file", str(archive))  # the archive of the module's site, from the disk
        page.wait_for_selector("body[data-ready=true]", state="attached")
        wait_commits(page, "branch:main")
        assert table(page, "#commits") == log_rows(zs_json("log", archive, "branch:main"))
        assert graph_rows(page)[0]["id"] == zs_json("log", archive, "--graph", "--all")[0]["id"]
        assert not page.is_visible("#error") and dialogs == []
    finally:
        page.close()
