"""Every archive format version keeps reading: each committed test-vector archive (testdata/archive/v<N>:
format 1, chunk refs per manifest; format 2, a per-chunk timeline; format 3, format 2 with chunk bytes
in pieces; format 5, format 3 whose per-chunk history is the timeline) passes ``zs validate``, answers every query as the real icechunk does about the repository
it was exported from, reads the same through the decoder written from docs/archive-format.rst alone,
and answers exactly as every other version."""

from __future__ import annotations

import base64
import json

import pytest

from toolkit.agreement import check_archive, every_ref
from toolkit.places import ROOT, TESTDATA
from toolkit.oracle import fixtures, oracle
from toolkit.archive_format import documented_history, documented_records
from toolkit.cli import run_zs
from zsarchive.archive import RepoArchive
from zsarchive.archive.format import schema as S
from zsarchive.errors import ZSError

ARCHIVES = {int(path.parent.name[1:]): path for path in sorted((TESTDATA / "archive").glob("v*/archive.zs"))}
SOURCES = {
    version: ROOT / json.loads((path.parent / "records.json").read_text())["source"]
    for version, path in ARCHIVES.items()
}


def test_every_format_version_has_a_vector():
    """A vector for every version from 1 to the current full format (fragments, format 4, are written
    only by incremental export and have no committed vector)."""
    assert sorted(ARCHIVES) == [v for v in range(1, S.FORMAT_VERSION + 1) if v != S.FRAGMENT_FORMAT]
    assert all(source == TESTDATA / "icechunk" / "v2" for source in SOURCES.values())


@pytest.mark.parametrize("version", sorted(ARCHIVES))
def test_committed_archive_validates(version):
    done = run_zs("validate", str(ARCHIVES[version]))
    assert (done.returncode, done.stdout, done.stderr) == (0, "looks good!\n", "")


@pytest.mark.parametrize("version", sorted(ARCHIVES))
def test_committed_archive_answers_as_icechunk(version, icechunk2_python):
    answers = oracle(2, icechunk2_python)
    with RepoArchive(ARCHIVES[version]) as archive:
        assert archive.format_version == version and archive.header()["format_version"] == version
    check_archive(
        answers,
        ARCHIVES[version],
        SOURCES[version],
        fixtures()["v2"]["deleted_tags"],
        [fixtures()["virtual"]["prefix"]],
    )


@pytest.mark.parametrize("version", sorted(ARCHIVES))
def test_the_documented_decoding_answers_as_icechunk(version, icechunk2_python):
    """Refs and every snapshot's nodes (id, type, zarr.json), decoded with no zsarchive code."""
    answers = oracle(2, icechunk2_python)
    records = documented_records(ARCHIVES[version])
    refs = {tuple(r["key"]): r["value"][0] for r in records if r["family"] == "B"}
    assert {name: sid for (kind, name), sid in refs.items() if kind == "branch"} == answers["branches"]
    assert {name: sid for (kind, name), sid in refs.items() if kind == "tag"} == answers["tags"]
    assert sorted(name for (kind, name) in refs if kind == "deleted_tag") == sorted(fixtures()["v2"]["deleted_tags"])
    nodes: dict[str, list] = {}
    for r in records:
        if r["family"] == "N":
            sid, path = r["key"]
            node_id, node_type, user_data = r["value"][:3]
            nodes.setdefault(sid, []).append(
                ("/" + "/".join(path), ["group", "array"][node_type], node_id, bytes.fromhex(user_data["bytes"]))
            )
    trees = {sid: tree for sid, tree in answers["trees"].items() if "error" not in tree}
    snapshots = {r["key"][0] for r in records if r["family"] == "S"}
    assert trees and set(trees) <= snapshots and set(nodes) <= snapshots
    for sid, tree in trees.items():
        assert sorted(n[:3] for n in nodes.get(sid, [])) == sorted(
            (n["path"], n["node_type"], n["id"]) for n in answers["snapshots"][sid]["nodes"]
        ), sid
        for path, _, _, user_data in nodes.get(sid, []):
            key = (path.strip("/") + "/zarr.json").lstrip("/")
            assert user_data.hex() == _b64hex(tree["metadata"][key]["bytes_b64"]), (sid, key)


def test_the_documented_chunk_history_is_the_same_in_every_format():
    """Format 5 keeps the per-chunk history as the chunk ref timeline corrected by ``H`` exceptions;
    decoded as the document says, it is the history format 2 and 3 keep one ``H`` record per change."""
    histories = {v: documented_history(documented_records(ARCHIVES[v]), v) for v in ARCHIVES if v >= 2}
    assert histories[2] and all(history == histories[2] for history in histories.values())


def _b64hex(text: str) -> str:
    return base64.b64decode(text).hex()


def _answers(archive: RepoArchive, refs: list[str]) -> dict:
    out = {}
    for ref in refs:
        for node in archive.ls(ref):
            if node["node_type"] != "array":
                continue
            refs_here = [{k: v for k, v in c.items()} for c in archive.chunk_refs(ref, node["path"])]
            out[(ref, node["path"])] = refs_here
            for chunk in refs_here:
                out[(ref, node["path"], tuple(chunk["coords"]))] = archive.chunk_ref(ref, node["path"], chunk["coords"])
                out[(ref, node["path"], tuple(chunk["coords"]), "log")] = archive.chunk_history(
                    node["path"], chunk["coords"], ref
                )
            out[(ref, node["path"], "coords")] = list(archive.node_chunk_coords(node))
    return out


def _diff(archive: RepoArchive, a: str, b: str):
    try:
        return archive.diff(a, b)
    except ZSError as exc:  # a refusal (e.g. refs with no common history) must be the same refusal
        return ("refused", type(exc).__name__, str(exc).replace(archive.name, "ARCHIVE"))


@pytest.mark.parametrize("version", sorted(set(ARCHIVES) - {S.FORMAT_VERSION}))
def test_every_format_answers_as_the_current_one(version, icechunk2_python):
    refs = sorted(every_ref(oracle(2, icechunk2_python)))
    with RepoArchive(ARCHIVES[version]) as old, RepoArchive(ARCHIVES[S.FORMAT_VERSION]) as new:
        assert _answers(old, refs) == _answers(new, refs)
        assert [_diff(old, a, b) for a in refs for b in refs] == [_diff(new, a, b) for a in refs for b in refs]
