"""`zs summary`, `zs diff` (old -> new, --stat), `zs log` marks and `zs ls PATH` against what the real
icechunk says about the same fixture repositories."""

from __future__ import annotations

import json

import pytest

from toolkit.oracle import fixtures, oracle, repo_path
from toolkit.cli import run_zs
from zsarchive.archive import RepoArchive, export

CASES = {"v1": (1, None), "v2": (2, None), "v1-migrated": (2, "v1-migrated")}


@pytest.fixture(scope="module", params=list(CASES))
def case(request, tmp_path_factory):
    """(icechunk's answers, archive path) for one fixture repository."""
    version, name = CASES[request.param]
    answers = oracle(version, request.getfixturevalue(f"icechunk{version}_python"), name)
    out = tmp_path_factory.mktemp(f"overview-{request.param}") / "repo.zs"
    export(repo_path(version, name), out)
    return answers, out


def _arrays(tree: dict) -> list[dict]:
    return [
        {"path": "/" + n["path"], "shape": n["shape"], "dtype": n["dtype"], "chunks": n["chunks"]}
        for n in tree["nodes"]
        if n["kind"] == "array"
    ]


def test_summary_equals_icechunk(case):
    answers, path = case
    summary = json.loads(run_zs("summary", str(path), "--json", check=True).stdout)
    with RepoArchive(path) as arc:
        assert arc.summary() == summary
    assert summary["source"]["spec_version"] == answers["spec_version"]
    assert summary["archive"]["size"] == path.stat().st_size
    assert summary["archive"]["chain"][0]["location"] == str(path)
    branches = {}
    for name, sid in answers["branches"].items():
        history = answers["ancestry"][f"branch:{name}"]
        times = sorted(s["written_at"] for s in history)
        branches[name] = {
            "name": name,
            "snapshot_id": sid,
            "commits": len(history),
            "first": times[0],
            "last": times[-1],
        }
    assert {b["name"]: b for b in summary["branches"]} == branches
    assert {t["name"]: t["snapshot_id"] for t in summary["tags"]} == answers["tags"]
    for tag in summary["tags"]:
        assert tag["flushed_at"] == answers["ancestry"][f"tag:{tag['name']}"][0]["written_at"]
    for name, sid in answers["branches"].items():
        theirs = _arrays(answers["trees"][sid])
        ours = summary["arrays"][name]
        assert [(a["path"], a["shape"], a["dtype"]) for a in ours] == sorted(
            ((a["path"], a["shape"], a["dtype"]) for a in theirs), key=lambda a: a[0].split("/")
        )
        grids = {a["path"]: a["chunks"] for a in theirs}
        for a in ours:  # zarr's `chunks` is the inner chunk of a sharded array: compare the unsharded ones
            with RepoArchive(path) as arc:
                codecs = arc.node(f"branch:{name}", a["path"])["zarr_json"].get("codecs", [])
            if not any(c.get("name") == "sharding_indexed" for c in codecs):
                assert a["chunk_shape"] == grids[a["path"]], a
    with RepoArchive(path) as arc:
        held = {s["id"] for s in arc.log()}  # a migrated repository's stray V1 snapshots are not exported
    unreachable = [sid for sid, s in answers["snapshots"].items() if not s["reachable"] and sid in held]
    assert summary["snapshots"] == {"total": len(held), "unreachable": len(unreachable)}
    assert summary["chunk_bytes"] == {"embedded": False, "records": 0, "bytes": 0}


def test_summary_of_embedded_chunks_and_a_fragment(tmp_path):
    full, frag = tmp_path / "full.zs", tmp_path / "frag.zs"
    export(repo_path(2), full, include_chunks=True)
    export(repo_path(2), frag, include_chunks=True, base=full)
    with RepoArchive(full) as arc:
        facts = arc.summary()
        pieces = sum(1 for _ in arc.zs.search(prefix=b"D"))
    assert facts["chunk_bytes"]["embedded"] and facts["chunk_bytes"]["records"] == pieces
    # the chunk files of the repository, stored uncompressed, are most of what the archive's D blocks hold
    files = sum(p.stat().st_size for p in (repo_path(2) / "chunks").iterdir())
    assert files <= facts["chunk_bytes"]["bytes"] < files + 4096 * max(pieces, 1)
    with RepoArchive(frag) as arc:
        chained = arc.summary()
    assert [m["location"] for m in chained["archive"]["chain"]] == [str(frag), str(full)]
    assert chained["archive"]["size"] == frag.stat().st_size + full.stat().st_size
    text = run_zs("summary", str(frag), check=True).stdout
    assert f"chain        {frag} (fragment covering " in text
    assert f"             {full} (full archive, {full.stat().st_size:,} bytes)" in text


def _chunk_key(tree: dict, path: str, coords: list[int]) -> str:
    meta = tree["metadata"][f"{path.lstrip('/')}/zarr.json"]["json"]
    encoding = meta.get("chunk_key_encoding", {"name": "default"})
    sep = encoding.get("configuration", {}).get("separator", "/" if encoding["name"] == "default" else ".")
    if encoding["name"] == "default":
        tail = "c" + "".join(sep + str(c) for c in coords)
    else:
        tail = sep.join(str(c) for c in coords) or "0"
    return f"{path.lstrip('/')}/{tail}"


def test_diff_shows_old_and_new_refs_and_stat_as_icechunk(case):
    answers, path = case
    checked = 0
    for item in answers["diffs"]:
        if (
            "diff" not in item
            or "error" in answers["trees"].get(item["from"], {"error": 1})
            or "error" in answers["trees"].get(item["to"], {"error": 1})
        ):
            continue
        old, new = answers["trees"][item["from"]], answers["trees"][item["to"]]
        diff = run_zs("diff", str(path), item["from"], item["to"], "--json", check=True)
        rows = [json.loads(line) for line in diff.stdout.splitlines()]
        stat = [
            json.loads(line)
            for line in run_zs(
                "diff", str(path), item["from"], item["to"], "--stat", "--json", check=True
            ).stdout.splitlines()
        ]
        expected_stat = []
        for array, coords_list in sorted(item["diff"]["updated_chunks"].items()):
            before = {tuple(c) for c in old["arrays"].get(array.lstrip("/"), {}).get("chunk_coordinates", [])}
            after = {tuple(c) for c in new["arrays"].get(array.lstrip("/"), {}).get("chunk_coordinates", [])}
            counts = {"path": array, "added": 0, "changed": 0, "removed": 0}
            for coords in map(tuple, coords_list):
                counts["added" if coords not in before else "changed" if coords in after else "removed"] += 1
                row = next(
                    r
                    for r in rows
                    if r["change"] == "updated_chunk" and r["path"] == array and tuple(r["coords"]) == coords
                )
                for side, tree, present in (("from", old, before), ("to", new, after)):
                    if coords not in present:
                        assert row[side] is None, (item, row)
                        continue
                    kind = tree["chunks"][_chunk_key(tree, array, list(coords))].get("chunk_type")
                    if kind is not None:  # icechunk 1.1 cannot classify a chunk: nothing to compare
                        assert row[side]["kind"] == kind, (item, row)
                checked += 1
            expected_stat.append(counts)
        assert sorted(stat, key=lambda r: r["path"]) == expected_stat, item
    assert checked


def test_diff_table_keeps_its_columns_and_writes_each_ref(case):
    answers, path = case
    item = next(i for i in answers["diffs"] if "diff" in i and i["diff"]["updated_chunks"])
    lines = run_zs("diff", str(path), item["from"], item["to"], check=True).stdout.splitlines()
    assert lines[0].split() == ["CHANGE", "PATH", "COORDS", "FROM", "TO"]
    chunk_rows = [line for line in lines if line.startswith("updated_chunk")]
    assert chunk_rows and all(" - " not in line.split("  ", 1)[1].strip() for line in chunk_rows)
    same = run_zs("diff", str(path), item["to"], item["to"], check=True).stdout.splitlines()
    assert same == ["CHANGE  PATH  COORDS  FROM  TO"]
    stat = run_zs("diff", str(path), item["to"], item["to"], "--stat", check=True).stdout.splitlines()
    assert stat == ["PATH  ADDED  CHANGED  REMOVED"]


def test_log_marks_the_refs_reaching_each_snapshot(case):
    answers, path = case
    rows = [json.loads(line) for line in run_zs("log", str(path), "--json", check=True).stdout.splitlines()]
    reaching: dict[str, set] = {}
    for ref, chain in answers["ancestry"].items():
        kind, name = ref.split(":", 1)
        for snap in chain:
            reaching.setdefault(snap["id"], set()).add(name if kind == "branch" else f"tag:{name}")
    assert {r["id"]: set(r["refs"]) for r in rows} == {r["id"]: reaching.get(r["id"], set()) for r in rows}
    table = run_zs("log", str(path), check=True).stdout.splitlines()
    assert table[0].split() == ["ID", "FLUSHED_AT", "PARENT_ID", "REFS", "MESSAGE"]
    unreachable = [sid for sid, s in answers["snapshots"].items() if not s["reachable"]]
    for sid in unreachable:
        if any(r["id"] == sid for r in rows):
            assert "(unreachable)" in next(line for line in table if line.startswith(sid))
    two = [
        json.loads(line)["id"]
        for line in run_zs("log", str(path), "main", "-n", "2", "--json", check=True).stdout.splitlines()
    ]
    assert two == [s["id"] for s in answers["ancestry"]["branch:main"][:2]]
    one = run_zs("log", str(path), "--max-count", "1", check=True).stdout.splitlines()
    assert len(one) == 2


def test_ls_subtree_dtype_and_chunk_shape(case):
    answers, path = case
    tree = answers["trees"][answers["branches"]["main"]]
    arrays = {a["path"]: a for a in _arrays(tree)}
    groups = sorted("/" + n["path"] for n in tree["nodes"] if n["kind"] == "group" and n["path"])
    top = groups[0] if groups else "/"
    rows = [json.loads(line) for line in run_zs("ls", str(path), "main", top, "--json", check=True).stdout.splitlines()]
    expected = {
        "/" + n["path"]
        for n in tree["nodes"]
        if "/" + n["path"] == top or ("/" + n["path"]).startswith(top.rstrip("/") + "/")
    }
    assert {r["path"] for r in rows} == expected
    for row in rows:
        if row["node_type"] == "array":
            assert (row["shape"], row["dtype"]) == (arrays[row["path"]]["shape"], arrays[row["path"]]["dtype"])
    table = run_zs("ls", str(path), "main", check=True).stdout.splitlines()
    header = table[0].split()
    assert header == ["PATH", "NODE_TYPE", "SHAPE", "DTYPE", "CHUNK_SHAPE", "CHUNK_GRID", "DIMENSION_NAMES", "ID"]
    assert all(len(line.split()) == len(header) for line in table[1:] if " " not in line.split("  ")[0])
    scalars = [a for a in arrays.values() if a["shape"] == []]
    for scalar in scalars:
        line = next(line for line in table if line.startswith(scalar["path"] + " "))
        assert line.split()[2] == "()", line


def test_summary_text_lists_branches_tags_and_arrays(case):
    answers, path = case
    text = run_zs("summary", str(path), check=True).stdout
    assert text.startswith(f"archive      {path}: {path.stat().st_size:,} bytes, format version ")
    assert f"source       Icechunk repository, spec version {answers['spec_version']}; metadata " in text
    assert "BRANCH" in text and "TAG" in text or not answers["tags"]
    for name in answers["branches"]:
        assert f"\narrays at {name}:\nPATH" in text
    virtual = fixtures()["virtual"]["prefix"]
    with RepoArchive(path) as arc:
        containers = arc.summary()["source"]["virtual_chunk_containers"]
    assert (f"virtual chunks under {virtual}" in text) == (virtual in containers)
