"""Every archive format version keeps reading: the committed test-vector archives (format 1, chunk
refs per manifest; format 2, a per-chunk timeline) answer every query as the real icechunk does
about the repository they were exported from, and exactly as each other."""

from __future__ import annotations

import json

import pytest

from agreement import check_archive, every_ref
from conftest import ROOT, TESTDATA
from oracle import fixtures, oracle
from zsarchive.archive import RepoArchive

ARCHIVES = {version: TESTDATA / "archive" / f"v{version}" / "archive.zs" for version in (1, 2)}
SOURCE = ROOT / json.loads((TESTDATA / "archive" / "v1" / "records.json").read_text())["source"]


@pytest.mark.parametrize("version", sorted(ARCHIVES))
def test_committed_archive_answers_as_icechunk(version, icechunk2_python):
    answers = oracle(2, icechunk2_python)
    with RepoArchive(ARCHIVES[version]) as archive:
        assert archive.format_version == version and archive.header()["format_version"] == version
    check_archive(answers, ARCHIVES[version], SOURCE, fixtures()["v2"]["deleted_tags"],
                  [fixtures()["virtual"]["prefix"]])


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
                    node["path"], chunk["coords"], ref)
            out[(ref, node["path"], "coords")] = list(archive.node_chunk_coords(node))
    return out


def test_both_formats_answer_alike(icechunk2_python):
    refs = sorted(every_ref(oracle(2, icechunk2_python)))
    with RepoArchive(ARCHIVES[1]) as old, RepoArchive(ARCHIVES[2]) as new:
        assert _answers(old, refs) == _answers(new, refs)
        for a in refs:
            for b in refs:
                try:
                    expected = old.diff(a, b)
                except Exception as exc:  # noqa: BLE001 - the same refusal is expected of both
                    with pytest.raises(type(exc)):
                        new.diff(a, b)
                    continue
                assert new.diff(a, b) == expected
