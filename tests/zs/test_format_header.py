"""zsarchive.zs.format.header: the one decoder of the file header that reader and validator share.
Field offsets are checked against the reference implementation's own reading of its files."""

from __future__ import annotations

import json
import struct
import subprocess

import pytest
from hypothesis import given
from hypothesis import strategies as st

from toolkit.places import TESTDATA
from toolkit.zsheader import with_header_field
from zsarchive.errors import ZSCorrupt
from zsarchive.zs.format import header as h

INTEROP = sorted((TESTDATA / "interop").glob("*.zs"))

metadata = st.dictionaries(st.text(max_size=8), st.one_of(st.integers(), st.text(max_size=8), st.none()), max_size=4)


def file_bytes(hdr: h.Header, blocks: bytes = b"\x00" * 40) -> bytes:
    """A file of ``hdr`` (root extent and total length filled in) followed by ``blocks``."""
    start = len(h.MAGIC) + len(hdr.encode())
    hdr = hdr._replace(root_index_offset=start, root_index_length=len(blocks), total_file_length=start + len(blocks))
    return h.MAGIC + hdr.encode() + blocks


@given(
    metadata,
    st.sampled_from(["none", "deflate", "lzma2;dsize=2^20", "zstd"]),
    st.binary(min_size=32, max_size=32),
    st.binary(max_size=20),
)
def test_round_trip(meta, codec, sha, extensions):
    data = file_bytes(h.Header(0, 0, 0, sha, codec, meta, extensions))
    hdr, end = h.parse(data, len(data), "f.zs")
    assert (hdr.codec, hdr.metadata, hdr.data_sha256, hdr.extensions) == (codec, meta, sha, extensions)
    assert end == hdr.root_index_offset == len(data) - 40 == h.header_end(data[:16], len(data), "f.zs")


@pytest.mark.parametrize("path", INTEROP, ids=[p.name for p in INTEROP])
def test_fields_are_where_the_reference_reads_them(path, reference_python):
    script = (
        "import json, sys, zs\nz = zs.ZS(sys.argv[1])\nprint(json.dumps([z.root_index_offset, "
        "z.root_index_length, z.codec, z.metadata, z.data_sha256.hex()]))"
    )
    out = subprocess.run(
        [str(reference_python), "-c", script, str(path)], check=True, capture_output=True, text=True
    ).stdout
    root_offset, root_length, codec, meta, sha = json.loads(out)
    data = path.read_bytes()
    hdr, _ = h.parse(data, len(data), path.name)
    assert (hdr.root_index_offset, hdr.root_index_length, hdr.codec, hdr.metadata, hdr.data_sha256.hex()) == (
        root_offset,
        root_length,
        codec,
        meta,
        sha,
    )
    assert data[h.CODEC_AT : h.CODEC_AT + 16].rstrip(b"\0").decode() == codec
    assert struct.unpack_from("<Q", data, h.TOTAL_LENGTH_AT)[0] == len(data)


def test_every_truncation_is_one_error_naming_an_offset():
    data = (TESTDATA / "interop" / "letters-none.zs").read_bytes()
    _, end = h.parse(data, len(data), "x")
    for n in range(end + 1):
        with pytest.raises(ZSCorrupt, match=r"^x: offset \d+: "):
            h.parse(data[:n], n, "x")  # a file of n bytes
    for n in range(end):
        with pytest.raises(ZSCorrupt, match=r"^x: offset \d+: "):
            h.parse(data[:n], len(data), "x")  # the caller read too little of a longer file


GOOD = file_bytes(h.Header(0, 0, 0, b"\0" * 32, "deflate", {"a": 1}))


@pytest.mark.parametrize(
    "data, message",
    [
        (with_header_field(GOOD, h.HEADER_LENGTH_AT, struct.pack("<Q", 2**64 - 1)), "offset 8: header length"),
        (GOOD[:8] + struct.pack("<Q", 10) + GOOD[16:], "offset 8: header length 10 is shorter"),
        (with_header_field(GOOD, h.METADATA_LENGTH_AT, struct.pack("<Q", 2**64 - 1)), "offset 88: metadata length"),
        (with_header_field(GOOD, h.ROOT_OFFSET_AT, struct.pack("<Q", 2**64 - 1)), "offset 16: root index block"),
        (with_header_field(GOOD, h.ROOT_LENGTH_AT, struct.pack("<Q", 2**64 - 1)), "offset 16: root index block"),
        (with_header_field(GOOD, h.ROOT_LENGTH_AT, struct.pack("<Q", 9)), "offset 16: root index block (9 bytes"),
        (with_header_field(GOOD, h.TOTAL_LENGTH_AT, struct.pack("<Q", 2**64 - 1)), "offset 32: header says the file"),
        (with_header_field(GOOD, h.CODEC_AT, b"lzma\xff".ljust(16, b"\0")), "offset 72: codec field is not ASCII"),
        (with_header_field(GOOD, h.CODEC_AT, b"bz2".ljust(16, b"\0")), "offset 72: unknown codec 'bz2'"),
        (with_header_field(GOOD, h.METADATA_AT, b"["), "offset 96: metadata is not UTF-8 JSON"),
        (h.PARTIAL_MAGIC + GOOD[8:], "offset 0: ZStoBe magic"),
        (GOOD[:20] + bytes([GOOD[20] ^ 1]) + GOOD[21:], "header CRC mismatch"),
    ],
)
def test_each_bad_field_is_named_by_its_offset(data, message):
    with pytest.raises(ZSCorrupt) as info:
        h.parse(data, len(data), "f.zs")
    assert str(info.value).startswith("f.zs: ") and message in str(info.value)


def test_a_codec_name_longer_than_its_field_cannot_be_written():
    with pytest.raises(ValueError, match="longer than 16 bytes"):
        h.Header(0, 0, 0, b"\0" * 32, "x" * 17, {}).encode()
