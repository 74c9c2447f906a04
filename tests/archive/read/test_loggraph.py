"""``zs log --graph`` and ``zs show`` held against what the real icechunk says: the ancestry of every
branch and tag of random repositories, and the transaction log of every commit of the fixture."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from hypothesis import given, settings
from hypothesis import strategies as st

from toolkit.oracle import oracle, repo_path, run_oracle
from toolkit.peers import generate
from toolkit.cli import one_line_error, run_hostile
from zsarchive.archive import RepoArchive, export
from zsarchive.archive.read.loggraph import layout, topo_order
from zsarchive.cli import main

GRAPH_SEEDS = [(1, 2), (1, 5), (2, 2), (2, 9)]
"""Random histories whose branches and tags fork from shared ancestors (lanes that join)."""


def _zs(*args: str) -> str:
    result = CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


def _check_drawing(text_lines: list[str], rows: dict[str, dict]) -> None:
    """Each snapshot's lane runs down, unbroken, to the line of its parent (bending into it on a join line)."""
    at = {}
    for number, line in enumerate(text_lines):
        for sid in rows:
            if f" {sid}" in line:
                at[sid] = number
    assert sorted(at) == sorted(rows)
    for sid, row in rows.items():
        parent = row["parent_id"]
        if parent not in rows:
            continue
        column = 2 * row["column"]
        assert at[parent] > at[sid], f"parent {parent} above {sid}"
        for number in range(at[sid] + 1, at[parent]):
            line = text_lines[number].ljust(column + 1)
            bends = "*" not in line and line[column - 1 : column] == "/"
            if bends:  # a join line: the lane bends into the parent's, which is just below
                assert number == at[parent] - 1 and rows[parent]["column"] < row["column"]
                break
            assert line[column] == "|", f"lane of {sid} broken at line {number}: {text_lines[number]!r}"
        else:
            assert rows[parent]["column"] == row["column"], f"{sid} does not lead to its parent {parent}"


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.floats(0, 1), st.integers(0, 3)), min_size=1, max_size=40))
def test_layout_of_any_tree(shape):
    """Any forest: each snapshot once, every lane unbroken from a child down to its parent."""
    snapshots = []
    for i, (pick, clock) in enumerate(shape):
        parent = None if i == 0 or pick > 0.9 else f"S{int(pick * i):03d}"
        snapshots.append({"id": f"S{i:03d}", "parent_id": parent, "flushed_at": f"2026-01-01T00:00:{i + clock:02d}Z"})
    lines = list(layout(topo_order([dict(s) for s in snapshots])))
    rows = {s["id"]: s for _, s in lines if s is not None}
    assert sorted(rows) == [s["id"] for s in snapshots]
    _check_drawing([text + (f" {s['id']}" if s else "") for text, s in lines], rows)


@pytest.mark.parametrize("version,seed", GRAPH_SEEDS, ids=[f"v{v}-seed{s}" for v, s in GRAPH_SEEDS])
def test_graph_matches_icechunk_ancestry(version, seed, request, tmp_path):
    python = request.getfixturevalue(f"icechunk{version}_python")
    made = generate(python, tmp_path, seed)
    answers = run_oracle(python, tmp_path / "repo", {made["virtual_prefix"]: Path(made["virtual_dir"])})
    archive = tmp_path / "repo.zs"
    export(tmp_path / "repo", archive)

    rows = [json.loads(line) for line in _zs("log", archive, "--graph", "--all", "--json").splitlines()]
    ids = [r["id"] for r in rows]
    assert len(ids) == len(set(ids)), "a snapshot drawn twice"
    assert set(ids) == {i["id"] for chain in answers["ancestry"].values() for i in chain}
    position = {sid: n for n, sid in enumerate(ids)}
    by_id = {r["id"]: r for r in rows}
    for ref, chain in answers["ancestry"].items():
        tip = chain[0]["id"]
        assert ref in by_id[tip]["refs"], f"{ref} not shown at its snapshot {tip}"
        for child, parent in zip(chain, chain[1:]):
            assert by_id[child["id"]]["parent_id"] == parent["id"]
            assert position[child["id"]] < position[parent["id"]], f"{ref}: parent above child"
    for sid, row in by_id.items():
        assert sorted(row["refs"]) == sorted(r for r, tip in answers["refs"].items() if tip == sid)

    text = _zs("log", archive, "--graph", "--all").splitlines()
    assert len(text) >= len(rows)
    _check_drawing(text, by_id)

    for n in (0, 1, 3):  # -n: the graph down to the n-th snapshot
        cut = [json.loads(line) for line in _zs("log", archive, "--graph", "--all", "-n", n, "--json").splitlines()]
        assert cut == rows[:n]
    for branch in answers["branches"]:  # without --all: one branch's history, in icechunk's order
        one = [
            json.loads(line)["id"] for line in _zs("log", archive, f"branch:{branch}", "--graph", "--json").splitlines()
        ]
        assert one == [i["id"] for i in answers["ancestry"][f"branch:{branch}"]]


def test_show_matches_icechunk_transaction_logs(icechunk2_python, tmp_path):
    answers = oracle(2, icechunk2_python)
    archive = tmp_path / "v2.zs"
    export(repo_path(2), archive)
    with RepoArchive(archive) as arc:
        infos = {i["id"]: i for chain in answers["ancestry"].values() for i in chain}
        for sid, snap in infos.items():
            shown = json.loads(_zs("show", archive, sid, "--json"))
            assert (shown["id"], shown["parent_id"], shown["message"], shown["metadata"]) == (
                sid,
                snap["parent_id"],
                snap["message"],
                snap["metadata"],
            )
            assert shown["refs"] == sorted(r for r, tip in answers["refs"].items() if tip == sid)
            assert shown == arc.show(f"snapshot:{sid}")
            log = answers["transaction_logs"][sid]
            if snap.get("parent_id") is None:
                assert shown["changes"] == []
                continue
            expected: dict[str, int] = {}
            for name in (
                "new_groups",
                "new_arrays",
                "deleted_groups",
                "deleted_arrays",
                "updated_groups",
                "updated_arrays",
            ):
                for node_id in log[name]:
                    expected[node_id] = 0
            for entry in log["updated_chunks"]:
                expected[entry["node_id"]] = len(entry["chunks"])
            assert {c["id"]: c["chunks"] for c in shown["changes"]} == expected
            assert shown["moves"] == [[m["from"], m["to"]] for m in log["moved_nodes"]]
            text = _zs("show", archive, sid)
            total = sum(expected.values())
            assert f"{len(expected)} node{'s' * (len(expected) != 1)} changed, {total} chunk" in text


def test_graph_usage_errors(tmp_path):
    archive = tmp_path / "v2.zs"
    export(repo_path(2), archive)
    for args in (["--graph", "--all", "main"], ["--all"], ["--graph", "--since", "2020-01-01"]):
        result = CliRunner().invoke(main, ["log", str(archive), *args])
        assert result.exit_code == 2, result.output
    result = CliRunner().invoke(main, ["show", str(archive), "nosuchbranch"])
    assert result.exit_code == 1 and "nosuchbranch" in result.output


def test_chunk_changes_match_icechunk_transaction_logs(icechunk2_python, tmp_path):
    """Per array, which chunks each commit of a history changed: decoded in bulk, as icechunk logged them."""
    answers = oracle(2, icechunk2_python)
    archive = tmp_path / "v2.zs"
    export(repo_path(2), archive)
    with RepoArchive(archive) as arc:
        for ref in ("main", "dev"):
            history = [i["id"] for i in answers["ancestry"][f"branch:{ref}"]]
            for node in arc.ls(ref):
                if node["node_type"] != "array":
                    continue
                changes = arc.chunk_changes(ref, node["path"])
                got = {
                    (tuple(c), changes["commits"][i]["id"])
                    for c, i in zip(changes["coords"].tolist(), changes["commit"].tolist())
                }
                expected = {
                    (tuple(c), sid)
                    for sid in history
                    for entry in answers["transaction_logs"][sid].get("updated_chunks", [])
                    if entry["node_id"] == node["id"]
                    for c in entry["chunks"]
                }
                assert got == expected, node["path"]
                times = [c["flushed_at"] for c in changes["commits"]]
                assert times == sorted(times) and len(changes["coords"]) == len(got)


def test_hostile_histories_end_in_one_line(tmp_path):
    from toolkit.archives import NODE, SNAPSHOT, history_archive
    from zsarchive.archive.format import schema as S
    from zsarchive.errors import ZSCorrupt

    looped = history_archive(
        tmp_path / "loop.zs",
        {"A" * 20: ("B" * 20, 2 * 10**15, "a", "{}", ()), "B" * 20: ("A" * 20, 10**15, "b", "{}", ())},
    )
    for command in (["log", str(looped), "--graph"], ["log", str(looped), "--graph", "--all"]):
        one_line_error(run_hostile(*command), "loops at snapshot")
    one_line_error(run_hostile("show", str(looped), "main"), "no transaction log record")
    sid, node_id = SNAPSHOT, NODE
    zarr_json = (
        b'{"zarr_format":3,"node_type":"array","shape":[4],'
        b'"chunk_grid":{"name":"regular","configuration":{"chunk_shape":[1]}}}'
    )
    node = S.record(S.NODE, (sid, ("v",)), (node_id, S.ARRAY, zarr_json, ((4, 1, 4),), None, (), sid))
    for coords in ((1, 2, 3), ("x",), (-1,)):  # coordinates of another rank, of text, negative
        bad = S.record(S.CHUNK_HISTORY, (node_id, coords, 10**15, sid))
        good = S.record(S.CHUNK_HISTORY, (node_id, (0,), 10**15, sid))
        path = history_archive(tmp_path / "bad.zs", {sid: (None, 10**15, "a", "{}", ())}, [node, good, bad], main=sid)
        with RepoArchive(path) as arc, pytest.raises(ZSCorrupt, match="chunk history record"):
            arc.chunk_changes("main", "/v")
        path.unlink()
