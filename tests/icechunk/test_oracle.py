"""zsarchive.icechunk against the LIVE icechunk (1.1 for spec V1, 2.x for V2) on the committed fixtures."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from toolkit.agreement import assert_superset, check_reader, check_transaction_logs, chunk_key, same_time
from toolkit.oracle import fixtures, oracle, repo_path
from zsarchive.cli import main
from zsarchive.icechunk import Repository, RefKind


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


def test_reader_answers_as_icechunk(both):
    """Spec version, refs, every history, snapshot, manifest and transaction log as ``zs icechunk
    inspect`` shows them (agreement.check_reader), and the fixture's facts."""
    repo, o = both
    facts = fixtures()[f"v{o['spec_version']}"]
    check_reader(o, repo, facts["deleted_tags"])
    assert list(repo.branches()) == sorted(o["branches"])
    assert sorted(repo.tags()) == sorted(facts["tags"]) and not set(repo.tags()) & set(repo.deleted_tags())


def test_repo_status_is_icechunks(o2):
    """What icechunk's inspect leaves out but its other calls say."""
    status = Repository.open(str(repo_path(2))).status()
    assert status.availability == o2["status"]["availability"]
    assert same_time(status.set_at, o2["status"]["set_at"])
    assert status.limited_availability_reason == o2["status"]["limited_availability_reason"]


def test_moved_nodes_are_in_transaction_logs(o2):
    """Every move icechunk's transaction logs hold is in ours, in the same log, and its node is found
    where it moved to."""
    repo = Repository.open(str(repo_path(2)))
    theirs = {
        sid: [(m["from"], m["to"]) for m in log["moved_nodes"]]
        for sid, log in o2["transaction_logs"].items()
        if "error" not in log
    }
    ours = {sid: [(m.from_path, m.to_path) for m in repo.transaction_log(sid).moved_nodes] for sid in theirs}
    assert ours == theirs
    moved = fixtures()["v2"]["moved"]
    moved = [moved] if isinstance(moved, dict) else moved
    every = [move for moves in ours.values() for move in moves]
    assert len(every) >= 2 and all((m["from"], m["to"]) in every for m in moved), every
    for sid in theirs:
        for move in repo.transaction_log(sid).moved_nodes:
            node = repo.node(sid, move.to_path)
            assert (node.id, node.node_type) == (move.node_id, move.node_type), (sid, move)


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
        fields["status"] = {
            "availability": s.availability,
            "limited_availability_reason": s.limited_availability_reason,
            "set_at": s.set_at,
        }
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


def _bytes_of(repo_dir: Path, ref) -> bytes:
    if ref.kind is RefKind.INLINE:
        return ref.inline
    if ref.kind is RefKind.NATIVE:
        data = (repo_dir / "chunks" / ref.chunk_id).read_bytes()
    else:
        virtual = fixtures()["virtual"]
        assert ref.location.startswith(virtual["prefix"]), ref.location
        target = repo_dir.parent / virtual["directory"] / ref.location[len(virtual["prefix"]) :]
        data = target.read_bytes()
    return data[ref.offset : ref.offset + ref.length]


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
                seen[chunk_key(meta, node.path, ref.index)] = ref
        assert set(seen) == set(expected), sid
        for key, ref in seen.items():
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
