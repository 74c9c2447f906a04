"""The committed Icechunk fixtures hold what fixtures.json claims, according to the real icechunk."""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
import uuid
from pathlib import Path

import pytest

from toolkit.oracle import ICECHUNK_TESTDATA, ROOT, fixtures, oracle, repo_path, run_oracle


@pytest.fixture(scope="module", params=[1, 2], ids=["v1", "v2"])
def version_and_oracle(request) -> tuple[int, dict]:
    """(version, icechunk's live answer) for each committed fixture repository."""
    python = request.getfixturevalue(f"icechunk{request.param}_python")
    return request.param, oracle(request.param, python)


def main_tree(answer: dict) -> dict:
    """The zarr tree icechunk reads at branch main."""
    return answer["trees"][answer["refs"]["branch:main"]]


def chunk_types(tree: dict, array: str) -> set[str]:
    """The chunk kinds icechunk reports for the chunk keys of ``array`` (0-d arrays: key ``<array>/c``)."""
    return {e["chunk_type"] for k, e in tree["chunks"].items() if k == array + "/c" or k.startswith(array + "/c/")}


def test_oracle_speaks_the_fixture_spec_version(version_and_oracle):
    version, answer = version_and_oracle
    facts = fixtures()[f"v{version}"]
    assert answer["spec_version"] == version == facts["spec_version"]
    assert answer["icechunk_version"] == facts["icechunk_version"]
    assert answer["icechunk_version"].startswith(f"{version}.")


def test_config_names_the_virtual_container(version_and_oracle):
    version, answer = version_and_oracle
    prefix = fixtures()["virtual"]["prefix"]
    containers = answer["config"]["virtual_chunk_containers"]
    assert list(containers) == [prefix]
    directory = prefix[len("file://") :].rstrip("/")
    assert containers[prefix]["store"] == {"kind": "LocalFileSystem", "options": directory}
    if version == 2:
        assert answer["config"]["num_updates_per_repo_info_file"] == 8
        assert answer["config"]["virtual_chunk_location_compression"]["min_num_chunks"] == 32


def test_branches_tags_and_history(version_and_oracle):
    version, answer = version_and_oracle
    facts = fixtures()[f"v{version}"]
    assert sorted(answer["branches"]) == facts["branches"]
    assert sorted(answer["tags"]) == facts["tags"]
    assert len(answer["branches"]) >= 3 and len(answer["tags"]) >= 2
    main = answer["ancestry"]["branch:main"]
    assert len(main) - 1 >= 10, "at least ten commits after the initial snapshot"
    assert main[-1]["message"] == "Repository initialized" and main[-1]["parent_id"] is None
    assert all(i["metadata"].get("author") == "fixture-bot" for i in main[:-1])
    messages = {c["message"] for c in facts["commits"]}
    assert {i["message"] for i in main[:-1]} <= messages
    for name, sid in answer["refs"].items():
        assert sid in answer["snapshots"], name


def test_deleted_tag_and_branch(version_and_oracle):
    version, answer = version_and_oracle
    facts = fixtures()[f"v{version}"]
    assert "doomed-tag" in facts["deleted_tags"]
    assert "doomed-tag" not in answer["tags"]
    assert "temp-branch" not in answer["branches"]
    if version == 1:
        assert (repo_path(1) / "refs" / "tag.doomed-tag" / "ref.json.deleted").is_file()
    else:
        assert answer["repo_info"]["deleted_tags"] == ["doomed-tag"]
        kinds = {(u["kind"], u["fields"].get("name")) for u in answer["ops_log"]}
        assert {("TagDeleted", "doomed-tag"), ("BranchDeleted", "temp-branch")} <= kinds


def test_reset_branch_left_unreachable_snapshots(version_and_oracle):
    version, answer = version_and_oracle
    reset = fixtures()[f"v{version}"]["reset"]
    assert answer["branches"]["scratch"] == reset["to"]
    assert reset["from"] in answer["snapshots"]
    assert answer["snapshots"][reset["from"]]["reachable"] is False
    if version == 2:
        resets = [u for u in answer["ops_log"] if u["kind"] == "BranchReset"]
        assert [u["fields"]["previous_snap_id"] for u in resets] == [reset["from"]]


def test_three_chunk_kinds_and_their_bytes(version_and_oracle):
    version, answer = version_and_oracle
    tree = main_tree(answer)
    assert chunk_types(tree, "data/temperature") == {"inline"}
    assert chunk_types(tree, "data/big") == {"native"}
    assert chunk_types(tree, "data/sub/virt") == {"virtual", "inline"}
    # icechunk refuses exactly the virtual chunks whose checksums fixtures.json says do not match.
    unreadable = fixtures()[f"v{version}"]["unreadable_chunks"]
    assert {k for k, e in tree["chunks"].items() if "error" in e} == set(unreadable)
    assert all("checksum" in tree["chunks"][k]["error"] for k in unreadable)
    # Virtual refs resolve to the committed external file: chunk 2 is int32 elements 100..124.
    virtual = fixtures()["virtual"]
    data = (ICECHUNK_TESTDATA / virtual["directory"] / virtual["file"]).read_bytes()
    assert base64.b64decode(tree["chunks"]["data/sub/virt/c/2"]["bytes_b64"]) == data[400:500]
    assert base64.b64decode(tree["chunks"]["data/sub/virt/c/3"]["bytes_b64"]) == data[1200:1300]
    granules = {f"{virtual['prefix']}granules/g{k}.bin" for k in range(8)}
    assert set(tree["virtual_chunk_locations"]) == {virtual["prefix"] + virtual["file"]} | granules
    assert (
        base64.b64decode(tree["chunks"]["data/sub/many_virt/c/9/0"]["bytes_b64"])
        == ((ICECHUNK_TESTDATA / virtual["directory"] / "granules" / "g1.bin").read_bytes()[8:16])
    )
    assert len(base64.b64decode(tree["chunks"]["data/big/c/0/0"]["bytes_b64"])) == 32 * 32 * 8
    assert (repo_path(version) / "chunks").is_dir()


def test_every_array_holds_the_chunk_kinds_fixtures_json_claims(version_and_oracle):
    version, answer = version_and_oracle
    for path, claim in fixtures()[f"v{version}"]["arrays"].items():
        sid = answer["refs"].get(claim["at"], claim["at"])
        tree = answer["trees"][sid]
        assert chunk_types(tree, path) == set(claim["chunk_kinds"]), path
        nodes = {n["path"]: n for n in tree["nodes"]}
        assert nodes[path]["kind"] == "array"
        assert nodes[path].get("dimension_names") == claim.get("dimension_names"), path
        if "shape" in claim:
            assert nodes[path]["shape"] == claim["shape"], path
        if claim.get("deleted_later"):
            assert all(path not in {n["path"] for n in answer["trees"][t]["nodes"]} for t in answer["refs"].values())
    kinds = set().union(*(c["chunk_kinds"] for c in fixtures()[f"v{version}"]["arrays"].values()))
    assert kinds == {"inline", "native", "virtual"}


def test_groups_attributes_dimension_names(version_and_oracle):
    version, answer = version_and_oracle
    facts = fixtures()[f"v{version}"]
    nodes = {n["path"]: n for n in main_tree(answer)["nodes"]}
    groups = {p for p, n in nodes.items() if n["kind"] == "group"}
    expected = set(facts["groups"])
    if version == 2:
        expected = expected - {"data/sub/deep"} | {"data/deep_moved"}
    assert groups == expected
    assert nodes[""]["attributes"]["nested"] == {"list": [1, 2.5, None, True, "é"], "empty": {}}
    assert nodes["data/temperature"]["dimension_names"] == ["y", "x"]
    assert nodes["data/temperature"]["shape"] == [6, 6]
    dotted = json.loads(base64.b64decode(main_tree(answer)["metadata"]["dotted/zarr.json"]["bytes_b64"]))
    assert dotted["chunk_key_encoding"]["configuration"]["separator"] == "."


def test_deleted_array(version_and_oracle):
    _, answer = version_and_oracle
    deleted = [d for d in answer["diffs"] if "/data/to_delete" in d["diff"]["deleted_arrays"]]
    assert deleted
    assert all("data/to_delete/zarr.json" not in answer["trees"][d["to"]]["keys"] for d in deleted)


def test_v2_only_history(icechunk2_python):
    answer = oracle(2, icechunk2_python)
    facts = fixtures()["v2"]
    kinds = [u["kind"] for u in answer["ops_log"]]
    for kind in (
        "RepoInitialized",
        "NewCommit",
        "CommitAmended",
        "BranchCreated",
        "BranchReset",
        "BranchDeleted",
        "TagCreated",
        "TagDeleted",
        "MetadataChanged",
        "RepoStatusChanged",
        "FeatureFlagChanged",
        "ConfigChanged",
        "NewDetachedSnapshot",
        "ExpirationRan",
        "GCRan",
    ):
        assert kind in kinds, kind
    assert facts["expired"] == [] and facts["gc_deleted"] == 0
    amended = [u for u in answer["ops_log"] if u["kind"] == "CommitAmended"]
    assert amended[0]["fields"]["previous_snap_id"] == facts["amend"]["replaced"]
    assert amended[0]["fields"]["new_snap_id"] == facts["amend"]["by"]
    assert answer["snapshots"][facts["amend"]["replaced"]]["reachable"] is False
    moved = [d for d in answer["diffs"] if d["diff"]["moved_nodes"]]
    assert sorted(moved[0]["diff"]["moved_nodes"]) == sorted([m["from"], m["to"]] for m in facts["moved_nodes"])
    # The moved array's chunks answer at the new path with the bytes they had at the old one.
    before = answer["trees"][facts["arrays"]["data/c/t"]["at"]]["chunks"]
    after = main_tree(answer)["chunks"]
    assert after["data/c/t_moved/c/1"]["bytes_b64"] == before["data/c/t/c/1"]["bytes_b64"]
    assert "data/c/t/c/1" not in after
    assert answer["metadata"] == {"project": "zsarchive", "fixture": True, "owners": ["a", "b"], "revision": 2}
    # The ops log outgrew one repo info file: the rest is reached through overwritten/.
    assert answer["repo_info"]["repo_before_updates"]
    assert len(answer["repo_info"]["latest_updates"]) < len(answer["ops_log"])
    assert answer["tags"]["detached-tag"] == facts["detached_snapshot"]
    assert set(answer["manifests"]) and set(answer["transaction_logs"]) == set(answer["snapshots"])
    compressed = [m for m in answer["manifests"].values() if m["compression"]["uses_location_compression"]]
    assert compressed and all(m["total_virtual"] == 64 for m in compressed)
    assert facts["location_compressed_arrays"] == ["data/sub/many_virt"]


def test_v1_migrated_by_icechunk_2(icechunk1_python, icechunk2_python):
    facts = fixtures()["v1-migrated"]
    migrated = oracle(2, icechunk2_python, "v1-migrated")
    original = oracle(1, icechunk1_python)
    assert migrated["spec_version"] == facts["spec_version"] == 2
    assert [u["kind"] for u in migrated["ops_log"]][0] == "RepoMigrated"
    assert migrated["branches"] == original["branches"] and migrated["tags"] == original["tags"]
    assert [i["id"] for i in migrated["ancestry"]["branch:main"]] == [
        i["id"] for i in original["ancestry"]["branch:main"]
    ]
    main = original["refs"]["branch:main"]
    assert migrated["trees"][main]["chunks"] == original["trees"][main]["chunks"]
    assert facts["v1_files_left"] == []


def test_v1_skips_are_recorded(icechunk1_python):
    answer = oracle(1, icechunk1_python)
    skipped = fixtures()["v1"]["skipped"]
    assert {"amend", "move", "repo metadata", "ops log"} <= set(skipped)
    assert "ops_log" not in answer and "repo_info" not in answer


def test_testdata_is_small():
    total = sum(f.stat().st_size for f in ICECHUNK_TESTDATA.rglob("*") if f.is_file())
    assert total < 2_000_000


@pytest.mark.parametrize("version", [1, 2])
def test_generator_reproduces_the_committed_history(version, request, tmp_path):
    """The script regenerates a repository with the same refs, commits and store keys."""
    python = request.getfixturevalue(f"icechunk{version}_python")
    # A private virtual prefix, so the shared /tmp link the committed fixtures use is untouched.
    link_root = Path("/tmp") / f"zsarchive-fixture-test-{uuid.uuid4().hex}"
    prefix = f"file://{link_root}/virtual-data/"
    try:
        subprocess.run(
            [
                str(python),
                str(ROOT / "scripts" / "make_icechunk_fixtures.py"),
                "--out",
                str(tmp_path),
                "--virtual-prefix",
                prefix,
            ],
            check=True,
            capture_output=True,
            timeout=300,
        )
        fresh = run_oracle(python, tmp_path / f"v{version}", {prefix: tmp_path / "virtual-data"})
    finally:
        shutil.rmtree(link_root, ignore_errors=True)
    committed = oracle(version, python)
    assert sorted(fresh["branches"]) == sorted(committed["branches"])
    assert sorted(fresh["tags"]) == sorted(committed["tags"])
    for ref in fresh["ancestry"]:
        assert [i["message"] for i in fresh["ancestry"][ref]] == [i["message"] for i in committed["ancestry"][ref]]
    assert main_tree(fresh)["keys"] == main_tree(committed)["keys"]
    assert main_tree(fresh)["chunks"].keys() == main_tree(committed)["chunks"].keys()
    for key, entry in main_tree(fresh)["chunks"].items():
        theirs = main_tree(committed)["chunks"][key]
        assert (entry.get("bytes_b64"), "error" in entry) == (theirs.get("bytes_b64"), "error" in theirs), key
