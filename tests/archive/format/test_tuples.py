"""The tuple encoding: bytewise order == tuple order, self-delimiting, exact round trips."""

from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from toolkit.columns import BACKENDS, column_backend
from zsarchive.archive.format import tuplecolumns, tuplerows, tuples
from zsarchive.errors import ZSCorrupt

# One type per position keeps Python's own tuple comparison meaningful (it cannot compare
# str with int); mixed types are covered by the explicit type-order test below.
ints = st.integers(min_value=-(1 << 80), max_value=1 << 80)
small_ints = st.integers(min_value=-300, max_value=70000)
texts = st.text(max_size=8)
blobs = st.binary(max_size=8)


def same_shape_pairs():
    """Two tuples whose elements have the same type position by position."""
    kinds = st.lists(st.sampled_from(["i", "s", "b", "t"]), min_size=0, max_size=4)

    def build(shape):
        parts = {"i": ints, "s": texts, "b": blobs, "t": st.lists(small_ints, max_size=3).map(tuple)}
        one = st.tuples(*[parts[k] for k in shape])
        return st.tuples(one, one)

    return kinds.flatmap(build)


@given(same_shape_pairs())
@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
def test_bytewise_order_equals_tuple_order(pair):
    a, b = pair
    ea, eb = tuples.encode(a), tuples.encode(b)
    assert (ea < eb) == (a < b)
    assert (ea == eb) == (a == b)


@given(st.lists(small_ints, max_size=5), st.lists(small_ints, max_size=5))
def test_prefix_tuple_sorts_first_and_is_a_bytewise_prefix(a, b):
    a, b = tuple(a), tuple(b)
    assert tuples.encode(a + b).startswith(tuples.encode(a))
    # Nested: a shorter coordinate tuple sorts before a longer one it starts.
    assert tuples.encode((a,)) <= tuples.encode((a + b,))


@given(
    st.lists(
        st.one_of(
            ints, texts, blobs, st.none(), st.booleans(), st.lists(st.one_of(small_ints, texts), max_size=3).map(tuple)
        ),
        max_size=6,
    ).map(tuple)
)
def test_round_trip_and_self_delimiting(items):
    enc = tuples.encode(items)
    tail = b"\x00" + b"anything after the key \x00\x01"
    decoded, pos = tuples.decode(enc + tail)
    assert decoded == items
    assert pos == len(enc) + 1
    # Values: byte strings become blobs, still a round trip.
    venc = tuples.encode_value(items)
    assert tuples.decode(venc)[0] == items


@given(st.lists(texts, min_size=1, max_size=4).map(tuple), texts)
def test_string_elements_are_prefix_free(items, extra):
    # A prefix search for ("ab",) must never match ("abc",).
    longer = items[:-1] + (items[-1] + "x" + extra,)
    assert not tuples.encode(longer).startswith(tuples.encode(items))


def test_type_codes_order_and_known_bytes():
    assert tuples.encode((0,)) == b"\x14"
    assert tuples.encode((1,)) == b"\x15\x01"
    assert tuples.encode((-1,)) == b"\x13\xfe"
    assert tuples.encode((b"a\x00b",)) == b"\x01a\x00\xffb\x00"
    assert tuples.encode(("é",)) == b"\x02\xc3\xa9\x00"
    assert tuples.encode(((1, 2),)) == b"\x05\x15\x01\x15\x02\x00"
    assert (
        tuples.encode((b"",)) < tuples.encode(("",)) < tuples.encode(((),)) < tuples.encode((-5,)) < tuples.encode((0,))
    )


@pytest.mark.parametrize("bad", [b"\x02abc", b"\x99", b"\x16\x01", b"\x05\x15\x01", b"\x02\xff\xfe\x00"])
def test_corrupt_encodings_raise_zscorrupt(bad):
    with pytest.raises(ZSCorrupt):
        tuples.decode(bad)


@pytest.mark.parametrize(
    "longer",
    [
        b"\x15\x00",
        b"\x16\x00\x05",
        b"\x13\xff",
        b"\x12\xff\xfa",
        b"\x1d\x08" + bytes(range(1, 9)),
        b"\x1d\x09\x00" + bytes(range(1, 9)),
        b"\x0b\xf6\xff" + bytes(8),
    ],
)
def test_an_integer_has_one_encoding(longer):
    """An integer in more bytes than it needs (or a big-integer code for a small one) is refused: a key would
    have two spellings, two records of one key that no sorted order brings together. The column decoders
    leave such a batch to the record-by-record decoder, which names it."""
    with pytest.raises(ZSCorrupt, match="not in its shortest encoding"):
        tuples.decode(longer)
    if longer[0] in range(0x15, 0x1D):
        for backend in BACKENDS:
            with column_backend(backend):
                assert tuplecolumns.decode_columns(longer, np.array([0]), np.array([len(longer)]), "i") is None


@given(st.lists(ints, max_size=5), texts, ints)
def test_fast_paths_equal_the_general_encoder(coords, text, number):
    assert tuples.encode_text(text) == tuples.encode((text,))
    assert tuples.encode_int(number) == tuples.encode((number,))


def _spec_int(value: int) -> bytes:
    """An integer element as docs/archive-format.rst spells it (independent of zsarchive.archive.format.tuples)."""
    if value == 0:
        return b"\x14"
    size = (abs(value).bit_length() + 7) // 8
    if value > 0:
        body = value.to_bytes(size, "big")
        return bytes([0x14 + size]) + body if size <= 8 else bytes([0x1D, size]) + body
    body = ((1 << (8 * size)) - 1 + value).to_bytes(size, "big")
    return bytes([0x14 - size]) + body if size <= 8 else bytes([0x0B, 255 - size]) + body


BOUNDARIES = [b + d for b in (0, 4096, 65536, 1 << 24, 1 << 32, 1 << 64) for d in (-1, 0, 1)]
coordinates = st.integers(-(1 << 70), 1 << 70) | st.sampled_from(BOUNDARIES) | st.sampled_from([-b for b in BOUNDARIES])


@given(st.lists(coordinates, max_size=8))
def test_integer_fast_path_follows_the_spec(values):
    assert [tuples.encode_int(v) for v in values] == [_spec_int(v) for v in values]


unsigned = st.integers(0, (1 << 64) - 1) | st.sampled_from([b for b in BOUNDARIES if 0 <= b < 1 << 64])


@given(
    st.integers(0, 3).flatmap(lambda ndim: st.lists(st.tuples(*[unsigned] * ndim), max_size=8)),
    st.binary(max_size=40),
    st.binary(max_size=3),
    st.lists(st.binary(max_size=50), min_size=1, max_size=4),
    st.randoms(),
)
def test_rows_follow_the_spec(rows, before, after, pieces, rng):
    """encode_rows against the spec's integer layout: constants, integer columns, chosen pieces."""
    n = len(rows)
    ndim = len(rows[0]) if rows else 0
    columns = [np.array([r[k] for r in rows], dtype=np.uint64) for k in range(ndim)]
    choice = [rng.randrange(len(pieces)) for _ in rows]
    got = tuplerows.encode_rows(
        [before + b"\x05", *columns, b"\x00", (pieces, np.array(choice, dtype=np.int64)), after], n
    )
    assert got == [
        before + b"\x05" + b"".join(_spec_int(v) for v in r) + b"\x00" + pieces[c] + after for r, c in zip(rows, choice)
    ]


@given(st.integers(0, 2**32))
def test_rows_of_many_layouts_follow_the_spec(seed):
    """Batches whose strings take many layouts (integer sizes, piece lengths) are built another way."""
    rng = random.Random(seed)
    rows = [
        (rng.getrandbits(rng.randrange(65)), rng.getrandbits(rng.randrange(65)), rng.randrange(100))
        for _ in range(rng.randrange(300, 400))
    ]
    pieces = [bytes(rng.randrange(256) for _ in range(k)) for k in range(100)]
    columns = [np.array([r[k] for r in rows], dtype=np.uint64) for k in range(2)]
    choice = np.array([r[2] for r in rows], dtype=np.int64)
    got = tuplerows.encode_rows([b"\x05", *columns, (pieces, choice), b"\x00"], len(rows))
    assert got == [b"\x05" + _spec_int(a) + _spec_int(b) + pieces[c] + b"\x00" for a, b, c in rows]


def test_rows_refuse_negative_integers():
    with pytest.raises(ValueError, match="integers >= 0"):
        tuplerows.encode_rows([np.array([1, -1])], 2)


_LAYOUT_VALUES = {
    "i": unsigned,
    "s": st.text(max_size=12),
    "I": st.none() | unsigned,
    "S": st.none() | st.text(max_size=12),
}


@pytest.mark.parametrize("backend", BACKENDS)
@given(
    st.text("isIS", min_size=1, max_size=5).flatmap(
        lambda layout: st.tuples(
            st.just(layout), st.lists(st.tuples(*[_LAYOUT_VALUES[c] for c in layout]), min_size=1, max_size=8)
        )
    ),
    st.binary(max_size=6),
)
def test_decode_columns_agrees_with_decode(backend, case, before):
    """decode_columns, a batch at a time (in C and with numpy), gives what decode gives row by row, or
    refuses (None) the rows it does not take; each row is a tuple between constant bytes, as in a record."""
    layout, rows = case
    encoded = [before + tuples.encode([tuple(row)]) for row in rows]
    buf = b"".join(encoded)
    ends = np.cumsum([len(e) for e in encoded])
    starts = ends - [len(e) for e in encoded] + len(before)
    with column_backend(backend):
        got = tuplecolumns.decode_columns(buf, starts, ends, "(" + layout + ")")
    escaped = any(isinstance(v, str) and "\0" in v for row in rows for v in row)
    if got is None:
        assert escaped
        return
    columns, pos = got
    assert (pos == ends).all()
    for i, row in enumerate(rows):
        assert tuples.decode(encoded[i], len(before))[0] == (tuple(row),)
        for letter, column, value in zip(layout, columns, row):
            if letter in "iI":
                values, present = column if letter == "I" else (column, [True] * len(rows))
                assert (int(values[i]) if present[i] else None) == value
            else:
                begin, stop, present = column if letter == "S" else (*column, [True] * len(rows))
                assert (buf[begin[i] : stop[i]].decode() if present[i] else None) == value


def _both(fn):
    """fn's answer with each column decoder."""
    answers = []
    for backend in BACKENDS:
        with column_backend(backend):
            answers.append(fn())
    return answers


@settings(max_examples=300)
@given(
    st.binary(min_size=1, max_size=60),
    st.lists(st.tuples(st.integers(0, 60), st.integers(0, 60)), min_size=1, max_size=6),
    st.text("isIS()", min_size=1, max_size=6),
)
def test_column_decoders_agree_on_any_bytes(buf, spans, layout):
    """Arbitrary bytes and record bounds: the C decoder and the numpy one refuse the same batches and
    decode the others alike (the C one reads nothing outside a record's bounds)."""
    spans = [(min(a, b, len(buf) - 1), min(max(a, b), len(buf))) for a, b in spans]
    starts = np.array([a for a, _ in spans], np.int64)
    ends = np.array([max(a + 1, b) for a, b in spans], np.int64).clip(max=len(buf))
    c, plain = _both(lambda: tuplecolumns.decode_columns(buf, starts, ends, layout))
    assert (c is None) == (plain is None)
    if c is not None:
        assert list(map(_as_lists, c[0])) == list(map(_as_lists, plain[0]))
        assert c[1].tolist() == plain[1].tolist()


def _as_lists(column) -> list:
    return [np.asarray(a).astype(np.int64).tolist() for a in (column if isinstance(column, tuple) else (column,))]


@given(
    st.lists(
        st.sampled_from(["", "a", "ab", "abcdefgh", "abcdefghi", "é", "s3://b/f.nc"]) | st.text(max_size=20),
        min_size=1,
        max_size=40,
    )
)
def test_interned_texts_are_the_spans(texts):
    """Columns.texts (C and numpy): each span's code names its own text, and equal texts share a code."""
    encoded = [t.encode() for t in texts]
    buf = b"".join(encoded)
    ends = np.cumsum([len(e) for e in encoded]).astype(np.int64)
    begins = ends - [len(e) for e in encoded]
    for codes, distinct in _both(lambda: tuplecolumns.Columns(buf).texts(begins, ends)):
        assert [distinct[c] for c in codes.tolist()] == texts
        assert len(distinct) == len(set(texts))


def test_interned_texts_refuse_what_is_not_utf8():
    for backend in BACKENDS:
        with column_backend(backend), pytest.raises(UnicodeDecodeError):
            tuplecolumns.Columns(b"ok\xff\xfe").texts(np.array([0, 2]), np.array([2, 4]))
