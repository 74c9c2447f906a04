"""zsarchive.zs.format.framing: record boundaries and output framing, and the C framing extension
against the pure-Python framing it stands in for."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from zsarchive.errors import ZSCorrupt
from zsarchive.zs.format import block
from zsarchive.zs.format.block import decode_records, encode_records
from zsarchive.zs.format.framing import frame, record_heads, record_spans, terminate


def test_the_c_extension_is_built():
    """This machine kind has gcc and the Python headers: the install must have built it (without it
    dump and validate fall back to Python loops, ~2x slower with lzma)."""
    assert block.c_framing is not None, "zsarchive.zs.format._framing did not build: see the pip install log"


def _python(fn, *args):
    saved = block.c_framing
    block.c_framing = None
    try:
        return fn(*args)
    except ZSCorrupt as exc:
        return f"ZSCorrupt: {exc}"
    finally:
        block.c_framing = saved


def _either(fn, *args):
    try:
        return fn(*args)
    except ZSCorrupt as exc:
        return f"ZSCorrupt: {exc}"


records = st.lists(st.binary(max_size=20) | st.binary(min_size=120, max_size=400), min_size=1, max_size=30)
terminators = st.sampled_from([b"\n", b"\x00", b"", b"\r\n", b"<end>"])


@settings(max_examples=300)
@given(records, terminators)
def test_well_formed_payloads(recs, term):
    payload = encode_records(recs)
    assert block.c_framing.split(payload) == recs
    assert block.c_framing.terminate(payload, term) == term.join(recs) + term
    assert decode_records(payload, "p") == _python(decode_records, payload, "p") == recs
    assert terminate(payload, term, "p") == _python(terminate, payload, term, "p")
    assert _spanned(payload) == _python(_spanned, payload) == recs


@settings(max_examples=500)
@given(
    st.binary(max_size=60)
    | records.map(encode_records).flatmap(
        lambda p: st.integers(0, len(p)).map(lambda cut: p[:cut] + b"\x85"[: cut % 2])
    ),
    terminators,
)
def test_any_bytes_give_the_same_answer_or_error_in_c_and_python(payload, term):
    """C returns None for what it does not take; the caller's Python path then names the problem."""
    assert _either(decode_records, payload, "p") == _python(decode_records, payload, "p")
    assert _either(terminate, payload, term, "p") == _python(terminate, payload, term, "p")
    assert _either(_spanned, payload) == _python(_spanned, payload)


@pytest.mark.parametrize("payload", [b"", b"\x05ab", b"\x80", b"\x81\x00a", b"\xff" * 12 + b"\x01"])
def test_malformed_payloads_are_left_to_python(payload):
    assert block.c_framing.split(payload) is None
    assert block.c_framing.terminate(payload, b"\n") is None
    assert block.c_framing.spans(payload) is None


def _spanned(payload: bytes) -> list[bytes]:
    """The records record_spans finds."""
    starts, ends = record_spans(payload, "p")
    return [payload[s:e] for s, e in zip(starts, ends)]


@given(records)
def test_record_heads_bisect_a_payload(recs):
    payload = encode_records(recs)
    heads, simple = record_heads(payload, "p")
    assert list(heads) == [len(encode_records(recs[:k])) for k in range(len(recs))] + [len(payload)]
    assert simple == all(len(r) < 0x80 for r in recs)


@given(records)
def test_record_heads_refuse_every_cut_inside_a_record(recs):
    payload = encode_records(recs)
    bounds = {len(encode_records(recs[:k])) for k in range(1, len(recs) + 1)}
    for n in range(len(payload)):
        if n not in bounds:
            with pytest.raises(ZSCorrupt, match="^p: "):
                record_heads(payload[:n], "p")


@given(records, terminators)
def test_frame_writes_what_the_reader_takes_back(recs, term):
    assert frame(recs, term) == term.join(recs) + term
    assert frame(recs, length_prefixed="uleb128") == encode_records(recs)
    u64 = frame(recs, length_prefixed="u64le")
    assert u64 == b"".join(struct.pack("<Q", len(r)) + r for r in recs)
    with pytest.raises(ValueError, match="length_prefixed"):
        frame(recs, length_prefixed="u32")
