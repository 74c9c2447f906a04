"""The JavaScript reader (``js/``) asked every question ``zs ... --json`` answers, in Node and in Chromium, on
every committed vector, on archives and fragment chains of random repositories that the real icechunk wrote,
and held to Python's answers; and refusing what it must: a damaged block (named), a file replaced on a server
that ignores If-Match, an lzma archive, blocks that would decode past the ceiling, an index that loops."""

from __future__ import annotations

import contextlib
import json
import subprocess
import time
from pathlib import Path

import pytest

from toolkit.jsreader import (
    JS,
    NODE,
    NodeSession,
    assert_same_answers,
    node_answers,
    plan_for,
    python_answers,
    require_js,
)
from toolkit.peers import GENERATOR, run_peer_script
from toolkit.places import TESTDATA
from toolkit.servers import faulty_server, nginx_server  # noqa: F401
from toolkit.zsfiles import FileBuilder
from zsarchive.archive import RepoArchive, export
from zsarchive.archive.format import schema as S
from zsarchive.zs.reader import ZS
from zsarchive.zs.writer import ZSWriter

VECTORS = sorted((TESTDATA / "archive").glob("v*/archive.zs"))
RANDOM = [(2, 8), (1, 1008)]
"""(icechunk major version, generator seed): histories with moves, amends, tag deletion, virtual, inline and
native chunks and names from a wide alphabet, each exported whole; v2 seed 2 also as a chain of fragments."""
TIMEOUT_MS = 60_000


@pytest.fixture(scope="module", autouse=True)
def js_installed():
    require_js()


@pytest.fixture(scope="module")
def random_archives(request, tmp_path_factory) -> list[tuple[str, Path, list[str]]]:
    """(name, archive, authorized virtual prefixes) of random repositories: whole exports, and the newest
    fragment of a chain exported along one history (with chunk bytes embedded)."""
    out = []
    for version, seed in RANDOM:
        python = request.getfixturevalue(f"icechunk{version}_python")
        work = tmp_path_factory.mktemp(f"random-v{version}-{seed}")
        done = subprocess.run(
            [str(python), str(GENERATOR), str(work), "--seed", str(seed)], capture_output=True, timeout=600
        )
        assert done.returncode == 0, done.stderr.decode(errors="replace")[-3000:]
        made = json.loads(done.stdout)
        export(work / "repo", work / "repo.zs")
        out.append((f"v{version}-seed{seed}", work / "repo.zs", [made["virtual_prefix"]]))
    out.append(_chain(request.getfixturevalue("icechunk2_python"), tmp_path_factory.mktemp("chain")))
    return out


def _chain(python: Path, work: Path) -> tuple[str, Path, list[str]]:
    gen = subprocess.Popen(
        [str(python), str(GENERATOR), str(work), "--seed", "2", "--steps", "9", "--pause-every", "3"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    chain: list[Path] = []
    made: dict = {}
    try:
        for line in gen.stdout:
            made = json.loads(line)
            chain.append(work / f"f{len(chain)}.zs")
            export(work / "repo", chain[-1], base=chain[-2] if len(chain) > 1 else None, include_chunks=True)
            with contextlib.suppress(BrokenPipeError):
                gen.stdin.write("\n")
                gen.stdin.flush()
    finally:
        with contextlib.suppress(BrokenPipeError):
            gen.stdin.close()
        assert gen.wait(timeout=300) == 0
    assert len(chain) >= 3
    return "v2-seed2-chain", chain[-1], [made["virtual_prefix"]]


@pytest.fixture(scope="module")
def expected():
    """Python's answers to an archive's plan, computed once per module: (plan, answers) by archive."""
    cache: dict[Path, tuple[list[dict], list[dict]]] = {}

    def of(archive: Path) -> tuple[list[dict], list[dict]]:
        if archive not in cache:
            plan = plan_for(archive)
            cache[archive] = plan, python_answers(archive, plan)
        return cache[archive]

    return of


@pytest.mark.parametrize("vector", VECTORS, ids=[v.parent.name for v in VECTORS])
def test_every_vector_answers_alike_in_node(vector, expected, tmp_path):
    plan, answers = expected(vector)
    assert_same_answers(plan, node_answers(vector, plan, tmp_path), answers, vector.parent.name)


@pytest.mark.parametrize("codec", ["zstd", "none"])
def test_archives_of_every_codec_the_reader_decodes_answer_alike_in_node(codec, expected, tmp_path):
    """zstd blocks through the vendored decoder, blocks stored as they are (deflate: every vector)."""
    archive = tmp_path / f"{codec}.zs"
    export(TESTDATA / "icechunk" / "v2", archive, codec=codec, include_chunks=True)
    plan, answers = expected(archive)
    assert_same_answers(plan, node_answers(archive, plan, tmp_path), answers, codec)


def test_random_repositories_and_a_chain_answer_alike_in_node(random_archives, expected, tmp_path):
    for name, archive, authorize in random_archives:
        plan, answers = expected(archive)
        assert_same_answers(plan, node_answers(archive, plan, tmp_path, tuple(authorize)), answers, name)


@pytest.fixture(scope="module")
def served(nginx_server, random_archives):  # noqa: F811
    """The reader, its test page and every archive (each fragment with the archives it builds on), on nginx."""
    root = nginx_server.root
    (root / "js").symlink_to(JS)
    archives = []
    for vector in VECTORS:
        (root / vector.parent.name).symlink_to(vector.parent)
        archives.append((vector.parent.name, vector, f"{vector.parent.name}/{vector.name}", []))
    for name, archive, authorize in random_archives:
        (root / name).symlink_to(archive.parent)
        archives.append((name, archive, f"{name}/{archive.name}", authorize))
    return nginx_server, archives


def _harness(browser, server):
    page = browser.new_page()
    page.set_default_timeout(TIMEOUT_MS)
    page.goto(server.url("js/test/harness.html"))
    page.wait_for_selector("body[data-ready=true]", state="attached")
    return page


def test_every_archive_answers_alike_in_chromium(browser, served, expected):
    server, archives = served
    page = _harness(browser, server)
    try:
        for name, archive, path, authorize in archives:
            plan, answers = expected(archive)
            got = json.loads(
                page.evaluate(
                    "([url, plan, authorize]) => runPlan(url, plan, authorize)", [server.url(path), plan, authorize]
                )
            )
            assert "open_error" not in got, (name, got)
            assert_same_answers(plan, got, answers, f"{name} in Chromium")
    finally:
        page.close()


MANY_REFS = r"""
import sys, icechunk as ic, zarr
repo = ic.Repository.create(ic.local_filesystem_storage(sys.argv[1]))
s = repo.writable_session("main")
zarr.group(store=s.store).create_array("v", shape=(20000, 10), chunks=(1, 10), dtype="f4", compressors=None, fill_value=0)
s.store.set_virtual_refs("v", [ic.VirtualChunkSpec(index=[i, 0], location=f"s3://bucket/f{i % 7}.nc", offset=40 * i, length=40)
                               for i in range(20000)], validate_containers=False)
s.commit("20,000 virtual refs")
"""
"""Runs under icechunk 2.x: ``PATH`` writes a repository of one array of 20,000 virtual chunk refs."""


def test_a_cold_lookup_costs_depth_plus_one_requests_per_family_and_a_repeat_none(
    browser, served, icechunk2_python, tmp_path
):
    """Over nginx in Chromium, on an archive of tiny blocks (an index many levels deep) whose chunk refs lie far
    beyond what opening reads: opening is one round trip (head and tail together); then each record family a
    chunk ref lookup touches costs at most one root-to-leaf path, depth + 1 requests, as the Python reader's
    blocks (tests/system/test_archive.py), and asked again nothing."""
    server, _ = served
    run_peer_script(icechunk2_python, MANY_REFS, str(tmp_path / "repo"))
    deep = server.root / "deep.zs"
    export(tmp_path / "repo", deep, codec="none", approx_block_size=256, branching_factor=3)
    with RepoArchive(deep) as arc:
        depth = arc.zs.root_index_level
        node = arc.node_info("main", "/v")
        coords = [10_000, 0]
        expected = arc.chunk_info("main", node.path, coords)
    assert depth >= 2
    page = _harness(browser, server)
    try:
        mark = server.mark()
        got = page.evaluate(
            "([url, path, coords]) => lookup(url, 'main', path, coords)", [server.url("deep.zs"), node.path, coords]
        )
        requests = server.requests_since(mark)
    finally:
        page.close()
    assert (got["chunk"]["location"], got["chunk"]["offset"], got["chunk"]["length"]) == (
        expected.location,
        expected.offset,
        expected.length,
    )
    steps = got["steps"]
    assert got["depth"] == depth and steps["open"] == 2 and steps["again"] == 0, steps
    for family in ("refs", "nodes", "chunks"):
        assert steps[family] <= depth + 1, steps
    assert steps["chunks"] >= 1, "the refs lie beyond the head and tail opening read"
    assert steps["history"] <= got["history"] * (depth + 1), steps
    assert len(requests) == sum(steps.values()) and all(r.range and r.status == 206 for r in requests)
    assert all(r.if_match for r in requests[2:]), "every read after opening is on condition of the ETag"


def test_a_damaged_block_is_refused_naming_it(tmp_path):
    damaged = tmp_path / "damaged.zs"
    data = bytearray((TESTDATA / "archive" / "v6" / "archive.zs").read_bytes())
    with ZS(str(TESTDATA / "archive" / "v6" / "archive.zs")) as z:
        first = next(iter(z._extents(b"", None)))
    data[first.offset + first.length // 2] ^= 0xFF
    damaged.write_bytes(bytes(data))
    with NodeSession() as node:
        assert node.ask({"open": str(damaged)})["ok"]
        refused = node.ask({"query": {"q": "refs"}})
    assert refused["error"] == "ZSCorrupt"
    assert (
        refused["message"]
        == f"{damaged}: block at offset {first.offset}: block CRC mismatch "
        + refused["message"].split("block CRC mismatch ", 1)[1]
    )
    assert "\n" not in refused["message"]


def _ops_archive(tmp_path) -> tuple[bytes, int]:
    """An ops log of 300 KB, and the offset of a block in its middle, beyond what opening reads (the head
    and the tail)."""
    big = tmp_path / "ops.zs"
    ops = [
        S.record(S.OPS, (10**15 + i, i), ("NewCommitUpdate", None, json.dumps({"branch": "main", "n": "x" * 60})))
        for i in range(3000)
    ]
    with ZSWriter(
        str(big),
        {S.METADATA_KEY: {"format_version": 6, "source_spec_version": 2}},
        codec="none",
        approx_block_size=8192,
    ) as writer:
        writer.add_records(ops + [S.record(S.HEADER, (), (6, 2, 0, "test", (("ops log", 3000),)))])
        writer.finish()
    body = big.read_bytes()
    with ZS(str(big)) as z:
        middle = [e for e in z._extents(b"", None) if 65536 <= e.offset < len(body) - 65536 - e.length]
    assert middle, "a block outside what opening reads"
    return body, middle[0].offset


def _changed(body: bytes, offset: int) -> bytes:
    """``body`` with one bit of the block at ``offset`` flipped: another version of the file."""
    changed = bytearray(body)
    changed[offset + 20] ^= 1
    return bytes(changed)


def test_a_server_ignoring_if_match_is_caught_by_the_etag(faulty_server, tmp_path):  # noqa: F811
    """The file is replaced between two reads; the server answers the second read's If-Match with the new
    version (206): the answer's own ETag gives it away, as in the Python reader."""
    body, middle = _ops_archive(tmp_path)
    faulty_server.files["a.zs"] = body
    faulty_server.honor_if_match = False
    with NodeSession() as node:
        assert node.ask({"open": faulty_server.url("a.zs")})["ok"]
        old = faulty_server.etag("a.zs")
        faulty_server.files["a.zs"] = _changed(body, middle)
        refused = node.ask({"query": {"q": "ops"}})
    assert refused["error"] == "ZSCorrupt"
    assert refused["message"].startswith(
        f"{faulty_server.url('a.zs')}: file changed while reading (ETag was {old}, now"
    )
    assert any(seen.if_match == old for seen in faulty_server.seen), "the reads after opening carried If-Match"


def test_a_server_ignoring_if_match_is_caught_by_the_etag_in_chromium(browser, faulty_server, tmp_path):  # noqa: F811
    """The same in a page: the reader and the archive come from the one misbehaving server (a site beside its
    archive), the file is replaced after opening, and the ops read after it is refused, never shown."""
    for path in JS.rglob("*"):
        if path.is_file() and "node_modules" not in path.parts:
            faulty_server.files[f"js/{path.relative_to(JS).as_posix()}"] = path.read_bytes()
    body, middle = _ops_archive(tmp_path)
    faulty_server.files["a.zs"] = body
    faulty_server.honor_if_match = False
    url = faulty_server.url("a.zs")
    page = _harness(browser, faulty_server)
    opened = json.loads(page.evaluate("url => runPlan(url, [{q: 'summary'}], [])", url))
    assert "ok" in opened[0], opened
    old = faulty_server.etag("a.zs")
    faulty_server.files["a.zs"] = _changed(body, middle)
    (refused,) = json.loads(page.evaluate("url => runPlan(url, [{q: 'ops'}], [])", url))
    page.close()
    assert refused["error"] == "ZSCorrupt", refused
    assert refused["message"].startswith(f"{url}: file changed while reading (ETag was {old}, now"), refused
    assert any(seen.if_match == old for seen in faulty_server.seen if seen.path == "/a.zs"), "reads carried If-Match"


def test_an_lzma_archive_is_refused_in_one_line(tmp_path):
    archive = tmp_path / "lzma.zs"
    export(TESTDATA / "icechunk" / "v2", archive, codec="lzma")
    with NodeSession() as node:
        refused = node.ask({"open": str(archive)})
    assert refused["error"] == "ZSError"
    assert refused["message"] == (
        f"{archive}: its blocks are compressed with lzma2;dsize=2^20, which the JavaScript "
        "reader does not support (zsarchive in Python reads it; export the archive with "
        "--codec deflate or zstd for the web)"
    )


@pytest.mark.parametrize("codec", ["deflate", "zstd"])
def test_a_block_decoding_past_the_ceiling_is_refused(tmp_path, codec):
    """A few kilobytes that decode to 65 MiB: refused naming the block (zstd before decoding: its frame says)."""
    archive = tmp_path / f"bomb-{codec}.zs"
    marker = {S.METADATA_KEY: {"format_version": 6, "source_spec_version": 2}}
    with ZSWriter(str(archive), marker, codec=codec, approx_block_size=1 << 27) as writer:
        writer.add_records([S.record(S.REFS, ("branch", "main"), ("A" * 20,)) + bytes(65 << 20)])
        writer.finish()
    assert archive.stat().st_size < 1 << 20
    with ZS(str(archive)) as z:
        block = next(iter(z._extents(b"", None))).offset
    with NodeSession() as node:
        assert node.ask({"open": str(archive)})["ok"]
        refused = node.ask({"query": {"q": "refs"}})
    assert refused["error"] == "ZSCorrupt"
    assert refused["message"].startswith(
        f"{archive}: block at offset {block}: payload does not decompress: decodes to more than {64 << 20} bytes"
    )


def test_an_index_reached_twice_is_refused(tmp_path):
    """A root whose two entries name one index block (a DAG, which could name 10^12 blocks in a few hundred bytes)."""
    b = FileBuilder(metadata={S.METADATA_KEY: {"format_version": 6}})
    data = b.data_block([S.record(S.REFS, ("branch", "main"), ("A" * 20,))])
    inner = b.index_block(1, [(b"", *data)])
    b.root_block(2, [(b"", *inner), (b"B", *inner)])
    archive = tmp_path / "dag.zs"
    archive.write_bytes(b.build())
    with NodeSession() as node:
        assert node.ask({"open": str(archive)})["ok"]
        refused = node.ask({"query": {"q": "refs"}})
    assert refused["error"] == "ZSCorrupt" and "is reached twice (index blocks must form a tree)" in refused["message"]


def _python_arrays(
    archive: Path, ref: str, repo: Path | None, authorize: list[str], under: str = "/"
) -> dict[str, list]:
    """Every array of the snapshot (not under ``under`` when it is not the root) read by zarr-python through the
    Python store (flat values)."""
    import numpy as np
    import zarr

    from zsarchive.archive.zarrstore.store import open_store

    store = open_store(str(archive), ref, repo=repo, authorize=authorize)
    try:
        return {
            "/" + path: np.asarray(array[...]).ravel().tolist()
            for path, array in zarr.open_group(store, mode="r").members(max_depth=None)
            if isinstance(array, zarr.Array) and (under == "/" or not ("/" + path).startswith(under))
        }
    finally:
        store.close()


def _zarrita_arrays(
    archive: Path, ref: str, repo: Path | None, authorize: list[str], paths: list[str]
) -> dict[str, list]:
    done = subprocess.run(
        [
            NODE,
            str(JS / "test" / "node-arrays.js"),
            str(archive),
            ref,
            str(repo or "-"),
            authorize[0] if authorize else "-",
            *paths,
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


def test_zarrita_reads_embedded_arrays_as_python_does():
    """The v6 vector embeds its chunk bytes (pieces, shard indexes): zarrita over the archive store in Node reads
    each array at a tag as zarr-python over the Python store does (virtual arrays: not authorized here)."""
    vector = TESTDATA / "archive" / "v6" / "archive.zs"
    expected = _python_arrays(vector, "tag:v1.1", None, [], under="/data/sub/")
    assert expected and _zarrita_arrays(vector, "tag:v1.1", None, [], list(expected)) == expected


def test_zarrita_reads_virtual_arrays_from_the_bytes_a_format_7_archive_keeps():
    """The v7 vector keeps the fixture's virtual chunk bytes: zarrita in Node reads the virtual arrays whose
    every ref is kept with no prefix authorized, as zarr-python does over the Python store, and as the
    fixture's files give them."""
    import numpy as np
    import zarr

    from zsarchive.archive.zarrstore.store import open_store

    vector = TESTDATA / "archive" / "v7" / "archive.zs"
    paths = ["/data/sub/many_virt", "/data/sub/virt"]
    store = open_store(str(vector), "main")
    try:
        expected = {
            path: np.asarray(zarr.open_array(store, path=path.lstrip("/"), mode="r")[...]).ravel().tolist()
            for path in paths
        }
    finally:
        store.close()
    granules = TESTDATA / "icechunk" / "virtual-data" / "granules"
    assert (
        np.frombuffer(b"".join((granules / f"g{i}.bin").read_bytes()[:8] for i in range(8)), "<i4").tolist()
        == expected["/data/sub/many_virt"][:16]
    )
    assert _zarrita_arrays(vector, "main", None, [], paths) == expected


def test_the_reader_s_jsdoc_types_check():
    """TypeScript checks the reader and its drivers by their JSDoc types (js/tsconfig.json): what the package
    promises its users who type-check holds."""
    done = subprocess.run(
        [str(JS / "node_modules" / ".bin" / "tsc"), "-p", str(JS / "tsconfig.json")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-3000:]


def test_a_block_longer_than_any_within_the_ceiling_is_refused_unread(tmp_path):
    """An index entry naming 70 MiB of the file as one block: refused before a byte of it is fetched (a block
    that decodes within the 64 MiB ceiling is at most that long stored)."""
    b = FileBuilder(metadata={S.METADATA_KEY: {"format_version": 6}})
    b.framed(bytes(70 << 20))  # room in the file for the claimed block
    data = b.data_block([S.record(S.REFS, ("branch", "main"), ("A" * 20,))])
    b.root_block(1, [(b"", b.start, 70 << 20), (b"B", *data)])
    archive = tmp_path / "long.zs"
    archive.write_bytes(b.build())
    with NodeSession() as node:
        refused = node.ask({"open": str(archive)})  # the root's entries are checked as it is read
    assert refused["error"] == "ZSCorrupt"
    assert refused["message"].startswith(f"{archive}: block at offset ")
    assert (
        "index entry 0 points at a block of 73400320 bytes: no block that decodes within the ceiling"
        in refused["message"]
    )


@pytest.mark.parametrize("fault", ["slow", "drip"])
def test_a_server_that_stalls_or_drips_ends_in_one_line(faulty_server, fault):  # noqa: F811
    """No answer within the timeout (retried, then given up), or a body arriving slower than 64 KiB/s: one line,
    in bounded time, never a hang."""
    faulty_server.files["a.zs"] = (TESTDATA / "archive" / "v6" / "archive.zs").read_bytes()
    faulty_server.slow_seconds = 30
    faulty_server.faults.extend([fault] * 8)
    with NodeSession() as node:
        started = time.monotonic()
        refused = node.ask({"open": faulty_server.url("a.zs"), "timeout": 500})
        took = time.monotonic() - started
    assert refused["error"] == "ZSError" and took < 20, (refused, took)
    assert (
        refused["message"] == f"{faulty_server.url('a.zs')}: no complete answer in time (0.5 s, and 64 KiB/s of body)"
    )
