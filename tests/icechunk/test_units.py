"""Small pieces of zsarchive.icechunk: ids, path order, metadata values, storage, generated code."""

from __future__ import annotations

import subprocess

import msgpack
import pytest
from flatbuffers import flexbuffers
from hypothesis import given, strategies as st

from zsarchive.errors import ZSError
from zsarchive.icechunk import ids
from zsarchive.icechunk.flatbuf import FlatBufferError
from zsarchive.icechunk.model import format_time
from zsarchive.icechunk.paths import is_valid_path, path_key
from zsarchive.icechunk.storage import open_storage
from zsarchive.icechunk.values import from_flexbuffer, from_msgpack
from toolkit.places import ROOT


def test_spec_example_id():
    raw = bytes.fromhex("0b1cc8d6787580f0e33a6534")
    assert ids.encode(raw) == "1CECHNKREP0F1RSTCMT0"
    assert ids.decode("1CECHNKREP0F1RSTCMT0", 12) == raw


def test_node_id_length_and_padding():
    assert ids.encode(bytes(8)) == "0" * 13
    assert ids.encode(b"\xff" * 8) == "Z" * 12 + "Y"  # the last character: 4 data bits, then a zero pad bit
    with pytest.raises(ZSError, match="padding bits"):
        ids.decode("Z" * 13, 8)
    with pytest.raises(ZSError, match="expected 20 base32 characters"):
        ids.decode("ABC", 12)
    with pytest.raises(ZSError, match="'U' is not a Crockford base32 digit"):
        ids.decode("U" * 20, 12)
    assert ids.decode("1cechnkrep0f1rstcmt0", 12) == ids.decode("1CECHNKREP0F1RSTCMT0", 12)
    assert not ids.is_id("1cechnkrep0f1rstcmt0")


@given(st.sampled_from([12, 8]), st.data())
def test_the_canonical_spelling_is_the_one_encode_makes(nbytes, data):
    """``is_id`` (a pattern) says yes exactly to what ``encode`` makes of the id a text decodes to: never to
    lower case, a look-alike letter or a padding bit set, which decode to the same id (a second file name)."""
    raw = data.draw(st.binary(min_size=nbytes, max_size=nbytes))
    text = ids.encode(raw)
    assert ids.is_id(text, nbytes)
    spelled = data.draw(
        st.lists(
            st.sampled_from(ids.ALPHABET + ids.ALPHABET.lower() + "ILOilo"), min_size=len(text), max_size=len(text)
        ).map("".join)
    )
    try:
        canonical = ids.encode(ids.decode(spelled, nbytes)) == spelled
    except ZSError:
        canonical = False
    assert ids.is_id(spelled, nbytes) == canonical


@given(st.binary(min_size=12, max_size=12), st.binary(min_size=12, max_size=12))
def test_ids_round_trip_and_sort_like_bytes(a, b):
    assert ids.decode(ids.encode(a), 12) == a
    assert (ids.encode(a) < ids.encode(b)) == (a < b)


def test_component_wise_path_order():
    paths = ["/b", "/a-b", "/a/b", "/ab", "/a", "/"]
    assert sorted(paths, key=path_key) == ["/", "/a", "/a/b", "/a-b", "/ab", "/b"]
    assert [p for p in ["/", "/a", "/a/b", "/é"] if is_valid_path(p)] == ["/", "/a", "/a/b", "/é"]
    assert not any(is_valid_path(p) for p in ["", "a", "/a/", "//a", "/a/./b", "/a/../b"])


def test_values_decode_both_encodings():
    value = {"a": [1, 2.5, None, True, "x"], "nested": {"k": -3}}
    assert from_msgpack(msgpack.packb(value), "v") == value
    assert from_flexbuffer(flexbuffers.Dumps(value), "v") == value


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.floats(-3e38, 3e38) | st.text(),
    lambda inner: (
        st.lists(inner, max_size=5)
        | st.dictionaries(
            st.text(alphabet=st.characters(max_codepoint=127, blacklist_characters="\x00")), inner, max_size=5
        )
    ),
    max_leaves=20,
)


@given(_JSON)
def test_flexbuffers_decode_like_the_flatbuffers_library(value):
    """Our FlexBuffers reader agrees with the flatbuffers project's own encoder (ASCII keys: the
    only keys its Python encoder writes)."""
    assert from_flexbuffer(flexbuffers.Dumps(value), "v") == flexbuffers.Loads(flexbuffers.Dumps(value))


@given(st.binary(max_size=64))
def test_flexbuffers_any_bytes_decode_or_fail_cleanly(raw):
    try:
        from_flexbuffer(raw, "meta")
    except FlatBufferError as exc:
        assert str(exc).startswith("meta: ")


def test_flexbuffers_shared_values_cannot_blow_up():
    """Vectors whose 100 elements all point at the vector before (100**20 values from 6 kB) are refused."""
    u16 = lambda n: n.to_bytes(2, "little")  # noqa: E731
    buf = bytearray(u16(100))
    previous = len(buf)
    buf += bytes(200) + bytes(100)  # 100 inline nulls and their types
    for _level in range(20):
        buf += u16(100)
        start = len(buf)
        buf += b"".join(u16(start + 2 * i - previous) for i in range(100)) + bytes([(10 << 2) | 1] * 100)
        previous = start
    buf += u16(len(buf) - previous) + bytes([(10 << 2) | 1, 2])
    with pytest.raises(FlatBufferError, match="meta: .*far more values than its size allows"):
        from_flexbuffer(bytes(buf), "meta")


def test_bad_values_are_flatbuffer_errors():
    with pytest.raises(FlatBufferError, match="meta: not a valid MessagePack value"):
        from_msgpack(b"\xc1", "meta")
    with pytest.raises(FlatBufferError, match="meta: bytes is not a JSON-compatible value"):
        from_msgpack(msgpack.packb(b"raw"), "meta")
    with pytest.raises(FlatBufferError, match="meta: "):
        from_flexbuffer(b"\xff\xff\xff", "meta")


def test_format_time():
    assert format_time(0) == "1970-01-01T00:00:00.000000Z"
    assert format_time(1_795_312_520_495_477) == "2026-11-22T01:55:20.495477Z"


def test_storage_locations(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "x").write_bytes(b"1")
    for location in (str(tmp_path), "file://" + str(tmp_path), "file://localhost" + str(tmp_path)):
        storage = open_storage(location)
        assert storage.read("sub/x") == b"1"
        assert storage.read("missing") is None
        assert storage.list("sub/") == ["x"]
    with pytest.raises(ZSError, match="outside the repository"):
        open_storage(tmp_path).read("../etc/passwd")
    with pytest.raises(ZSError, match="unsupported location"):
        open_storage("ftp://example/repo")
    with pytest.raises(ZSError, match="a file:// URL names a local path"):
        open_storage("file://otherhost/repo")
    assert open_storage("https://example/repo").can_list is False  # no request until a read
    assert open_storage("s3://bucket/repo").can_list is True


def test_generated_code_is_what_the_schemas_give(tmp_path):
    out = tmp_path / "generated"
    subprocess.run([str(ROOT / "scripts" / "gen_flatbuffers.sh"), str(out)], check=True, capture_output=True)
    committed = ROOT / "zsarchive" / "icechunk" / "generated"
    names = sorted(p.name for p in out.iterdir() if p.suffix == ".py")
    assert names == sorted(p.name for p in committed.iterdir() if p.suffix == ".py")
    for name in names:
        assert (out / name).read_bytes() == (committed / name).read_bytes(), name
    assert all(
        "CheckedTable(buf, pos)" in (out / n).read_text()
        for n in names
        if n != "__init__.py" and "def Init(" in (out / n).read_text()
    )
