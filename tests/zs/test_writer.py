"""ZSWriter and ``zs make``: round trips through our reader and validator, errors, memory bound."""

from __future__ import annotations

import io
import struct
import tracemalloc

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from toolkit.syscalls import short_writev
from zsarchive import ZS, ZSCorrupt, ZSError, ZSWriter
from zsarchive.cli import main
from zsarchive.zs.format import uleb128
from zsarchive.zs.format.block import decode_index, split_block
from zsarchive.zs.format.codecs import decoder_for
from zsarchive.zs.format.header import MAGIC, PARTIAL_MAGIC
from zsarchive.zs.validate import validate
from zsarchive.zs.index_builder import shortest_separator

CODECS = ["none", "deflate", "lzma", "zstd"]


def ngram_records(n: int) -> list[bytes]:
    """Sorted, distinct, text-like records with shared prefixes."""
    return sorted({f"w{i % 97:02d} x{(i * 7919) % 1013:04d} {i}\t{i % 13}".encode() for i in range(n)})


def write(path, records, **kw) -> None:
    kw.setdefault("include_default_metadata", False)
    with ZSWriter(path, kw.pop("metadata", {}), **kw) as w:
        w.add_records(records)
        w.finish()


def read_all(path) -> list[bytes]:
    with ZS(path) as z:
        return list(z)


def root_keys(path) -> list[bytes]:
    with ZS(path) as z:
        off, length, codec = z.root_index_offset, z.root_index_length, z.codec
    raw = open(path, "rb").read()[off : off + length]
    level, zpayload = split_block(raw, "root")
    assert level >= 1
    return [e.key for e in decode_index(decoder_for(codec)(zpayload), "root")]


def magic(path) -> bytes:
    with open(path, "rb") as f:
        return f.read(8)


# ---- round trips -------------------------------------------------------------------------------


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("block_size,branching", [(100, 2), (300, 3), (393216, 1024)])
def test_round_trip_every_codec_and_shape(tmp_path, codec, block_size, branching):
    records = ngram_records(3000)
    path = tmp_path / "f.zs"
    write(path, records, codec=codec, approx_block_size=block_size, branching_factor=branching)
    assert magic(path) == MAGIC
    assert read_all(path) == records
    report = validate(str(path))
    assert report.records == len(records)
    if block_size == 100:
        assert report.root_index_level >= 5  # branching factor 2 over ~300 blocks: a deep index
    with ZS(path) as z:
        assert z.codec == {"lzma": "lzma2;dsize=2^20"}.get(codec, codec)
        for probe in records[::97]:
            assert list(z.search(prefix=probe)) == [probe]
        assert list(z.search(start=records[10], stop=records[20])) == records[10:20]


def test_add_file_contents_terminators_and_length_prefixes(tmp_path):
    records = sorted({bytes([i % 7, 10, 0, i % 251]) * (i % 5 + 1) for i in range(2000)})
    records += [records[-1]] * 3  # duplicates
    uleb = b"".join(uleb128.encode(len(r)) + r for r in records)
    u64 = b"".join(struct.pack("<Q", len(r)) + r for r in records)
    for kind, data in [("uleb128", uleb), ("u64le", u64)]:
        path = tmp_path / f"{kind}.zs"
        with ZSWriter(path, {}, approx_block_size=500, codec="deflate") as w:
            w.add_file_contents(io.BytesIO(data), length_prefixed=kind)
            w.finish()
        assert read_all(path) == records
        validate(str(path))
    text = [r for r in ngram_records(500)]
    for term in [b"\n", b"\r\n", b"\x00"]:
        path = tmp_path / f"t{term.hex()}.zs"
        with ZSWriter(path, {}, codec="none") as w:
            w.add_file_contents(io.BytesIO(term.join(text) + term), approx_block_size=64, terminator=term)
            w.finish()
        assert read_all(path) == text


def test_mixed_add_calls_keep_order(tmp_path):
    records = ngram_records(1000)
    path = tmp_path / "mixed.zs"
    with ZSWriter(path, {}, approx_block_size=200, branching_factor=3, codec="deflate") as w:
        w.add_record(records[0])
        w.add_records(records[1:300])
        w.add_data_block(records[300:310])
        w.add_data_block([])
        w.add_file_contents(io.BytesIO(b"\n".join(records[310:800]) + b"\n"))
        w.add_records(iter(records[800:]))
        w.finish()
    assert read_all(path) == records
    with ZS(path) as z:
        sizes = list(z.block_map(len))
    assert 10 in sizes  # add_data_block wrote exactly one block of its 10 records
    validate(str(path))


def test_parallelism_does_not_change_the_file(tmp_path):
    records = ngram_records(5000)
    blobs = []
    for j in (1, 3):
        path = tmp_path / f"j{j}.zs"
        write(path, records, codec="deflate", approx_block_size=700, branching_factor=4, parallelism=j)
        blobs.append(path.read_bytes())
    assert blobs[0] == blobs[1]


def test_huge_records_get_their_own_block(tmp_path):
    huge = b"m" * 5000
    records = [b"a", b"b", huge, huge + b"x", b"n", b"o"]
    for how in ("records", "terminated"):
        path = tmp_path / f"{how}.zs"
        with ZSWriter(path, {}, approx_block_size=1000, codec="deflate") as w:
            if how == "records":
                w.add_records(records)
            else:
                w.add_file_contents(io.BytesIO(b"\n".join(records) + b"\n"), approx_block_size=1000)
            w.finish()
        with ZS(path) as z:
            blocks = list(z.block_map(list))
        assert [huge] in blocks and [huge + b"x"] in blocks
        assert [r for b in blocks for r in b] == records
        validate(str(path))


def test_metadata_and_default_build_info(tmp_path):
    path = tmp_path / "m.zs"
    with ZSWriter(path, {"a": [1, "ü"], "n": None}, codec="none") as w:
        w.add_record(b"x")
        w.finish()
    with ZS(path) as z:
        meta = z.metadata
    assert meta["a"] == [1, "ü"] and meta["n"] is None
    assert set(meta["build-info"]) == {"user", "host", "time", "version"}
    assert meta["build-info"]["version"].startswith("zsarchive ")
    write(tmp_path / "plain.zs", [b"x"], metadata={"a": 1})
    with ZS(tmp_path / "plain.zs") as z:
        assert z.metadata == {"a": 1}
    own = tmp_path / "own.zs"
    with ZSWriter(own, {"build-info": "mine"}) as w:
        w.add_record(b"x")
        w.finish()
    with ZS(own) as z:
        assert z.metadata == {"build-info": "mine"}


# ---- index keys ---------------------------------------------------------------------------------


@given(st.binary(max_size=12), st.binary(max_size=12))
def test_shortest_separator_is_the_shortest_valid_key(a, b):
    previous, first = min(a, b), max(a, b)
    key = shortest_separator(previous, first)
    assert first.startswith(key)
    assert previous <= key <= first
    assert all(first[:n] < previous for n in range(len(key)))


def test_index_keys_are_short_separators(tmp_path):
    records = [f"{i:05d}".encode() + b"-a-long-tail" * 10 for i in range(400)]
    path = tmp_path / "k.zs"
    write(path, records, codec="none", approx_block_size=1000, branching_factor=64)
    keys = root_keys(path)
    assert keys[0] == b""
    assert 0 < max(map(len, keys)) <= 5  # the digits that tell blocks apart, not the tails
    validate(str(path))


def test_duplicates_across_block_boundaries(tmp_path):
    records = [b"a"] * 50 + [b"b"] * 200 + [b"b\x00"] * 3 + [b"c"]
    path = tmp_path / "d.zs"
    write(path, records, codec="deflate", approx_block_size=7, branching_factor=2)
    assert read_all(path) == records
    with ZS(path) as z:
        assert list(z.search(prefix=b"b")) == records[50:-1]
        assert list(z.search(start=b"b", stop=b"b\x00")) == [b"b"] * 200
    validate(str(path))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    records=st.lists(st.binary(max_size=40), min_size=1, max_size=120).map(sorted),
    block=st.integers(1, 200),
    branching=st.integers(2, 5),
    codec=st.sampled_from(["none", "deflate"]),
)
def test_any_sorted_multiset_round_trips(tmp_path_factory, records, block, branching, codec):
    path = tmp_path_factory.mktemp("p") / "p.zs"
    write(path, records, codec=codec, approx_block_size=block, branching_factor=branching, parallelism=2)
    assert read_all(path) == records
    validate(str(path))


# ---- errors -------------------------------------------------------------------------------------


@pytest.mark.parametrize("where", ["within a block", "across blocks"])
def test_unsorted_input_names_both_records_and_leaves_ztobe(tmp_path, where):
    records = ngram_records(400)
    bad = 250
    records[bad], records[bad + 1] = records[bad + 1], records[bad]
    path = tmp_path / "u.zs"
    block = 100000 if where == "within a block" else 1
    with pytest.raises(ZSError) as info:
        write(path, records, approx_block_size=block, codec="deflate")
    msg = str(info.value)
    assert "not sorted" in msg and "\n" not in msg
    assert f"record {bad + 2} {records[bad + 1]!r}" in msg
    assert f"record {bad + 1} {records[bad]!r}" in msg
    assert magic(path) == PARTIAL_MAGIC
    with pytest.raises(ZSCorrupt, match="partially written"):
        ZS(path)


def test_unsorted_file_contents_counts_records_across_blocks(tmp_path):
    lines = [f"{i:05d}".encode() for i in range(3000)]
    lines[2500] = b"00000"
    path = tmp_path / "u.zs"
    with pytest.raises(ZSError, match=r"record 2501 b'00000' sorts before record 2500 b'02499'"):
        with ZSWriter(path, {}, codec="none") as w:
            w.add_file_contents(io.BytesIO(b"\n".join(lines) + b"\n"), approx_block_size=600)
            w.finish()
    assert magic(path) == PARTIAL_MAGIC


@pytest.mark.parametrize("bad", ["unsorted", "not bytes"])
def test_a_stored_block_built_in_place_names_its_bad_record_counting_every_record_before(tmp_path, bad):
    """A stored data block is built by the caller, not a worker; its unsorted or non-bytes record is
    still named by its number among all records added, when its turn to be written comes."""
    before = [b"%04d" % i for i in range(300)]
    block: list = [b"0300", b"0302", b"0301"] if bad == "unsorted" else [b"0300", "0301"]
    match = {"unsorted": r"record 303 b'0301' sorts before record 302 b'0302'", "not bytes": r"record 302 is str"}[bad]
    path = tmp_path / "s.zs"
    with pytest.raises(ZSError, match=match):
        with ZSWriter(path, {}, codec="deflate", approx_block_size=100) as w:
            w.add_records(before)
            w.add_data_block(block, stored=True, key_length=4)
            w.finish()
    assert magic(path) == PARTIAL_MAGIC


def test_long_records_are_truncated_in_messages(tmp_path):
    with pytest.raises(ZSError) as info:
        write(tmp_path / "l.zs", [b"z" * 10000, b"a" * 10000])
    assert len(str(info.value)) < 400 and "10000 bytes" in str(info.value)


def test_non_bytes_records(tmp_path):
    with pytest.raises(ZSError, match="record 2 is str"):
        write(tmp_path / "s.zs", [b"a", "b"])
    with pytest.raises(ZSError, match="must be bytes, not int"):
        write(tmp_path / "i.zs", [b"a", 5])


@pytest.mark.parametrize(
    "kw,match",
    [
        ({"codec": "bzip2"}, "unknown codec 'bzip2'"),
        ({"codec": "deflate", "compress_level": 12}, "deflate compression level"),
        ({"codec": "lzma", "compress_level": "2"}, "lzma compression level"),
        ({"branching_factor": 1}, "branching_factor"),
        ({"approx_block_size": 0}, "approx_block_size"),
        ({"parallelism": 0}, "parallelism"),
    ],
)
def test_bad_settings_fail_before_creating_a_file(tmp_path, kw, match):
    path = tmp_path / "bad.zs"
    with pytest.raises(ZSError, match=match):
        ZSWriter(path, {}, **kw)
    assert not path.exists()


@pytest.mark.parametrize("metadata", [[1, 2], "x", None])
def test_metadata_must_be_an_object(tmp_path, metadata):
    with pytest.raises(ZSError, match="metadata must be a JSON object"):
        ZSWriter(tmp_path / "m.zs", metadata)
    with pytest.raises(ZSError, match="not JSON-serialisable"):
        ZSWriter(tmp_path / "m2.zs", {"x": object()})


def test_metadata_is_copied_and_text_input_refused(tmp_path):
    meta = {"nested": {"k": "v"}}
    path = tmp_path / "c.zs"
    with ZSWriter(path, meta, include_default_metadata=False) as w:
        meta["nested"]["k"] = "a much longer value than before"
        w.add_file_contents(io.BytesIO(b"a\n"))
        w.finish()
    with ZS(path) as z:
        assert z.metadata == {"nested": {"k": "v"}}
    for kw in ({}, {"length_prefixed": "uleb128"}):
        with pytest.raises(ZSError, match="open the input in binary mode"):
            with ZSWriter(tmp_path / f"t{len(kw)}.zs", {}) as w:
                w.add_file_contents(io.StringIO("a\n"), **kw)


def test_existing_output_is_never_overwritten(tmp_path):
    path = tmp_path / "exists.zs"
    path.write_bytes(b"precious")
    with pytest.raises(ZSError, match="exists already"):
        ZSWriter(path, {})
    assert path.read_bytes() == b"precious"
    with ZSWriter(path, {}, codec="none", overwrite=True) as w:
        w.add_record(b"a")
        w.finish()
    with ZS(str(path)) as z:
        assert list(z) == [b"a"]


def test_interrupted_writer_leaves_a_rejected_file(tmp_path):
    path = tmp_path / "i.zs"
    with pytest.raises(RuntimeError):
        with ZSWriter(path, {}, approx_block_size=50, codec="deflate") as w:
            w.add_records(ngram_records(2000))
            raise RuntimeError("power cut")
    assert magic(path) == PARTIAL_MAGIC
    with pytest.raises(ZSCorrupt, match="partially written"):
        ZS(path)
    with pytest.raises(ZSCorrupt, match="partially written"):
        validate(str(path))
    with pytest.raises(ZSError, match="closed"):
        w.add_record(b"zzz")


def test_leaving_with_without_finish_is_not_a_commit(tmp_path):
    path = tmp_path / "nf.zs"
    with ZSWriter(path, {}) as w:
        w.add_record(b"a")
    assert magic(path) == PARTIAL_MAGIC


def test_empty_input_is_refused(tmp_path):
    path = tmp_path / "e.zs"
    with pytest.raises(ZSError, match="no records were added"):
        with ZSWriter(path, {}) as w:
            w.add_file_contents(io.BytesIO(b""))
            w.finish()
    assert magic(path) == PARTIAL_MAGIC


@pytest.mark.parametrize(
    "data,kw,match",
    [
        (b"a\nb", {}, "does not end with the terminator"),
        (b"\x05ab", {"length_prefixed": "uleb128"}, r"input ends inside record 1 \(2 of 5 bytes"),
        (b"\x01a\x80", {"length_prefixed": "uleb128"}, "record 2"),
        (b"\x81\x00a", {"length_prefixed": "uleb128"}, "shortest form"),
        (b"\x01\x00\x00", {"length_prefixed": "u64le"}, "u64le length of record 1"),
        (struct.pack("<Q", 2**62), {"length_prefixed": "u64le"}, "input ends inside record 1"),
        (b"a\n", {"length_prefixed": "u32"}, "length_prefixed must be"),
        (b"a\n", {"terminator": b""}, "terminator must be"),
    ],
)
def test_bad_input_files(tmp_path, data, kw, match):
    path = tmp_path / "b.zs"
    src = io.BytesIO(data)
    with pytest.raises(ZSError, match=match):
        with ZSWriter(path, {}) as w:
            w.add_file_contents(src, **kw)
            w.finish()
    assert src.closed  # like the reference, the input is always closed
    assert magic(path) == PARTIAL_MAGIC


# ---- memory -------------------------------------------------------------------------------------


def _peak_while_writing(path, n: int) -> int:
    def records():
        for i in range(n):
            yield b"%09d some text to make the record longer" % i

    tracemalloc.start()
    try:
        # codec "none": a deflate state is ~0.36 MB, and whether two or three are alive at the
        # peak (two workers, index blocks on the main thread) is thread timing, not the writer
        with ZSWriter(path, {}, approx_block_size=1024, branching_factor=16, codec="none", parallelism=2) as w:
            w.add_records(records())
            w.finish()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_peak_memory_does_not_grow_with_input(tmp_path):
    _peak_while_writing(tmp_path / "warm-up.zs", 100)  # first-use allocations would pad "small"
    small = _peak_while_writing(tmp_path / "small.zs", 30_000)
    large = _peak_while_writing(tmp_path / "large.zs", 120_000)
    # Four times the input (6 MB, ~6,000 blocks): the same peak (~0.15 MB). Keeping one index
    # entry per block in memory instead would add ~0.6 MB here.
    assert large < small * 1.25 + 100 * 1024, (small, large)
    assert large < 2 * 1024 * 1024
    with ZS(tmp_path / "large.zs") as z:
        assert sum(z.block_map(len)) == 120_000


# ---- zs make -------------------------------------------------------------------------------------


def run(args, input=None):
    return CliRunner().invoke(main, args, input=input)


def test_cli_make_round_trip_and_options(tmp_path):
    records = ngram_records(2000)
    src = tmp_path / "in.txt"
    src.write_bytes(b"\n".join(records) + b"\n")
    out = tmp_path / "out.zs"
    res = run(
        [
            "make",
            "--codec",
            "deflate",
            "-z",
            "1",
            "--approx-block-size",
            "500",
            "--branching-factor",
            "3",
            "-j",
            "2",
            "--no-spinner",
            '{"about": "ngrams"}',
            str(src),
            str(out),
        ]
    )
    assert res.exit_code == 0, res.output
    with ZS(out) as z:
        assert list(z) == records
        assert z.metadata["about"] == "ngrams" and "build-info" in z.metadata
        assert z.root_index_level >= 3
    nul = tmp_path / "nul.zs"
    res = run(
        ["make", "--terminator", r"\x00", "--no-default-metadata", "--codec", "zstd", "{}", "-", str(nul)],
        input=b"\x00".join(records) + b"\x00",
    )
    assert res.exit_code == 0, res.output
    with ZS(nul) as z:
        assert list(z) == records and z.metadata == {} and z.codec == "zstd"
    lp = tmp_path / "lp.zs"
    binary = sorted({bytes([i % 256, 0, 10]) * (i % 3 + 1) for i in range(600)})
    res = run(
        ["make", "--length-prefixed=uleb128", "{}", "-", str(lp)],
        input=b"".join(uleb128.encode(len(r)) + r for r in binary),
    )
    assert res.exit_code == 0, res.output
    assert read_all(lp) == binary


@pytest.mark.parametrize(
    "args,code,match",
    [
        (["[1]"], 2, "must be a JSON object"),
        (["{"], 2, "not valid JSON"),
        (["--codec", "bz2", "{}"], 2, "bz2"),
        (["--terminator", "x", "--length-prefixed", "u64le", "{}"], 2, "cannot be used together"),
        (["-j", "0", "{}"], 2, "number >= 1"),
        (["-z", "x", "--codec", "deflate", "{}"], 1, "zs: error: deflate compression level"),
        (["--terminator", "", "{}"], 1, "zs: error: terminator must be a non-empty"),
    ],
)
def test_cli_make_usage_errors(tmp_path, args, code, match):
    src = tmp_path / "in.txt"
    src.write_bytes(b"a\nb\n")
    res = run(["make", *args, str(src), str(tmp_path / "o.zs")])
    assert res.exit_code == code
    assert match in res.output
    assert "Traceback" not in res.output


def test_cli_make_unsorted_and_empty(tmp_path):
    res = run(["make", "{}", "-", str(tmp_path / "u.zs")], input=b"b\na\n")
    assert res.exit_code == 1
    assert res.output.strip() == (
        "zs: error: records are not sorted: record 2 b'a' sorts before record 1 b'b' "
        "(records count from 1; input must be sorted bytewise)"
    )
    res = run(["make", "{}", "-", str(tmp_path / "e.zs")], input=b"")
    assert res.exit_code == 1 and f"{tmp_path / 'e.zs'}: no records were added" in res.output
    assert list(tmp_path.iterdir()) == []  # a failed make leaves no file, partial or not
    (tmp_path / "x.zs").write_bytes(b"taken")
    res = run(["make", "{}", "-", str(tmp_path / "x.zs")], input=b"a\n")
    assert (
        res.output
        == f"zs: error: {tmp_path / 'x.zs'}: exists already; give a new name, or --force (overwrite=True) to replace it\n"
    )
    res = run(["make", "{}", str(tmp_path / "missing.txt"), str(tmp_path / "m.zs")])
    assert res.exit_code == 1 and "cannot open" in res.output
    assert not (tmp_path / "m.zs").exists()
    assert res.output.count("\n") == 1


@pytest.mark.parametrize(
    "framing,data", [("uleb128", uleb128.encode(2**60) + b"ab"), ("u64le", struct.pack("<Q", 2**62) + b"ab")]
)
def test_cli_make_bogus_huge_length_prefix_is_one_line_not_memory_error(tmp_path, framing, data):
    res = run(["make", f"--length-prefixed={framing}", "{}", "-", str(tmp_path / "h.zs")], input=data)
    assert res.exit_code == 1 and isinstance(res.exception, SystemExit)
    assert res.output.startswith("zs: error: ") and res.output.count("\n") == 1
    assert res.output.endswith(
        ": input ends inside record 1 (2 of %d bytes present)\n" % (2**60 if framing == "uleb128" else 2**62)
    )
    assert list(tmp_path.iterdir()) == []


def test_cli_make_and_dump_keep_huge_records_and_nul_newline_bytes(tmp_path):
    records = sorted([b"a\x00b", b"a\nb", b"\n", b"\x00", b"m" * 300_000, b"z\r\n"])
    src = b"".join(struct.pack("<Q", len(r)) + r for r in records)
    out = tmp_path / "b.zs"
    res = run(["make", "--length-prefixed=u64le", "--approx-block-size=1000", "{}", "-", str(out)], input=src)
    assert res.exit_code == 0, res.output
    with ZS(out) as z:
        assert [b"m" * 300_000] in list(z.block_map(list))  # larger than a block: a block of its own
    res = run(["dump", "--length-prefixed=u64le", str(out)])
    assert res.exit_code == 0 and res.stdout_bytes == src
    res = run(["dump", "--terminator=\\x00\\n", "--prefix=a", str(out)])
    assert res.stdout_bytes == b"a\x00b\x00\na\nb\x00\n"


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.lists(st.binary(max_size=90), min_size=1, max_size=120),
    st.lists(st.integers(0, 40), max_size=8),
    st.integers(1, 200),
)
def test_record_lists_make_the_same_file_as_single_records(tmp_path_factory, records, cuts, block):
    """add_record_lists cuts blocks a list at a time; the file must be byte for byte what add_records writes
    (lists of any sizes, records larger than a block, a block carried from one list into the next)."""
    records = sorted(records)
    bounds = sorted({0, len(records), *[min(c, len(records)) for c in cuts]})
    lists = [records[a:b] for a, b in zip(bounds, bounds[1:])] + [[]]
    tmp = tmp_path_factory.mktemp("lists")
    blobs = []
    for name, add in (("one", lambda w: w.add_records(records)), ("lists", lambda w: w.add_record_lists(lists))):
        with ZSWriter(
            str(tmp / f"{name}.zs"),
            {},
            approx_block_size=block,
            branching_factor=3,
            codec="none",
            parallelism=1,
            include_default_metadata=False,
        ) as w:
            add(w)
            w.finish()
        blobs.append((tmp / f"{name}.zs").read_bytes())
    assert blobs[0] == blobs[1]
    with ZS(str(tmp / "lists.zs")) as z:
        assert list(z) == records


def test_record_lists_refuse_non_bytes(tmp_path):
    with pytest.raises(ZSError, match="must be bytes, not int"):
        with ZSWriter(str(tmp_path / "x.zs"), {}) as w:
            w.add_record_lists([[b"a"], [b"b", 5]])


def test_the_file_goes_to_the_disk_as_it_is_written(tmp_path, monkeypatch):
    """Every WRITE_BACK bytes the writer asks the kernel to start writing the range it has not asked
    for yet (contiguous ranges from the file's start); stored and compressed blocks alike, the file
    reads back whole, also when each writev writes less than asked (a stored block's records go out
    in one, the rest following)."""
    from zsarchive.io import outfile
    from zsarchive.zs import writer as writer_module

    calls = []
    real = outfile._sync_file_range()
    assert real is not None  # Linux: sync_file_range is there

    def recording(fd, offset, length, flags):
        calls.append((offset, length, flags))
        return real(fd, offset, length, flags)

    monkeypatch.setattr(writer_module, "WRITE_BACK", 50_000)
    monkeypatch.setattr(outfile, "_sync_file_range", lambda: recording)
    asked = short_writev(monkeypatch, 5000)
    records = [b"%06d " % i + bytes(range(256)) * (i % 7) for i in range(3000)]
    path = tmp_path / "f.zs"
    with ZSWriter(path, {}, codec="deflate", approx_block_size=4000) as w:
        w.add_records(records[:1000])
        w.add_data_block(records[1000:1010], stored=True, key_length=7)
        w.add_records(records[1010:])
        w.finish()
    size = path.stat().st_size
    assert len(calls) >= 3 and calls[0][0] == 0 and all(flags == 2 for _, _, flags in calls)
    assert all(a + n == b for (a, n, _), (b, _, _) in zip(calls, calls[1:]))
    assert all(n >= 50_000 for _, n, _ in calls) and calls[-1][0] + calls[-1][1] <= size
    assert max(asked) > 1  # the stored block: many buffers a call
    with ZS(str(path)) as z:
        assert list(z) == records
    validate(str(path))
