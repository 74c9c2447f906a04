"""zsarchive.zs.format.uleb128: the spec's examples, round trips, truncation, non-shortest forms and
values past 64 bits (refused after at most 10 bytes, however long the input runs on)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from zsarchive.errors import ZSCorrupt
from zsarchive.zs.format import uleb128

# The examples table of the ZS v0.10 specification ("uleb128 string <-> integer value").
SPEC_EXAMPLES = {"00": 0x00, "7f": 0x7F, "8001": 0x80, "ff20": 0x107F, "8080808020": 2**33}


@pytest.mark.parametrize("hex_string", list(SPEC_EXAMPLES))
def test_the_examples_of_the_spec(hex_string):
    raw, value = bytes.fromhex(hex_string), SPEC_EXAMPLES[hex_string]
    assert uleb128.encode(value) == raw
    assert uleb128.decode(raw) == (value, len(raw))


@given(st.integers(0, 2**64 - 1), st.binary(max_size=4), st.binary(max_size=4))
def test_round_trip_anywhere_in_a_buffer(value, before, after):
    raw = uleb128.encode(value)
    assert raw[-1] < 0x80 and all(b >= 0x80 for b in raw[:-1])
    assert uleb128.decode(before + raw + after, len(before)) == (value, len(before) + len(raw))


def test_lengths_grow_by_one_byte_per_seven_bits():
    for bits in range(1, 71):
        assert len(uleb128.encode(2**bits - 1)) == -(-bits // 7)


@given(st.integers(2**7, 2**64 - 1))
def test_every_truncation_is_refused_with_its_position(value):
    raw = uleb128.encode(value)
    for n in range(len(raw)):
        with pytest.raises(ZSCorrupt, match="record length at position 2: truncated"):
            uleb128.decode(b"xx" + raw[:n], 2, "record length")


def test_non_shortest_forms_are_refused():
    for raw in (b"\x80\x00", b"\xff\x80\x00", b"\x81\x80\x80\x00"):
        with pytest.raises(ZSCorrupt, match="at position 0: not in shortest form"):
            uleb128.decode(raw)


def test_values_past_64_bits_are_refused_within_ten_bytes():
    assert uleb128.decode(uleb128.encode(2**64 - 1)) == (2**64 - 1, 10)
    with pytest.raises(ZSCorrupt, match="at position 0: more than 64 bits"):
        uleb128.decode(uleb128.encode(2**64))
    with pytest.raises(ZSCorrupt, match="at position 1: longer than the 10 bytes of a 64-bit value"):
        uleb128.decode(b"x" + b"\xff" * 100_000 + b"\x01", 1)


def test_negative_values_cannot_be_encoded():
    with pytest.raises(ValueError):
        uleb128.encode(-1)
