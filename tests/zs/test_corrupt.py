"""The corruption suite: generated broken files must all be rejected with ZSCorrupt, at the right offset.

Good files come from the reference ``zs make`` and from our ZSWriter;
bit flips and truncations are applied to every position; semantic corruptions are
built with recomputed CRCs (tests/zsfiles.FileBuilder) so that exactly one invariant
breaks, and the reference validator must reject each of them too.
"""

from __future__ import annotations

import hashlib
import io
import re
from concurrent.futures import ThreadPoolExecutor

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import zsarchive
from toolkit.cli import one_line_error, run_zs
from toolkit.zsheader import with_header_field
from zsarchive import ZSCorrupt
from zsarchive.zs.format import uleb128
from zsarchive.zs.format.block import encode_block, encode_index, encode_records
from zsarchive.zs.format.crc64 import crc64
from zsarchive.zs.format.header import PARTIAL_MAGIC
from zsarchive.zs.validate import validate
from toolkit.zsfiles import FileBuilder, minimal, reference_make, reference_verdicts

RECORDS = sorted([b"%03d" % (i * 7 % 40) + b"-record" * (i % 3) for i in range(30)] + [b"", b"\x00\n\xff"])


@pytest.fixture(scope="module")
def small_files(reference_zs, tmp_path_factory) -> dict[str, bytes]:
    """Small files with deep indexes, one per codec, from the reference and from our ZSWriter."""
    d = tmp_path_factory.mktemp("small")
    with ThreadPoolExecutor(3) as pool:  # the reference is slow to start: overlap the processes
        made = {
            codec: pool.submit(
                reference_make,
                reference_zs,
                d / f"{codec}.zs",
                RECORDS,
                "--codec",
                codec,
                "--branching-factor",
                "2",
                "--approx-block-size",
                "40",
                "--no-default-metadata",
                metadata='{"k": "v"}',
            )
            for codec in ("none", "deflate", "lzma")
        }
        files = {f"reference-{codec}": fut.result().read_bytes() for codec, fut in made.items()}
    for codec in ("none", "deflate", "lzma", "zstd"):
        path = d / f"ours-{codec}.zs"
        with zsarchive.ZSWriter(
            str(path), {"k": "v"}, branching_factor=2, approx_block_size=40, codec=codec, include_default_metadata=False
        ) as w:
            w.add_records(RECORDS)
            w.finish()
        files[f"zsarchive-{codec}"] = path.read_bytes()
    return files


def _reader_agrees(data: bytes) -> None:
    """Our reader must raise ZSCorrupt or return exactly the original records."""
    try:
        with zsarchive.ZS(io.BytesIO(data)) as z:
            got = list(z.search())
    except ZSCorrupt:
        return
    assert got == RECORDS


def _flip_rejected(data: bytes, pos: int, bit: int, *, reader: bool = True) -> None:
    bad = bytearray(data)
    bad[pos] ^= 1 << bit
    bad = bytes(bad)
    with pytest.raises(ZSCorrupt):
        validate(io.BytesIO(bad), parallelism=1)
    if reader:
        _reader_agrees(bad)


def test_good_small_files_are_valid(small_files):
    for data in small_files.values():
        report = validate(io.BytesIO(data), parallelism=1)
        assert report.records == len(RECORDS)
        assert report.root_index_level >= 3
        _reader_agrees(data)


def test_bit_flip_at_every_byte_is_rejected(small_files):
    for name, data in small_files.items():
        for pos in range(len(data)):
            _flip_rejected(data, pos, pos % 8)


def test_every_bit_of_the_uncompressed_file_is_covered(small_files):
    data = small_files["reference-none"]
    for pos in range(len(data)):
        for bit in range(8):
            if bit != pos % 8:
                _flip_rejected(data, pos, bit, reader=False)


def test_every_truncation_is_rejected(small_files):
    for data in small_files.values():
        for n in range(len(data)):
            with pytest.raises(ZSCorrupt):
                validate(io.BytesIO(data[:n]), parallelism=1)
            _reader_agrees(data[:n])


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.data())
def test_random_edits_are_rejected_or_harmless(small_files, data):
    """Overwrites, deletions and insertions anywhere: ZSCorrupt, or the file did not change."""
    name = data.draw(st.sampled_from(sorted(small_files)))
    original = small_files[name]
    edited = bytearray(original)
    for _ in range(data.draw(st.integers(1, 4))):
        pos = data.draw(st.integers(0, len(edited) - 1))
        chunk = data.draw(st.binary(min_size=1, max_size=12))
        how = data.draw(st.sampled_from(["overwrite", "delete", "insert"]))
        if how == "overwrite":
            edited[pos : pos + len(chunk)] = chunk
        elif how == "delete":
            del edited[pos : pos + len(chunk)]
        else:
            edited[pos:pos] = chunk
    edited = bytes(edited)
    if edited == original:
        return
    with pytest.raises(ZSCorrupt):
        validate(io.BytesIO(edited), parallelism=1)
    _reader_agrees(edited)


def test_threaded_and_serial_validation_fail_alike(small_files):
    data = small_files["reference-deflate"]
    for pos in range(0, len(data), 7):
        bad = bytearray(data)
        bad[pos] ^= 0x10
        messages = []
        for parallelism in (1, 3):
            with pytest.raises(ZSCorrupt) as exc:
                validate(io.BytesIO(bytes(bad)), parallelism=parallelism)
            messages.append(str(exc.value).split(": ", 1)[1])  # drop the BytesIO's repr
        assert messages[0] == messages[1]


# -- semantic corruptions: each builds a file with one broken invariant ---------------------------
# Each returns (file bytes, regex the message must match). Offsets are taken from the builder.


def _out_of_order_in_block():
    b = FileBuilder()
    d = b.data_block([b"a", b"c", b"b"])
    b.root_block(1, [(b"a", *d)])
    return b.build(), rf"offset {d[0]}: data block records out of order: record 2 b'b'"


def _out_of_order_across_blocks():
    b = FileBuilder()
    d1 = b.data_block([b"a", b"c"])
    d2 = b.data_block([b"b", b"d"])
    b.root_block(1, [(b"a", *d1), (b"b", *d2)])
    return b.build(), rf"offset {d2[0]}: data block's first record b'b' sorts before .*b'c'.*offset {d1[0]}"


def _key_too_large():
    b = FileBuilder()
    d1 = b.data_block([b"a", b"c"])
    d2 = b.data_block([b"e", b"g"])
    r = b.root_block(1, [(b"a", *d1), (b"ea", *d2)])
    return b.build(), rf"offset {r[0]}: index entry 1 key b'ea' is larger than the first record b'e'"


def _key_too_small():
    b = FileBuilder()
    d1 = b.data_block([b"a", b"c"])
    d2 = b.data_block([b"e", b"g"])
    r = b.root_block(1, [(b"a", *d1), (b"bz", *d2)])
    return b.build(), rf"offset {r[0]}: index entry 1 key b'bz' is smaller than record b'c'"


def _key_too_small_two_levels_down():
    b = FileBuilder()
    d1 = b.data_block([b"a", b"b"])
    d2 = b.data_block([b"c", b"d"])
    i1 = b.index_block(1, [(b"a", *d1), (b"c", *d2)])
    d3 = b.data_block([b"f", b"g"])
    d4 = b.data_block([b"h", b"i"])
    i2 = b.index_block(1, [(b"f", *d3), (b"h", *d4)])
    # "c" sorts after i1's keys but before record "d", which precedes i2's first record
    r = b.root_block(2, [(b"a", *i1), (b"c", *i2)])
    return (
        b.build(),
        rf"offset {r[0]}: index entry 1 key b'c' is smaller than record b'd' \(data block at offset {d2[0]}\)",
    )


def _key_too_large_two_levels_down():
    b = FileBuilder()
    d1 = b.data_block([b"a", b"b"])
    i1 = b.index_block(1, [(b"a", *d1)])
    d2 = b.data_block([b"c", b"d"])
    i2 = b.index_block(1, [(b"b", *d2)])  # "b" is fine here
    r = b.root_block(2, [(b"a", *i1), (b"ca", *i2)])
    return b.build(), rf"offset {r[0]}: index entry 1 key b'ca' is larger than the first record b'c'"


def _unsorted_index_keys():
    b = FileBuilder()
    d1 = b.data_block([b"a", b"b"])
    d2 = b.data_block([b"c", b"d"])
    r = b.root_block(1, [(b"b", *d1), (b"a", *d2)])
    return b.build(), rf"offset {r[0]}: .*index keys out of order: entry 1 key b'a' sorts before entry 0 key b'b'"


def _entries_out_of_file_order():
    b = FileBuilder()
    d1 = b.data_block([b"a"])
    d2 = b.data_block([b"a"])
    r = b.root_block(1, [(b"a", *d2), (b"a", *d1)])
    return b.build(), rf"offset {r[0]}: index entry 1 \(offset {d1[0]}\) spans records that come before"


def _dangling_ref_inside_block():
    b = FileBuilder()
    d1 = b.data_block([b"a", b"b"])
    r = b.root_block(1, [(b"a", d1[0] + 1, d1[1])])
    return b.build(), rf"offset {r[0]}: index block entry 0 .*points at offset {d1[0] + 1}, which is not the start"


def _dangling_ref_past_eof():
    b = FileBuilder()
    d1 = b.data_block([b"a", b"b"])
    r = b.root_block(1, [(b"a", *d1), (b"c", 10**9, 20)])
    return b.build(), rf"offset {r[0]}: index block entry 1 .*points at offset {10**9}.*dangling"


def _duplicate_ref_same_block():
    b = FileBuilder()
    d1 = b.data_block([b"a", b"b"])
    r = b.root_block(1, [(b"a", *d1), (b"a", *d1)])
    return b.build(), rf"offset {r[0]}: index block entry 1 .*references the block at offset {d1[0]}, already"


def _duplicate_ref_two_indexes():
    b = FileBuilder()
    d1 = b.data_block([b"a", b"b"])
    d2 = b.data_block([b"c", b"d"])
    i1 = b.index_block(1, [(b"a", *d1), (b"c", *d2)])
    i2 = b.index_block(1, [(b"c", *d2)])
    b.root_block(2, [(b"a", *i1), (b"c", *i2)])
    return b.build(), rf"offset {i2[0]}: .*already referenced by the index block at offset {i1[0]}"


def _orphan_data_block():
    b = FileBuilder()
    d1 = b.data_block([b"a", b"b"])
    d2 = b.data_block([b"c", b"d"])
    b.root_block(1, [(b"a", *d1)])
    return b.build(), rf"offset {d2[0]}: level-0 block is not referenced by any index block"


def _orphan_index_block():
    b = FileBuilder()
    d1 = b.data_block([b"a", b"b"])
    i1 = b.index_block(1, [(b"a", *d1)])
    d2 = b.data_block([b"c", b"d"])
    b.root_block(1, [(b"c", *d2)])
    return b.build(), rf"offset {i1[0]}: level-1 block is not referenced by any index block"


def _index_points_at_index_of_same_level():
    b = FileBuilder()
    d1 = b.data_block([b"a", b"b"])
    i1 = b.index_block(1, [(b"a", *d1)])
    r = b.root_block(1, [(b"a", *i1)])
    return b.build(), rf"offset {r[0]}: .*points at a level-1 block at offset {i1[0]}; a level-1 index"


def _index_skips_a_level():
    b = FileBuilder()
    d1 = b.data_block([b"a", b"b"])
    r = b.root_block(2, [(b"a", *d1)])
    return b.build(), rf"offset {r[0]}: .*points at a level-0 block .*a level-2 index may reference only level 1"


def _index_points_at_extension_block():
    b = FileBuilder()
    d1 = b.data_block([b"a", b"b"])
    x = b.raw_block(64, b"future")
    r = b.root_block(1, [(b"a", *d1), (b"b", *x)])
    return b.build(), rf"offset {r[0]}: .*points at the extension block \(level 64\) at offset {x[0]}"


def _ref_length_plus_one():
    b = FileBuilder()
    d1 = b.data_block([b"a", b"b"])
    r = b.root_block(1, [(b"a", d1[0], d1[1] + 1)])
    return b.build(), rf"offset {r[0]}: .*gives length {d1[1] + 1} for the block at offset {d1[0]}, which is {d1[1]}"


def _ref_length_minus_one():
    b = FileBuilder()
    d1 = b.data_block([b"a", b"b"])
    r = b.root_block(1, [(b"a", d1[0], d1[1] - 1)])
    return b.build(), rf"offset {r[0]}: .*gives length {d1[1] - 1} for the block"


def _non_shortest_record_length():
    b = FileBuilder()
    payload = b"\x01a" + b"\x82\x00bc"  # 2 written in two bytes
    b.hasher.update(payload)
    d1 = b.raw_block(0, payload)
    b.root_block(1, [(b"a", *d1)])
    return b.build(), rf"offset {d1[0]}: data block: record 1 length at position 2: not in shortest form"


def _non_shortest_index_offset():
    b = FileBuilder()
    d1 = b.data_block([b"a", b"b"])
    off = uleb128.encode(d1[0])
    padded = off[:-1] + bytes([off[-1] | 0x80, 0])  # same value, one byte too many
    r = b.raw_block(1, b"\x01a" + padded + uleb128.encode(d1[1]))
    b.root = r
    return (
        b.build(),
        rf"offset {r[0]}: index block \(level 1\): index entry 0 offset at position 2: not in shortest form",
    )


def _non_shortest_block_length():
    b = FileBuilder()
    d1 = b.data_block([b"a", b"b"])
    body = encode_block(1, encode_index([(b"a", *d1)]))
    n, p = uleb128.decode(body)
    assert p == 1
    framed = bytes([body[0] | 0x80, 0]) + body[1:]
    r = b.framed(framed)
    b.root = r
    return b.build(), rf"offset {r[0]}: block length field is not in shortest uleb128 form"


def _empty_data_payload():
    b = FileBuilder()
    d1 = b.data_block([])
    b.root_block(1, [(b"", *d1)])
    return b.build(), rf"offset {d1[0]}: data block: data block payload holds no records"


def _empty_index_payload():
    b = FileBuilder()
    b.data_block([b"a"])
    r = b.root_block(1, [])
    return b.build(), rf"offset {r[0]}: index block \(level 1\): index block payload holds no entries"


def _record_runs_past_payload():
    b = FileBuilder()
    payload = b"\x01a\x05bc"
    b.hasher.update(payload)
    d1 = b.raw_block(0, payload)
    b.root_block(1, [(b"a", *d1)])
    return b.build(), rf"offset {d1[0]}: data block: record 1 length 5 runs past the end"


def _index_entry_cut_short():
    b = FileBuilder()
    d1 = b.data_block([b"a"])
    r = b.raw_block(1, encode_index([(b"a", *d1)])[:-1])
    b.root = r
    return b.build(), rf"offset {r[0]}: index block \(level 1\): index entry 0 length at position 3: truncated"


def _zero_block_length():
    b = minimal()
    z = b.framed(b"\x00")
    return b.build(), rf"offset {z[0]}: block length is 0"


def _root_length_plus_one():
    b = FileBuilder()
    d1 = b.data_block([b"a", b"b"])
    r = b.root_block(1, [(b"a", *d1)])
    b.data_block([b"x"], hashed=False)  # keeps root + 1 inside the file
    return b.build(
        root=(r[0], r[1] + 1)
    ), rf"offset 16: header gives root index length {r[1] + 1}, but the block at offset {r[0]} is {r[1]} bytes"


def _root_length_minus_one():
    b = minimal()
    r = b.root
    return b.build(root=(r[0], r[1] - 1)), rf"offset 16: header gives root index length {r[1] - 1}"


def _root_is_data():
    b = FileBuilder()
    d1 = b.data_block([b"a", b"b"])
    return b.build(root=d1), rf"offset 16: root block at offset {d1[0]} is a data block \(level 0\)"


def _root_is_extension():
    b = minimal()
    x = b.raw_block(70, b"ext")
    return b.build(root=x), rf"offset 16: root index offset {x[0]} is an extension block \(level 70\)"


def _root_level_too_high():
    b = FileBuilder()
    d = b.data_block([b"a"])
    for level in range(1, 64):
        d = b.index_block(level, [(b"a", *d)])
    top = b.raw_block(64, encode_index([(b"a", *d)]))  # a 64th level is an extension block, not an index
    return b.build(root=top), rf"offset 16: root index offset {top[0]} is an extension block \(level 64\)"


def _root_offset_not_a_block():
    b = minimal()
    b.data_block([b"x"], hashed=False)
    r = b.root
    return b.build(root=(r[0] + 1, r[1])), rf"offset 16: root index offset {r[0] + 1} is not the start of a block"


def _root_outside_file():
    b = minimal()
    r = b.root
    return b.build(root=(r[0], r[1] + 1)), r"offset 16: root index block .* lies outside the block region"


def _root_referenced_by_index():
    b = minimal()
    r = b.root
    top = b.index_block(2, [(b"a", *r)])
    return b.build(), rf"offset 16: root block at offset {r[0]} is referenced by the index block at offset {top[0]}"


def _bad_sha256():
    return minimal().build(sha=b"\x01" * 32), r"offset 40: data SHA-256 mismatch: header says 0101"


def _sha256_of_compressed_bytes():
    # The hash is over decompressed payloads: hashing the on-disk bytes instead must fail.
    b = FileBuilder(codec="deflate")
    b.hasher = hashlib.sha256()
    d1 = b.data_block([b"a" * 50], hashed=False)
    b.hasher.update(b.codec.compress(encode_records([b"a" * 50])))
    b.root_block(1, [(b"a", *d1)])
    return b.build(), r"offset 40: data SHA-256 mismatch"


def _total_length_too_big():
    b = minimal()
    data = b.build()
    return b.build(
        total=len(data) + 1
    ), rf"offset 32: header says the file is {len(data) + 1} bytes, but it is {len(data)}"


def _total_length_too_small():
    b = minimal()
    data = b.build()
    return b.build(total=len(data) - 1), rf"offset 32: header says the file is {len(data) - 1} bytes"


def _trailing_garbage():
    b = minimal()
    g = b.framed(b"\x05junk")
    return b.build(), rf"offset {g[0]}: block of 14 bytes .* runs past the end of the {g[0] + 5}-byte file"


def _trailing_unterminated_length():
    b = minimal()
    g = b.framed(b"\x80\x80")
    return b.build(), rf"offset {g[0]}: block length field runs past the end of the file"


def _junk_between_header_and_blocks():
    b = FileBuilder()
    b.framed(b"\x00")
    minimal(b)
    return b.build(), rf"offset {b.start}: block length is 0"


def _block_crc_mismatch():
    b = FileBuilder()
    d1 = b.data_block([b"a"])
    good = encode_block(1, encode_index([(b"a", *d1)]))
    r = b.framed(good[:-8] + bytes(8))
    b.root = r
    return b.build(), rf"offset {r[0]}: block CRC mismatch \(stored 0x0000000000000000"


def _payload_does_not_decompress():
    b = FileBuilder(codec="deflate")
    d1 = b.raw_block(0, b"\xff\xfe not deflate", compress=False)
    b.root_block(1, [(b"a", *d1)])
    return b.build(), rf"offset {d1[0]}: data block: payload does not decompress"


def _zstobe_magic():
    return minimal().build(magic=PARTIAL_MAGIC), r"offset 0: ZStoBe magic: this file was only partially written"


def _metadata_array():
    return minimal(FileBuilder(metadata=[1, 2])).build(), r"offset 96: metadata is JSON but not an object"


def _unknown_codec():
    data = with_header_field(minimal().build(), 72, b"bz2".ljust(16, b"\0"))  # removed in ZS v0.10
    return data, r"offset 72: unknown codec 'bz2'"


def _header_crc_wrong():
    data = bytearray(minimal().build())
    hl = int.from_bytes(data[8:16], "little")
    data[16 + hl] ^= 1
    return bytes(data), rf"offset {16 + hl}: header CRC mismatch"


def _header_length_past_eof():
    data = bytearray(minimal().build())
    data[8:16] = (10**6).to_bytes(8, "little")
    return bytes(data), rf"offset 8: header length 1000000 runs past the end of the {len(data)}-byte file"


SEMANTIC = {
    f.__name__.lstrip("_"): f
    for f in [
        _out_of_order_in_block,
        _out_of_order_across_blocks,
        _key_too_large,
        _key_too_small,
        _key_too_small_two_levels_down,
        _key_too_large_two_levels_down,
        _unsorted_index_keys,
        _entries_out_of_file_order,
        _dangling_ref_inside_block,
        _dangling_ref_past_eof,
        _duplicate_ref_same_block,
        _duplicate_ref_two_indexes,
        _orphan_data_block,
        _orphan_index_block,
        _index_points_at_index_of_same_level,
        _index_skips_a_level,
        _index_points_at_extension_block,
        _ref_length_plus_one,
        _ref_length_minus_one,
        _non_shortest_record_length,
        _non_shortest_index_offset,
        _non_shortest_block_length,
        _empty_data_payload,
        _empty_index_payload,
        _record_runs_past_payload,
        _index_entry_cut_short,
        _zero_block_length,
        _root_length_plus_one,
        _root_length_minus_one,
        _root_is_data,
        _root_is_extension,
        _root_level_too_high,
        _root_offset_not_a_block,
        _root_outside_file,
        _root_referenced_by_index,
        _bad_sha256,
        _sha256_of_compressed_bytes,
        _total_length_too_big,
        _total_length_too_small,
        _trailing_garbage,
        _trailing_unterminated_length,
        _junk_between_header_and_blocks,
        _block_crc_mismatch,
        _payload_does_not_decompress,
        _zstobe_magic,
        _metadata_array,
        _unknown_codec,
        _header_crc_wrong,
        _header_length_past_eof,
    ]
}


@pytest.mark.parametrize("case", sorted(SEMANTIC))
@pytest.mark.parametrize("parallelism", [1, 2])
def test_semantic_corruption_is_rejected_at_the_right_offset(case, parallelism):
    data, pattern = SEMANTIC[case]()
    with pytest.raises(ZSCorrupt) as exc:
        validate(io.BytesIO(data), parallelism=parallelism)
    message = str(exc.value)
    assert "\n" not in message
    assert re.search(pattern, message), message


def test_reference_validator_rejects_the_semantic_corruptions(reference_python, tmp_path):
    paths = {}
    for case, make in SEMANTIC.items():
        paths[case] = tmp_path / f"{case}.zs"
        paths[case].write_bytes(make()[0])
    verdicts = reference_verdicts(reference_python, list(paths.values()))
    got = {case: verdicts[str(path)] for case, path in paths.items()}
    # The reference crashes (TypeError, zlib.error) on two of them instead of raising ZSCorrupt:
    # still a rejection, so only acceptance is a disagreement.
    assert not [case for case, verdict in got.items() if verdict == "ACCEPT"], got


# -- every kind of bad file, through the Python API and the command line ------------------------------


def _good() -> FileBuilder:
    b = FileBuilder(codec="deflate")
    d1 = b.data_block([b"a\n", b"b\x00"])
    d2 = b.data_block([b"c", b"d"])
    b.root_block(1, [(b"a", *d1), (b"c", *d2)])
    return b


def _bad_files() -> dict[str, bytes]:
    good = _good().build()
    first_data = _good().start
    flipped = bytearray(good)
    flipped[first_data + 4] ^= 0x10  # inside the first data block's compressed payload

    def one_block(raw: bytes, entry_length: int | None = None) -> bytes:
        b = FileBuilder()
        offset, length = b.framed(raw)
        b.root_block(1, [(b"", offset, length if entry_length is None else entry_length)])
        return b.build()

    body = b"\x00" + encode_records([b"a"])
    huge_block = uleb128.encode(2**60) + body + crc64(body).to_bytes(8, "little")
    return {  # case: (bytes, what every message must say)
        "not a ZS file": (b"hello, world\n" * 10, "offset 0: bad magic"),
        "empty file": (b"", "offset 0: file is 0 bytes, too short"),
        "truncated in the header": (good[: len(good) // 2], "runs past the end"),
        "truncated in the blocks": (good[:-10], f"but it is {len(good) - 10} bytes"),
        "partially written": (PARTIAL_MAGIC + good[8:], "only partially written"),
        "flipped bit": (bytes(flipped), f"offset {first_data}: block CRC mismatch"),
        "unknown codec": (with_header_field(good, 72, b"bzip2".ljust(16, b"\0")), "offset 72: unknown codec 'bzip2'"),
        "metadata not an object": (
            FileBuilder(metadata=[1, 2]).build(root=(0, 0)),
            "metadata is JSON but not an object",
        ),
        "huge header length": (
            good[:8] + (2**62).to_bytes(8, "little") + good[16:],
            f"offset 8: header length {2**62}",
        ),
        "huge metadata length": (
            with_header_field(good, 88, (2**63).to_bytes(8, "little")),
            f"offset 88: metadata length {2**63}",
        ),
        "huge root length": (with_header_field(good, 24, (2**60).to_bytes(8, "little")), "offset 16: root"),
        "huge block length": (one_block(huge_block), f"offset {first_data}: block"),
        "huge index entry length": (
            one_block(encode_block(0, encode_records([b"a"])), entry_length=2**60),
            f"length {2**60}",
        ),
        "huge record length": (one_block(encode_block(0, uleb128.encode(2**60) + b"ab")), f"offset {first_data}: "),
    }


BAD_FILES = _bad_files()


@pytest.mark.parametrize("case", sorted(BAD_FILES))
def test_bad_files_are_one_clear_error_in_the_api_and_the_cli(tmp_path, case):
    """No MemoryError from a bogus length, no foreign exception, no hang: ZSCorrupt naming the
    file in one line from ZS and validate(), and from ``zs dump``/``validate`` exit 1 and one line."""
    data, expected = BAD_FILES[case]
    path = tmp_path / "bad.zs"
    path.write_bytes(data)

    def scan(**options) -> None:
        with zsarchive.ZS(path, **options) as z:
            z.dump(io.BytesIO())

    def lookup() -> None:
        with zsarchive.ZS(path) as z:
            list(z.search(prefix=b"a"))

    for attempt in (scan, lambda: scan(parallelism=0), lookup, lambda: validate(path)):
        with pytest.raises(ZSCorrupt) as info:
            attempt()
        assert str(info.value).startswith(f"{path}: ") and "\n" not in str(info.value)
        assert expected in str(info.value)
    for command in ("dump", "validate", "info"):
        proc = run_zs(command, str(path), timeout=120)
        if command == "info" and proc.returncode == 0:
            continue  # info reads only the header and the root: a broken block deeper down is no concern
        assert one_line_error(proc, expected).startswith(f"zs: error: {path}: "), (command, proc.stderr)
