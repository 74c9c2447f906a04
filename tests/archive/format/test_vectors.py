"""The archive test vectors (testdata/archive/v<N>/): a committed archive and its records decoded as
documented JSON. Our reader must decode each archive to its JSON; an independent decoder written
here from docs/archive-format.rst alone (over docs/unzs.py, no zsarchive code) must too; our
record encoder must rebuild every record's bytes; and today's exporter must write the current
format's vector byte for byte."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from toolkit.oracle import fixtures
from toolkit.places import ROOT, TESTDATA, load_module
from toolkit.archive_format import (
    documented_file_forms,
    documented_ops_log_files,
    documented_record,
    documented_repo_file,
    documented_virtual_bytes,
    unzs_records,
)
from zsarchive.archive import export
from zsarchive.archive.format import schema as S
from zsarchive.zs.reader import ZS

link_virtual_prefix = load_module(ROOT / "scripts" / "icechunk_oracle.py").link_virtual_prefix

VECTORS = sorted((TESTDATA / "archive").glob("v*/records.json"))


def _vector(path: Path) -> dict:
    return json.loads(path.read_text())


def _json_element(item):
    if isinstance(item, bytes):
        return {"bytes": item.hex()}
    if isinstance(item, tuple):
        return [_json_element(i) for i in item]
    return item


def _python_element(item):
    if isinstance(item, dict):
        return bytes.fromhex(item["bytes"])
    if isinstance(item, list):
        return tuple(_python_element(i) for i in item)
    return item


@pytest.mark.parametrize("vector", VECTORS, ids=lambda p: p.parent.name)
def test_our_reader_decodes_the_archive_to_its_json(vector):
    expected = _vector(vector)
    with ZS(str(vector.parent / "archive.zs")) as z:
        assert z.metadata == expected["metadata"]
        got = []
        for rec in z:
            family, key, value = S.split(rec)
            got.append(
                {
                    "family": family.decode(),
                    "hex": rec.hex(),
                    "key": _json_element(key),
                    "version": S.record_version(rec),
                    "value": _json_element(value),
                }
            )
    assert got == expected["records"]


@pytest.mark.parametrize("vector", VECTORS, ids=lambda p: p.parent.name)
def test_the_format_document_alone_derives_the_same_json(vector):
    expected = _vector(vector)
    metadata, records = unzs_records(vector.parent / "archive.zs")
    assert metadata == expected["metadata"]
    assert [documented_record(r) for r in records] == expected["records"]
    header = [r for r in expected["records"] if r["family"] == "Z"]
    assert len(header) == 1 and header[0]["value"][0] == metadata["icechunk-archive"]["format_version"]
    assert header[0]["value"][2] == expected["export_time"]


@pytest.mark.parametrize("vector", VECTORS, ids=lambda p: p.parent.name)
def test_our_encoder_rebuilds_every_record(vector):
    for rec in _vector(vector)["records"]:
        family = rec["family"].encode()
        built = S.record(family, _python_element(rec["key"]), _python_element(rec["value"]), rec["version"])
        assert built.hex() == rec["hex"], rec


@pytest.mark.parametrize("version", [S.FULL_FORMAT, S.VIRTUAL_FORMAT])
def test_the_exporter_writes_the_current_vectors(tmp_path, version):
    """Today's exporter writes the format 6 vector byte for byte without ``include_virtual`` (an export that
    keeps no virtual bytes is as it was), and the format 7 vector with it."""
    current = TESTDATA / "archive" / f"v{version}"
    expected = _vector(current / "records.json")
    authorize = [_linked_virtual_prefix()] if expected.get("include_virtual") else []
    export(
        ROOT / expected["source"],
        tmp_path / "a.zs",
        export_time=expected["export_time"],
        include_chunks=expected.get("include_chunks", False),
        include_virtual=expected.get("include_virtual", False),
        authorize=authorize,
    )
    assert (tmp_path / "a.zs").read_bytes() == (current / "archive.zs").read_bytes()


def _linked_virtual_prefix() -> str:
    virtual = fixtures()["virtual"]
    link_virtual_prefix(virtual["prefix"], TESTDATA / "icechunk" / virtual["directory"])
    return virtual["prefix"]


def test_the_format_7_vector_keeps_the_fixture_s_virtual_bytes_as_its_refs_pin_them():
    """Read by the document alone, the v7 vector keeps, for every virtual ref of the fixture whose file
    still is the version its checksum pins, exactly that file's bytes of the ref's range; the refs whose
    checksum the committed file fails (an ETag it never had, a time before the file was written) are not
    kept; every kept range is one a ref names."""
    vector = _vector(TESTDATA / "archive" / "v7" / "records.json")
    assert vector["include_virtual"] and vector["authorize"] == [fixtures()["virtual"]["prefix"]]
    kept = documented_virtual_bytes(vector["records"])
    refs = {tuple(r["value"][1:6]) for r in vector["records"] if r["family"] == "C" and r["value"][0] == 2}
    prefix = fixtures()["virtual"]["prefix"]
    directory = TESTDATA / "icechunk" / fixtures()["virtual"]["directory"]
    refused = {ref for ref in refs if ref[3] == "fixture-etag" or ref[4] == 946684800}
    assert len(refused) == 2 and set(kept) == refs - refused
    for (location, offset, length, _, _), data in kept.items():
        assert location.startswith(prefix)
        assert data == (directory / location[len(prefix) :]).read_bytes()[offset : offset + length]


def test_the_format_6_vector_says_how_each_file_of_the_fixture_was_written():
    """What the v6 vector's ``Y`` records and ``G repo_file`` say, read by the document alone, is what the
    fixture's files hold: each header's implementation name (bytes 12 to 35), each V2 manifest's
    location compression and dictionary, and the repo info files the ops log continues in."""
    from zsarchive.icechunk.manifest import decode_manifest

    records = _vector(TESTDATA / "archive" / "v6" / "records.json")["records"]
    source = ROOT / "testdata" / "icechunk" / "v2"
    forms = documented_file_forms(records)
    assert {p.split("/")[0] for p in forms} == {"snapshots", "manifests", "transactions"}
    assert (source / "repo").read_bytes()[12:36].decode().rstrip(" ") == documented_repo_file(records)["implementation"]
    for path, (implementation, algorithm, dictionary) in forms.items():
        raw = (source / path).read_bytes()
        assert raw[12:36].decode().rstrip(" ") == implementation
        if path.startswith("manifests/"):
            manifest = decode_manifest(raw, path)
            assert (algorithm, dictionary) == (manifest.compression_algorithm, manifest.location_dictionary)
        else:
            assert (algorithm, dictionary) == (None, None)
    assert any(dictionary for _, _, dictionary in forms.values())
    files = documented_ops_log_files(records)
    assert len(files) > 1 and all((source / path).is_file() for path, _ in files)
