"""The Icechunk encoders: every file of the committed repositories (written by icechunk 1.1 and 2.3)
decoded, encoded again and decoded gives the same model (a manifest: the same bytes); and a copy of each repository with every
metadata file replaced by our encoding is a repository real icechunk answers about as about the original."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import numpy as np
import pytest

from toolkit.icechunk_answers import answers_without_file_details
from toolkit.oracle import oracle, repo_path, run_oracle, virtual_mapping
from zsarchive.icechunk.header import compressor, frame_form, parse_header, wrap_frame
from zsarchive.icechunk.manifest.decode import decode_manifest
from zsarchive.icechunk.manifest.encode import encode_manifest
from zsarchive.icechunk.manifest.refs import RefBatch
from zsarchive.icechunk.model import FileType
from zsarchive.icechunk.repo_info import decode_repo_info, encode_repo_info
from zsarchive.icechunk.snapshot import decode_snapshot, encode_snapshot
from zsarchive.icechunk.txlog import decode_transaction_log, encode_transaction_log
from zsarchive.icechunk.values import from_flexbuffer, from_msgpack, to_flexbuffer, to_msgpack

NAMES = ["v1", "v2", "v1-migrated"]


def files(name: str, kind: str) -> list[Path]:
    folder = repo_path(1, name) / kind
    return sorted(folder.iterdir()) if folder.is_dir() else []


def refs_of(manifest) -> list:
    return [(a.node_id, list(manifest.chunk_refs(a.node_id))) for a in manifest.arrays]


@pytest.mark.parametrize("name", NAMES)
def test_snapshots_round_trip(name):
    for path in files(name, "snapshots"):
        snap = decode_snapshot(path.read_bytes(), str(path))
        raw = encode_snapshot(snap, snap.header.spec_version, "ic-test")
        again = decode_snapshot(raw, "encoded")
        assert again.header.implementation == "ic-test" and again.header.spec_version == snap.header.spec_version
        assert dataclasses.replace(again, header=snap.header) == snap


def encoded_again(raw: bytes, name: str, refs=None) -> bytes:
    """A manifest file's refs (or ``refs``) encoded in the form its header and dictionary name."""
    manifest = decode_manifest(raw, name)
    return encode_manifest(
        manifest.id,
        refs_of(manifest) if refs is None else refs,
        manifest.header.spec_version,
        manifest.header.implementation,
        location_dictionary=manifest.location_dictionary,
    )


@pytest.mark.parametrize("name", NAMES)
def test_manifests_come_back_byte_for_byte(name):
    """Laid out and compressed as icechunk 1.1 (``ic-0.3.24``) and 2.3 lay them out: the same file,
    plain and compressed locations, inline, native and virtual refs, 0-d to 3-d arrays."""
    paths = files(name, "manifests")
    assert paths
    for path in paths:
        raw = path.read_bytes()
        assert encoded_again(raw, str(path)) == raw, path


@pytest.mark.parametrize("name", NAMES)
def test_transaction_logs_round_trip(name):
    for path in files(name, "transactions"):
        log = decode_transaction_log(path.read_bytes(), str(path))
        again = decode_transaction_log(encode_transaction_log(log, log.header.spec_version), "encoded")
        for node_id, coords in log.updated_coords.items():  # icechunk 1.1 wrote them unsorted: ours are sorted
            assert sorted(map(tuple, coords.tolist())) == list(map(tuple, again.updated_coords[node_id].tolist()))
        assert dataclasses.replace(again, header=log.header, updated_coords={}) == dataclasses.replace(
            log, updated_coords={}
        )


@pytest.mark.parametrize(
    "path",
    [repo_path(2) / "repo", repo_path(2, "v1-migrated") / "repo", *sorted((repo_path(2) / "overwritten").iterdir())],
    ids=lambda p: p.name,
)
def test_repo_info_round_trips(path):
    info = decode_repo_info(path.read_bytes(), str(path))
    assert decode_repo_info(encode_repo_info(info, info.header.implementation), "encoded") == info


@pytest.mark.parametrize(
    "value",
    [
        None,
        True,
        0,
        -1,
        2**63 - 1,
        2**64 - 1,
        1.5,
        "",
        "é🧊",
        [1, "a", None, [2.5, False]],
        {"zé": {"": [1, 2]}, "b": None, "a": 0},
    ],
)
def test_values_round_trip(value):
    assert from_flexbuffer(to_flexbuffer(value), "v") == value
    assert from_msgpack(to_msgpack(value), "v") == value


def _frame(payload: bytes, implementation: str = "ic-2.3.0") -> bytes:
    stream = compressor(frame_form(implementation), len(payload))
    return stream.compress(payload) + stream.flush()


def test_a_file_that_cannot_have_the_size_asked_keeps_its_own():
    payload = np.random.default_rng(1).integers(0, 256, 4096, dtype=np.uint8).tobytes()
    frame = _frame(payload)
    for size in (100, 39 + len(frame) + 1, 39 + len(frame) + 2):  # shorter, or too few bytes to add
        raw = wrap_frame(FileType.MANIFEST, 2, frame, len(payload), size=size)
        assert raw[39:] == frame
    raw = wrap_frame(FileType.MANIFEST, 2, _frame(bytes(64)), 64, size=200)
    assert len(raw) == 200 and parse_header(raw, "x").file_type is FileType.MANIFEST


@pytest.mark.parametrize("implementation", ["ic-2.3.0", "ic-0.3.24"])
@pytest.mark.parametrize("payload_size", [40, 200, 70_000, 3_000_000])
def test_a_file_padded_to_its_size_holds_the_payload_then_filler(payload_size, implementation):
    """A file made longer than its compressed payload (the size a snapshot names) is one zstd frame of
    the size it declares that libzstd decodes to the payload followed by filler, whatever the number of
    bytes added (in stored blocks of at most 128 KiB each where there is room for them; 3 bytes, an
    empty one, also where the frame's content size has a 1-byte field), with a content size or without
    (as icechunk 1.x frames its files)."""
    import zstandard

    from zsarchive.icechunk.header import HEADER_LENGTH, open_file

    rng = np.random.default_rng(payload_size)
    payload = rng.integers(0, 256, payload_size // 2, dtype=np.uint8).tobytes() + bytes(payload_size // 2)
    frame = _frame(payload, implementation)
    plain = HEADER_LENGTH + len(frame)
    for added in (3, 4, 9, 1000, (1 << 17) + 2, (1 << 17) + 3, (1 << 17) + 4, 300_000):
        raw = wrap_frame(FileType.MANIFEST, 2, frame, len(payload), implementation, size=plain + added)
        assert len(raw) == plain + added
        whole = zstandard.ZstdDecompressor().decompressobj().decompress(raw[HEADER_LENGTH:])
        assert whole[: len(payload)] == payload
        if added == 3 and implementation == "ic-2.3.0":  # an empty stored block, the content size in its field
            assert whole == payload
        declared = zstandard.frame_content_size(raw[HEADER_LENGTH:])
        assert declared == (len(whole) if implementation == "ic-2.3.0" else -1)  # icechunk 1.x declares none
        assert open_file(raw, "x", FileType.MANIFEST)[1] == whole


def reencode(source: Path, target: Path) -> None:
    """A copy of a repository with every metadata file replaced by our encoding of its model."""
    shutil.copytree(source, target)
    for path in (target / "snapshots").iterdir():
        snap = decode_snapshot(path.read_bytes(), str(path))
        path.write_bytes(encode_snapshot(snap, snap.header.spec_version))
    for path in (target / "manifests").iterdir():
        raw = path.read_bytes()
        path.write_bytes(encoded_again(raw, str(path)))
    for path in (target / "transactions").iterdir() if (target / "transactions").is_dir() else ():
        log = decode_transaction_log(path.read_bytes(), str(path))
        path.write_bytes(encode_transaction_log(log, log.header.spec_version))
    if (target / "repo").exists():
        (target / "repo").write_bytes(encode_repo_info(decode_repo_info((target / "repo").read_bytes(), "repo")))


@pytest.mark.parametrize("name", NAMES)
def test_real_icechunk_reads_what_we_write(name, request, tmp_path):
    version = 1 if name == "v1" else 2
    python = request.getfixturevalue(f"icechunk{version}_python")
    reencode(repo_path(version, name), tmp_path / "repo")
    ours = run_oracle(python, tmp_path / "repo", virtual_mapping())
    theirs = oracle(version, python, None if name == f"v{version}" else name)
    assert answers_without_file_details(ours) == answers_without_file_details(theirs)


def _batch(rng: np.random.Generator, n: int, layout: str) -> RefBatch:
    from zsarchive.icechunk.model import RefKind

    ndim = int(rng.integers(0, 4)) if layout != "mixed" else 2
    coords = (
        np.unique(rng.integers(0, 1 << 20, (n, max(ndim, 1))), axis=0)[:, :ndim] if ndim else np.zeros((1, 0), np.int64)
    )
    n = len(coords)
    kinds = {
        "native": [RefKind.NATIVE] * n,
        "virtual": [RefKind.VIRTUAL] * n,
        "mixed": [(RefKind.NATIVE, RefKind.VIRTUAL, RefKind.INLINE)[i % 3] for i in range(n)],
    }[layout]
    files = [f"s3://b/f{i}.nc" for i in range(7)] + ["", "é"]
    ids = ["0" * 20, "1" * 19 + "0", "ABCDEFGHJKMNPQRSTVW0"]
    modified = rng.integers(1, 1 << 32, n).tolist() if rng.random() < 0.5 else [None] * n
    plain = np.array([k is not RefKind.INLINE for k in kinds], np.uint64)  # inline refs: no range
    return RefBatch(
        coords,
        kinds,
        [b"in" * (i % 3) if k is RefKind.INLINE else None for i, k in enumerate(kinds)],
        [ids[i % 3] if k is RefKind.NATIVE else None for i, k in enumerate(kinds)],
        [files[int(rng.integers(0, len(files)))] if k is RefKind.VIRTUAL else None for k in kinds],
        rng.integers(0, 1 << 62, n).astype(np.uint64) * plain,
        rng.integers(0, 1 << 40, n).astype(np.uint64) * plain,
        [None] * n,
        [m if k is RefKind.VIRTUAL else None for m, k in zip(modified, kinds)],
    )


@pytest.mark.parametrize("seed", range(6))
def test_manifests_of_ref_columns_equal_those_of_refs(seed):
    """A manifest encoded from RefBatch columns (laid out column by column) has the bytes of the same
    refs encoded one by one, and decodes back to them."""
    rng = np.random.default_rng(seed)
    arrays = [
        ("ABC"[j] * 12 + "0", _batch(rng, int(rng.integers(1, 6000)), layout))
        for j, layout in enumerate(["virtual", "native", "mixed"][: 1 + seed % 3])
    ]
    manifest_id = "M" * 19 + "0"
    ours = encode_manifest(manifest_id, arrays, 2)
    assert ours == encode_manifest(manifest_id, [(node, list(batch.refs())) for node, batch in arrays], 2)
    decoded = decode_manifest(ours, "m")
    for node, batch in arrays:
        assert list(decoded.chunk_refs(node)) == list(batch.refs())
