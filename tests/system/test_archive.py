"""Every answer of an exported archive equals the LIVE answer of the real icechunk (V1 and V2 fixtures)."""

from __future__ import annotations

import base64
import datetime as dt
import json
import os
import subprocess
import sys

import pytest

from toolkit.agreement import check_ancestry, check_diffs, check_ops_log, check_refs, check_snapshot, every_ref
from toolkit.oracle import fixtures, oracle, repo_path
from toolkit.cli import run_zs
from zsarchive.archive import NotFound, RepoArchive, export, parse_time
from zsarchive.errors import ZSError

CASES = {  # fixture name -> (icechunk major version that reads it, name for oracle/repo_path)
    "v1": (1, None),
    "v2": (2, None),
    "v1-migrated": (2, "v1-migrated"),  # a V1 repository upgraded in place by icechunk 2.x
}


@pytest.fixture(scope="module", params=list(CASES))
def case(request, tmp_path_factory):
    """(icechunk's answers, archive path, repository path) for one fixture repository."""
    version, name = CASES[request.param]
    python = request.getfixturevalue(f"icechunk{version}_python")
    answers = oracle(version, python, name)  # also links the virtual-data prefix to this clone
    repo = repo_path(version, name)
    out = tmp_path_factory.mktemp(f"archive-{request.param}") / "repo.zs"
    export(repo, out, codec="deflate")
    return answers, out, repo


@pytest.fixture
def archive(case):
    answers, path, _ = case
    prefix = fixtures()["virtual"]["prefix"]
    with RepoArchive(path, authorize=[prefix]) as arc:
        yield arc


def _b64(text: str) -> bytes:
    return base64.b64decode(text)


def test_refs_equal_icechunk(case, archive):
    answers, _, _ = case
    if "repo_info" in answers:
        deleted = answers["repo_info"]["deleted_tags"]
    else:  # icechunk 1.x has no API listing deleted tags: the fixture generator recorded them
        deleted = fixtures()[f"v{answers['spec_version']}"]["deleted_tags"]
    check_refs(answers, archive, deleted)


def test_ancestry_of_every_branch_and_tag(case, archive):
    check_ancestry(case[0], archive)


def test_log_time_range_and_as_of(case, archive):
    answers, _, _ = case
    history = answers["ancestry"]["branch:main"]
    newest, middle = history[0], history[len(history) // 2]
    assert archive.resolve(f"main@{middle['written_at']}") == middle["id"]
    since, until = parse_time(middle["written_at"]), parse_time(newest["written_at"])
    expected = [s["id"] for s in history if since <= parse_time(s["written_at"]) <= until]
    assert [s["id"] for s in archive.log("main", since=since, until=until)] == expected
    # The same bounds as TIME text (what the CLI passes) and as datetimes.
    assert [s["id"] for s in archive.log("main", since=middle["written_at"], until=newest["written_at"])] == expected
    moment = dt.datetime.fromisoformat(middle["written_at"].replace("Z", "+00:00"))
    assert [s["id"] for s in archive.log("main", since=moment, until=until)] == expected
    everything = archive.log()
    if "repo_info" in answers:  # a repo info file lists every snapshot the repository knows
        known = {s["id"]: (s["flushed_at"], s.get("parent_id")) for s in answers["repo_info"]["snapshots"]}
        assert {s["id"]: (s["flushed_at"], s["parent_id"]) for s in everything} == known
    else:  # spec V1: every snapshot file, reachable from a ref or not
        assert {s["id"]: s["flushed_at"] for s in everything} == {
            sid: snap["flushed_at"] for sid, snap in answers["snapshots"].items()
        }
    times = [s["flushed_at"] for s in everything]
    assert times == sorted(times, reverse=True)
    window = archive.log(since=middle["written_at"], until=newest["written_at"])
    assert [s["id"] for s in window] == [s["id"] for s in everything if since <= parse_time(s["flushed_at"]) <= until]
    with pytest.raises(NotFound, match="before the first commit"):
        archive.log("main", until=parse_time(history[-1]["written_at"]) - 1)
    with pytest.raises(NotFound, match="flushed at or before"):
        archive.resolve("main@1999-01-01")


def _chunk_key_coords(zarr_json: dict, suffix: str) -> tuple[int, ...] | None:
    encoding = zarr_json.get("chunk_key_encoding", {"name": "default"})
    sep = encoding.get("configuration", {}).get("separator", "/" if encoding["name"] == "default" else ".")
    if encoding["name"] == "default":
        if not suffix.startswith("c"):
            return None
        rest = suffix[2:]
        return tuple(int(p) for p in rest.split(sep)) if rest else ()
    return tuple(int(p) for p in suffix.split(sep))


def test_nodes_chunks_and_bytes_at_every_ref(case, archive):
    answers, _, repo = case
    assert answers["refs"]
    for ref in every_ref(answers):
        check_snapshot(answers, archive, ref, repo)


def test_diff_equals_icechunk(case, archive):
    check_diffs(case[0], archive)


def test_ops_log_equals_icechunk(case, archive):
    check_ops_log(case[0], archive)


def test_cold_chunk_ref_reads_at_most_depth_plus_one_blocks_per_family(case, tmp_path):
    answers, _, repo = case
    deep = tmp_path / "deep.zs"
    # Tiny blocks and a branching factor of 3 give a multi-level index even for a small repository.
    export(repo, deep, codec="none", approx_block_size=256, branching_factor=3)
    tree = answers["trees"][answers["branches"]["main"]]
    path, info = next((p, i) for p, i in tree["arrays"].items() if i["chunk_coordinates"])
    with RepoArchive(deep) as arc:
        depth = arc.zs.root_index_level
        assert depth >= 2

        def reads() -> int:
            return arc.zs.stats.snapshot()["block_reads"]

        # One family at a time: each step's new reads stay within one root-to-leaf path.
        start = reads()
        arc.resolve("main")  # refs family
        after_refs = reads()
        node = arc.node("main", path)  # nodes family (the refs blocks are cached now)
        after_nodes = reads()
        # a format 2 chunk ref resolves against the snapshot's history: one snapshot record each
        history = len(arc._history_depths(node["snapshot_id"]))
        after_history = reads()
        ref = arc.node_chunk_ref(node, tuple(info["chunk_coordinates"][-1]))  # chunk refs family
        after_chunks = reads()
    assert ref["coords"] == info["chunk_coordinates"][-1]
    assert after_history - after_nodes <= history * (depth + 1)
    for family_reads in (after_refs - start, after_nodes - after_refs, after_chunks - after_history):
        assert 1 <= family_reads <= depth + 1, (depth, start, after_refs, after_nodes, after_chunks)


def test_unknown_ref_path_and_coords(archive, case):
    answers, _, _ = case
    with pytest.raises(NotFound, match="unknown branch, tag or snapshot 'nope'"):
        archive.ls("nope")
    for deleted in (r["name"] for r in archive.refs() if r["type"] == "deleted_tag"):
        with pytest.raises(NotFound, match=f"tag '{deleted}' was deleted"):
            archive.ls(deleted)
    with pytest.raises(NotFound, match="no node '/no/such'"):
        archive.node("main", "/no/such")
    tree = answers["trees"][answers["branches"]["main"]]
    path = next(iter(tree["arrays"]))
    with pytest.raises(NotFound, match="outside the chunk grid"):
        archive.chunk_ref("main", path, (10**6,) * len(archive.node("main", path)["num_chunks"]))


def test_cli_chunk_data_and_json_contract(case, archive):
    """`zs chunk --data` gives what zarr reads through icechunk, for one chunk of every kind."""
    answers, path, repo = case
    prefix = fixtures()["virtual"]["prefix"]
    tree = answers["trees"][answers["branches"]["main"]]
    arrays = {n["path"].lstrip("/"): n for n in archive.ls("main") if n["node_type"] == "array"}
    by_kind = {}
    for key, value in tree["chunks"].items():
        array = max((p for p in arrays if key.startswith(p + "/")), key=len)
        coords = _chunk_key_coords(arrays[array]["zarr_json"], key[len(array) + 1 :])
        if "bytes_b64" in value:
            by_kind.setdefault(archive.chunk_ref("main", array, coords)["kind"], (array, coords, value))
    assert set(by_kind) == {"inline", "native", "virtual"}
    for kind, (array, coords, value) in by_kind.items():
        text = ",".join(map(str, coords))
        out = run_zs(
            "chunk", str(path), "main", array, text, "--data", "--repo", str(repo), "--authorize", prefix, text=False
        )
        assert out.returncode == 0, out.stderr
        assert out.stdout == _b64(value["bytes_b64"]), kind
        out = run_zs("chunk", str(path), "main", array, text, "--json", text=False)
        row = json.loads(out.stdout)
        assert set(row) == {
            "path",
            "coords",
            "kind",
            "offset",
            "length",
            "chunk_id",
            "location",
            "checksum_etag",
            "checksum_last_modified",
        }
        assert (row["kind"], row["coords"]) == (kind, list(coords))
    out = run_zs("refs", str(path), "--json", text=False)
    rows = [json.loads(line) for line in out.stdout.splitlines()]
    assert {r["name"]: r["snapshot_id"] for r in rows if r["type"] == "branch"} == answers["branches"]
    out = run_zs("log", str(path), "main", "--json", text=False)
    rows = [json.loads(line) for line in out.stdout.splitlines()]
    assert [r["id"] for r in rows] == [s["id"] for s in answers["ancestry"]["branch:main"]]
    assert set(rows[0]) == {"id", "parent_id", "flushed_at", "message", "metadata"}


def test_virtual_chunks_need_authorization(case):
    answers, path, _ = case
    with RepoArchive(path) as arc:
        for ref in answers["refs"]:
            for node in arc.ls(ref):
                if node["node_type"] != "array":
                    continue
                for chunk in arc.chunk_refs(ref, node["path"]):
                    if chunk["kind"] == "virtual":
                        with pytest.raises(ZSError, match="in Python, --authorize file://"):
                            arc.chunk_data(ref, node["path"], chunk["coords"])
                        return
    pytest.fail("fixture has no virtual chunk")


@pytest.mark.parametrize(
    "args",
    [
        ["--help"],
        ["chunk", "{archive}", "main", "/data/temperature", "0,0", "--json"],
        ["chunk", "{archive}", "main", "/data/temperature", "0,0"],
        ["dump", "{archive}", "-o", os.devnull],
        ["validate", "{archive}"],
    ],
)
def test_commands_that_read_do_not_import_numpy_or_the_decoders(case, args):
    """Start-up time is most of a one-chunk lookup: numpy and the Icechunk decoders (~0.2 s to import)
    are for exporting and inspecting repositories only, and a chunk ref lookup imports only the reading
    of refs; a plain one (``--json``) not even click (docs/benchmarks.rst: the cold lookup). Validating an
    archive checks its chunk refs an array at a time as columns (numpy), as a restore reads them."""
    heavy = ["flatbuffers", "zsarchive.icechunk.manifest", "zsarchive.icechunk.repository"]
    if args[0] != "validate":
        heavy.append("numpy")
    if args[0] == "chunk":  # nor what only remote storage, fragments, a miss's suggestions, reading chunk
        # bytes or shards, URLs, the other commands, the summary or the log graph need
        heavy += [
            "obstore",
            "zarr",
            "msgpack",
            "hashlib",
            "difflib",
            "concurrent.futures",
            "urllib.parse",
            "pathlib",
            "zsarchive.archive.read.chunkdata",
            "zsarchive.icechunk.storage",
            "zsarchive.io.objects",
            "zsarchive.archive.format.shards",
            "zsarchive.archive.format.pieces",
            "zsarchive.archive.read.summary",
            "zsarchive.archive.read.loggraph",
            "zsarchive.cli.archive_queries",
            "lzma",
            "zstandard",
            "numbers",  # a deflate archive, Python ints
            "dataclasses",
        ]  # the typed values a lookup makes are defined without it (~1 ms)
    if args[0] == "chunk" and "--json" in args:  # nor click, and what importing it costs
        heavy += ["click", "inspect", "uuid", "platform", "gettext", "zsarchive.cli.app", "zsarchive.cli.chunk"]
    # what the command imports, not what this interpreter's start did (an editable install's finder)
    script = (
        "import sys\nbefore = set(sys.modules)\nfrom zsarchive.cli import run\n"
        "try:\n    run(sys.argv[1:])\n    status = 0\nexcept SystemExit as done:\n    status = done.code\n"
        f"print(status, sorted(m for m in sys.modules if m in {heavy!r} and m not in before), file=sys.stderr)"
    )
    argv = [a.format(archive=case[1]) for a in args]
    out = subprocess.run([sys.executable, "-c", script, *argv], capture_output=True, text=True, check=True)
    assert out.stderr.strip().splitlines()[-1] == "0 []", out.stderr  # the command succeeded, importing none
