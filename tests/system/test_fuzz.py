"""Fuzzing with hypothesis: real files with a few bytes changed, cut or inserted must decode or fail with a
zsarchive error — never another exception, a hang or runaway memory.

Targets: the Icechunk file decoders (repo info, snapshot, manifest with every ref, transaction log;
mutated inside the decompressed FlatBuffer, which is re-wrapped uncompressed, so that mutations reach
the parsers rather than the zstd checksum), the ZS reader and validator (mutated files), and the
archive record decoders (mutated records of a real export, written back as a valid ZS file).

CI runs a short pass; ``ZSARCHIVE_FUZZ_EXAMPLES=20000 pytest tests/system/test_fuzz.py`` runs a long one.
A failure found is kept as an ``@example`` of its target.
"""

from __future__ import annotations

import io
import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from toolkit.icechunk_files import unpack
from zsarchive.archive import RepoArchive, export
from zsarchive.errors import ZSError
from zsarchive.icechunk.manifest import decode_manifest
from zsarchive.icechunk.repo_info import decode_repo_info
from zsarchive.icechunk.snapshot import decode_snapshot
from zsarchive.icechunk.txlog import decode_transaction_log
from zsarchive.zs.reader import ZS
from zsarchive.zs.validate import validate
from zsarchive.zs.writer import ZSWriter
from toolkit.places import ROOT

REPO = ROOT / "testdata" / "icechunk" / "v2"
EXAMPLES = int(os.environ.get("ZSARCHIVE_FUZZ_EXAMPLES", "40"))
FUZZ = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck), database=None)


def mutated(raw: bytes, data: st.DataObject) -> bytes:
    """``raw`` with up to 8 bytes overwritten, then perhaps a cut or an inserted run."""
    out = bytearray(raw)
    for _ in range(data.draw(st.integers(1, 8))):
        if out:
            out[data.draw(st.integers(0, len(out) - 1))] = data.draw(st.integers(0, 255))
    action = data.draw(st.sampled_from(["none", "cut", "insert"]))
    if action == "cut" and out:
        del out[data.draw(st.integers(0, len(out) - 1)) :]
    elif action == "insert":
        at = data.draw(st.integers(0, len(out)))
        out[at:at] = data.draw(st.binary(min_size=1, max_size=16))
    return bytes(out)


def uncompressed(path: Path) -> bytes:
    """An Icechunk file re-wrapped with its payload stored plainly (compression byte 0)."""
    header, payload = unpack(path.read_bytes())
    return header[:-1] + b"\x00" + payload


def _consume_manifest(raw: bytes, name: str) -> None:
    manifest = decode_manifest(raw, name)
    for node_id in list(manifest.arrays):
        for _ in manifest.chunk_refs(node_id):
            pass


DECODERS = {
    "repo": (lambda: [REPO / "repo"], decode_repo_info),
    "snapshot": (lambda: sorted((REPO / "snapshots").iterdir()), decode_snapshot),
    "manifest": (lambda: sorted((REPO / "manifests").iterdir()), _consume_manifest),
    "transaction log": (lambda: sorted((REPO / "transactions").iterdir()), decode_transaction_log),
}


@pytest.mark.parametrize("kind", list(DECODERS))
def test_icechunk_decoders_survive_mutation(kind):
    files, decode = DECODERS[kind]
    seeds = [uncompressed(path) for path in files()]

    @FUZZ
    @given(st.data())
    def run(data):
        raw = mutated(data.draw(st.sampled_from(seeds)), data)
        try:
            decode(raw, f"fuzzed {kind}")
        except ZSError:
            pass

    run()


@pytest.fixture(scope="module")
def zs_bytes(tmp_path_factory) -> bytes:
    path = tmp_path_factory.mktemp("zs") / "small.zs"
    with ZSWriter(
        str(path), {"made": "for fuzzing"}, codec="none", approx_block_size=200, branching_factor=4
    ) as writer:
        writer.add_records([b"%05d record" % i for i in range(300)])
        writer.finish()
    return path.read_bytes()


def test_zs_reader_and_validator_survive_mutation(zs_bytes):
    @FUZZ
    @given(st.data())
    def run(data):
        raw = mutated(zs_bytes, data)
        try:
            validate(io.BytesIO(raw), parallelism=1)
        except ZSError:
            pass
        try:
            with ZS(path=io.BytesIO(raw), parallelism=0) as z:
                for _ in z:
                    pass
        except ZSError:
            pass

    run()


@pytest.fixture(scope="module")
def archive_records(tmp_path_factory) -> tuple[list[bytes], dict]:
    path = tmp_path_factory.mktemp("archive") / "v2.zs"
    export(REPO, path, export_time=1, codec="none")
    with ZS(str(path)) as z:
        return list(z), z.metadata


def test_archive_record_decoders_survive_mutation(archive_records, tmp_path_factory):
    records, metadata = archive_records
    work = tmp_path_factory.mktemp("fuzzed")

    @FUZZ
    @given(st.data())
    def run(data):
        changed = list(records)
        for _ in range(data.draw(st.integers(1, 3))):
            i = data.draw(st.integers(0, len(changed) - 1))
            changed[i] = mutated(changed[i], data)
        path = work / "fuzzed.zs"
        path.unlink(missing_ok=True)
        with ZSWriter(str(path), metadata, codec="none") as writer:
            writer.add_records(sorted(set(changed)))
            writer.finish()
        try:
            with RepoArchive(path) as arc:
                for ref in arc.refs():
                    name = ref.get("snapshot_id")
                    if name is None:
                        continue
                    arc.ancestry(f"snapshot:{name}")
                    for node in arc.ls(f"snapshot:{name}"):
                        if node["node_type"] == "array":
                            for _ in arc.chunk_refs(f"snapshot:{name}", node["path"]):
                                pass
                arc.log()
                arc.ops_log()
                arc.repo_facts()
        except ZSError:
            pass

    run()
