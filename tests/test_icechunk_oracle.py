"""zsarchive.icechunk against the LIVE icechunk (1.1 for spec V1, 2.x for V2) on the committed fixtures."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from agreement import assert_superset, check_transaction_logs, same_time
from oracle import fixtures, oracle, repo_path
from zsarchive.cli import main
from zsarchive.icechunk import Repository, RefKind
from zsarchive.icechunk import inspect as views

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def o2(icechunk2_python) -> dict:
    return oracle(2, icechunk2_python)


@pytest.fixture(scope="module")
def o1(icechunk1_python) -> dict:
    return oracle(1, icechunk1_python)


@pytest.fixture(scope="module", params=[1, 2])
def both(request, icechunk1_python, icechunk2_python) -> tuple[Repository, dict]:
    python = icechunk1_python if request.param == 1 else icechunk2_python
    return Repository.open(str(repo_path(request.param))), oracle(request.param, python)


def test_spec_versions(both):
    repo, o = both
    assert repo.spec_version == o["spec_version"]


def test_branches_and_tags(both):
    repo, o = both
    assert repo.branches() == o["branches"]
    assert repo.tags() == o["tags"]
    assert list(repo.branches()) == sorted(o["branches"])


def test_deleted_tags_and_fixture_facts(both):
    repo, o = both
    facts = fixtures()[f"v{o['spec_version']}"]
    assert repo.deleted_tags() == sorted(facts["deleted_tags"])
    assert not set(repo.tags()) & set(repo.deleted_tags())
    assert sorted(repo.tags()) == sorted(facts["tags"])


def test_moved_nodes_are_in_transaction_logs(o2):
    repo = Repository.open(str(repo_path(2)))
    moved = fixtures()["v2"]["moved"]
    moved = [moved] if isinstance(moved, dict) else moved
    moves = {(m.from_path, m.to_path): m for s in repo.snapshots() if s.parent_id
             for m in repo.transaction_log(s.id).moved_nodes}
    for item in moved:
        move = moves[(item["from"], item["to"])]
        later = [s.id for s in repo.snapshots() if move in repo.transaction_log(s.id).moved_nodes][0]
        node = repo.node(later, item["to"])
        assert (node.id, node.node_type) == (move.node_id, move.node_type)


def test_ancestry(both):
    repo, o = both
    for key, chain in o["ancestry"].items():
        ref = key.split(":", 1)[1]
        ours = repo.ancestry(ref)
        assert [s.id for s in ours] == [s["id"] for s in chain], key
        for mine, theirs in zip(ours, chain):
            assert mine.parent_id == theirs["parent_id"]
            assert mine.message == theirs["message"]
            assert mine.metadata == theirs["metadata"]
            assert same_time(mine.flushed_at, theirs["written_at"])
            if "manifests" in theirs:
                files = repo.snapshot(mine.id).manifest_files
                assert [{"id": m.id, "size_bytes": m.size_bytes, "num_chunk_refs": m.num_chunk_refs}
                        for m in files] == theirs["manifests"]


def test_every_snapshot_inspects_like_icechunk(both):
    repo, o = both
    assert {s.id for s in repo.snapshots()} >= set(o["snapshots"])
    for sid, theirs in o["snapshots"].items():
        theirs = {k: v for k, v in theirs.items() if k != "reachable"}
        assert_superset(views.inspect_snapshot(repo, sid), theirs, f"snapshot {sid}")


def test_repo_info_inspects_like_icechunk(o2):
    repo = Repository.open(str(repo_path(2)))
    ours = views.inspect_repo_info(repo)
    assert_superset(ours, o2["repo_info"], "repo_info")
    # What icechunk's inspect leaves out but its other calls say:
    assert repo.metadata() == o2["metadata"]
    status = repo.status()
    assert status.availability == o2["status"]["availability"]
    assert same_time(status.set_at, o2["status"]["set_at"])
    assert status.limited_availability_reason == o2["status"]["limited_availability_reason"]


def test_every_manifest_inspects_like_icechunk(o2):
    repo = Repository.open(str(repo_path(2)))
    assert o2["manifests"]
    for mid, theirs in o2["manifests"].items():
        assert_superset(views.inspect_manifest(repo, mid), theirs, f"manifest {mid}")


def test_every_transaction_log_inspects_like_icechunk(o2):
    repo = Repository.open(str(repo_path(2)))
    for sid, theirs in o2["transaction_logs"].items():
        if "error" in theirs:
            with pytest.raises(Exception):
                views.inspect_transaction_log(repo, sid)
            continue
        assert_superset(views.inspect_transaction_log(repo, sid), theirs, f"transaction log {sid}")


def test_cli_inspect_prints_the_same(o2):
    runner = CliRunner()
    sid = o2["branches"]["main"]
    result = runner.invoke(main, ["icechunk", "inspect", str(repo_path(2)), "--snapshot", sid])
    assert result.exit_code == 0, result.output
    assert_superset(json.loads(result.output), {k: v for k, v in o2["snapshots"][sid].items() if k != "reachable"})
    result = runner.invoke(main, ["icechunk", "inspect", "file://" + str(repo_path(2)), "--repo-info"])
    assert result.exit_code == 0, result.output
    assert_superset(json.loads(result.output), o2["repo_info"])
    mid = next(iter(o2["manifests"]))
    result = runner.invoke(main, ["icechunk", "inspect", str(repo_path(2)), "--manifest", mid, "--refs"])
    assert result.exit_code == 0, result.output
    assert_superset(json.loads(result.output), o2["manifests"][mid])


def _ops_fields(update) -> dict:
    """Our ops-log entry's fields the way icechunk's Python objects expose them."""
    fields = dict(update.details)
    if update.type == "FeatureFlagChangedUpdate":
        fields = {"id": fields["id"], "new_value": fields["new_value"] if fields["is_set"] else None}
    if "status" in fields:
        s = fields["status"]
        fields["status"] = {"availability": s.availability, "limited_availability_reason":
                            s.limited_availability_reason,
                            "set_at": s.set_at}
    return fields


def test_ops_log_matches_icechunk(o2):
    repo = Repository.open(str(repo_path(2)))
    ours = list(repo.ops_log())
    assert repo.repo_info().repo_before_updates, "the fixture should spill its ops log into overwritten/"
    assert len(ours) == len(o2["ops_log"])
    for mine, theirs in zip(ours, o2["ops_log"]):
        assert mine.type == theirs["kind"] + "Update"
        assert same_time(mine.updated_at, theirs["updated_at"])
        assert mine.backup_path == theirs["backup_path"]
        fields, expected = _ops_fields(mine), dict(theirs["fields"])
        if "status" in fields:
            set_at, their_set_at = fields["status"].pop("set_at"), expected["status"].pop("set_at")
            assert (set_at is None and their_set_at is None) or same_time(set_at, their_set_at)
        assert fields == expected


def _chunk_key(meta: dict, path: str, index: tuple[int, ...]) -> str:
    encoding = meta.get("chunk_key_encoding", {"name": "default"})
    sep = encoding.get("configuration", {}).get("separator", "/" if encoding["name"] == "default" else ".")
    if encoding["name"] == "default":
        key = sep.join(["c", *map(str, index)])
    else:
        key = sep.join(map(str, index)) or "0"
    return f"{path.strip('/')}/{key}" if path != "/" else key


def _bytes_of(repo_dir: Path, ref) -> bytes:
    if ref.kind is RefKind.INLINE:
        return ref.inline
    if ref.kind is RefKind.NATIVE:
        data = (repo_dir / "chunks" / ref.chunk_id).read_bytes()
    else:
        virtual = fixtures()["virtual"]
        assert ref.location.startswith(virtual["prefix"]), ref.location
        target = repo_dir.parent / virtual["directory"] / ref.location[len(virtual["prefix"]):]
        data = target.read_bytes()
    return data[ref.offset:ref.offset + ref.length]


def test_chunk_refs_give_the_bytes_icechunk_reads(both):
    repo, o = both
    repo_dir = repo_path(o["spec_version"])
    checked = {RefKind.INLINE: 0, RefKind.NATIVE: 0, RefKind.VIRTUAL: 0}
    for sid, tree in o["trees"].items():
        expected = tree["chunks"]
        seen = {}
        for node in repo.snapshot(sid).nodes:
            if node.node_type.value != "array":
                continue
            meta = json.loads(node.user_data)
            refs = list(repo.chunk_refs(sid, node.path))
            assert [r.index for r in refs] == sorted(r.index for r in refs)
            coords = tree["arrays"].get(node.path.strip("/"), {}).get("chunk_coordinates")
            if coords is not None:
                assert [list(r.index) for r in refs] == coords, (sid, node.path)
            for ref in refs:
                seen[_chunk_key(meta, node.path, ref.index)] = ref
        assert set(seen) == set(expected), sid
        for key, ref in seen.items():
            if "chunk_type" in expected[key]:
                assert expected[key]["chunk_type"] == ref.kind.value, (sid, key)
            if "bytes_b64" not in expected[key]:
                # icechunk refuses a virtual chunk whose object no longer matches the stored checksum.
                assert "checksum" in expected[key]["error"], expected[key]
                assert ref.checksum_etag is not None or ref.checksum_last_modified is not None, (sid, key)
                continue
            assert _bytes_of(repo_dir, ref) == base64.b64decode(expected[key]["bytes_b64"]), (sid, key)
            checked[ref.kind] += 1
    assert all(checked.values()), checked


def test_zarr_json_of_every_node_is_what_icechunk_serves(both):
    repo, o = both
    for sid, tree in o["trees"].items():
        ours = {}
        for node in repo.snapshot(sid).nodes:
            key = "zarr.json" if node.path == "/" else node.path.strip("/") + "/zarr.json"
            ours[key] = json.loads(node.user_data)
        assert ours == {k: v["json"] for k, v in tree["metadata"].items()}, sid


def test_transaction_logs_are_icechunk_single_commit_diffs(both):
    """A child's transaction log, its node ids named by path, is what icechunk's diff(parent, child) says."""
    repo, o = both
    assert check_transaction_logs(o, repo) >= 5
