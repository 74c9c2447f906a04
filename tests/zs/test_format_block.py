"""zsarchive.zs.format.block: block framing and CRC, the data and index payload layouts. Round
trips, every truncation and bit flip, and length fields too long for any real block."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from zsarchive.errors import ZSCorrupt
from zsarchive.zs.format import uleb128
from zsarchive.zs.format.block import (
    MAX_LENGTH_FIELD,
    MIN_BLOCK_LENGTH,
    IndexEntry,
    check_crc,
    decode_index,
    decode_length,
    decode_records,
    encode_block,
    encode_index,
    encode_records,
    split_block,
)
from zsarchive.zs.format.crc64 import crc64

records = st.lists(st.binary(max_size=300), min_size=1, max_size=40)
index_entries = st.lists(
    st.tuples(st.binary(max_size=20), st.integers(0, 2**64 - 1), st.integers(10, 2**40)), min_size=1, max_size=20
).map(lambda es: [IndexEntry(k, o, n) for k, (_, o, n) in zip(sorted(e[0] for e in es), es)])


# ---- framing ------------------------------------------------------------------------------------


@given(st.integers(0, 255), st.binary(max_size=400))
def test_block_round_trip(level, zpayload):
    framed = encode_block(level, zpayload)
    assert len(framed) >= MIN_BLOCK_LENGTH
    assert split_block(framed, "b") == (level, zpayload)
    body_length, field_length = decode_length(framed[:MAX_LENGTH_FIELD], "b")
    assert field_length + body_length + 8 == len(framed)
    assert framed[-8:] == crc64(framed[field_length:-8]).to_bytes(8, "little")


def test_every_truncation_and_bit_flip_of_a_block_is_refused():
    framed = encode_block(3, bytes(range(200)))
    for n in range(len(framed)):
        with pytest.raises(ZSCorrupt, match="^b: "):
            split_block(framed[:n], "b")
    for i in range(len(framed)):
        for bit in range(8):
            bad = bytearray(framed)
            bad[i] ^= 1 << bit
            with pytest.raises(ZSCorrupt, match="^b: "):
                split_block(bytes(bad), "b")


@pytest.mark.parametrize(
    "field, message",
    [
        (b"\x80" * MAX_LENGTH_FIELD + b"\x01", "block length field is longer than 10 bytes"),
        (b"\xff" * 3, "block length field runs past the end of the file"),
        (b"", "block length field runs past the end of the file"),
        (b"\x85\x00" + b"\x00" * 8, "block length field is not in shortest uleb128 form"),
        (b"\x00" * 10, "block length is 0"),
    ],
)
def test_bad_length_fields(field, message):
    with pytest.raises(ZSCorrupt, match=f"^at 5: {message}"):
        decode_length(field, "at 5")


def test_a_length_beyond_the_buffer_is_refused_before_anything_is_allocated():
    body = b"\x00" + encode_records([b"a"])
    framed = uleb128.encode(2**63) + body + crc64(body).to_bytes(8, "little")
    assert decode_length(framed[:MAX_LENGTH_FIELD], "b")[0] == 2**63
    with pytest.raises(ZSCorrupt, match="block length field says"):
        split_block(framed, "b")


def test_check_crc():
    check_crc(b"\x00abc", crc64(b"\x00abc"), "b")
    with pytest.raises(ZSCorrupt, match=r"^b: block CRC mismatch \(stored 0x0000000000000001"):
        check_crc(b"\x00abc", 1, "b")


# ---- data payloads ------------------------------------------------------------------------------


@given(records)
def test_records_round_trip(recs):
    payload = encode_records(recs)
    assert payload == b"".join(uleb128.encode(len(r)) + r for r in recs)
    assert decode_records(payload, "p") == recs
    assert encode_records(iter(recs)) == payload  # any iterable, as the writer's lists


@given(records)
def test_a_cut_payload_is_refused_or_is_a_prefix_cut_at_a_record_boundary(recs):
    payload = encode_records(recs)
    bounds = {len(encode_records(recs[:k])): k for k in range(1, len(recs) + 1)}
    for n in range(len(payload)):
        if n in bounds:
            assert decode_records(payload[:n], "p") == recs[: bounds[n]]
        else:
            with pytest.raises(ZSCorrupt, match="^p: "):
                decode_records(payload[:n], "p")


def test_a_record_length_past_any_payload_is_refused():
    with pytest.raises(ZSCorrupt, match="record 0 length .* runs past the end of the 12-byte payload"):
        decode_records(uleb128.encode(2**63) + b"ab", "p")
    with pytest.raises(ZSCorrupt, match="record 0 length at position 0: more than 64 bits"):
        decode_records(uleb128.encode(2**64) + b"ab", "p")


# ---- index payloads -----------------------------------------------------------------------------


@given(index_entries)
def test_index_round_trip(entries):
    assert decode_index(encode_index(entries), "i") == entries


@given(index_entries)
def test_every_truncation_of_an_index_payload_is_refused(entries):
    payload = encode_index(entries)
    bounds = {len(encode_index(entries[:k])) for k in range(1, len(entries) + 1)}
    for n in range(len(payload)):
        if n not in bounds:
            with pytest.raises(ZSCorrupt, match="^i: "):
                decode_index(payload[:n], "i")


def test_index_keys_out_of_order_and_empty_payloads_are_refused():
    with pytest.raises(ZSCorrupt, match="^i: index keys out of order: entry 1 key b'a' sorts before entry 0"):
        decode_index(encode_index([IndexEntry(b"b", 10, 10), IndexEntry(b"a", 20, 10)]), "i")
    with pytest.raises(ZSCorrupt, match="^i: index block payload holds no entries"):
        decode_index(b"", "i")
    with pytest.raises(ZSCorrupt, match="^p: data block payload holds no records"):
        decode_records(b"", "p")
