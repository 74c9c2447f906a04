"""zsarchive.ZS on its own: opening checks, lookups through the caches, scans, threads, errors.

Files come from ZSWriter (big, deep) or tests/zsfiles.FileBuilder (hand-laid, broken on purpose);
interop with the reference lives in test_interop_reader.py.
"""

from __future__ import annotations

import io
import math
import random
import struct
import threading

import pytest
from click.testing import CliRunner

import zsarchive.zs.blocks as blocks_module
import zsarchive.zs.pipeline as pipeline_module
from toolkit.places import TESTDATA
from toolkit.cli import one_line_error, run_zs
from toolkit.zsheader import with_header_field
from zsarchive import ZS, ZSCorrupt, ZSError, ZSWriter
from zsarchive.cli import main
from zsarchive.zs.format import uleb128
from zsarchive.zs.format.header import PARTIAL_MAGIC
from zsarchive.io import LocalFile
from toolkit.zsfiles import FileBuilder, block_extents, minimal

LETTERS = TESTDATA / "interop" / "letters-deflate.zs"


def _records(n: int, seed: int = 7) -> list[bytes]:
    rng = random.Random(seed)
    recs = [b"%s-%d" % (rng.choice([b"apple", b"banana", b"cherry", b"date"]), rng.randrange(10**6)) for _ in range(n)]
    recs += recs[: n // 20]  # duplicates
    return sorted(recs)


def write(path, records, **kw):
    kw.setdefault("codec", "deflate")
    with ZSWriter(path, {"test": True}, **kw) as w:
        w.add_records(records)
        w.finish()
    return path


@pytest.fixture(scope="module")
def deep(tmp_path_factory):
    """~20k records in ~190 small blocks under a branching-factor-3 index (root level 5+)."""
    records = _records(20_000)
    path = write(tmp_path_factory.mktemp("reader") / "deep.zs", records, approx_block_size=2000, branching_factor=3)
    return path, records


class RecordingTransport(LocalFile):
    """A local file that logs every read, to check what the reader asks for."""

    def __init__(self, path) -> None:
        super().__init__(str(path))
        self.log: list[tuple] = []

    def read(self, offset, length):
        self.log.append(("read", offset, length))
        return super().read(offset, length)

    def read_head_tail(self, head, tail):
        self.log.append(("head_tail", head, tail))
        head, tail = min(head, self.size), min(tail, self.size)
        return LocalFile.read(self, 0, head), LocalFile.read(self, self.size - tail, tail)


def _expected(records, start=None, stop=None, prefix=None):
    return [
        r
        for r in records
        if (start is None or r >= start) and (stop is None or r < stop) and (prefix is None or r.startswith(prefix))
    ]


# ---- opening ------------------------------------------------------------------------------------


def test_open_is_one_head_tail_read(deep):
    path, records = deep
    t = RecordingTransport(path)
    with ZS(t) as z:
        assert t.log == [("head_tail", blocks_module.HEAD_GUESS, blocks_module.TAIL_GUESS)]
        assert z.metadata["test"] is True and z.codec == "deflate"
        assert z.root_index_level >= 5
        assert z.total_file_length == path.stat().st_size
        assert z.stats.block_reads == 1 and z.stats.transport_reads == 1


def test_root_outside_the_tail_is_one_exact_read(deep, monkeypatch):
    path, _ = deep
    monkeypatch.setattr(blocks_module, "TAIL_GUESS", 16)
    t = RecordingTransport(path)
    with ZS(t) as z:
        assert t.log[1:] == [("read", z.root_index_offset, z.root_index_length)]


def test_header_longer_than_the_first_read(tmp_path):
    meta = {"big": "x" * (blocks_module.HEAD_GUESS + 5000)}
    b = minimal(FileBuilder(metadata=meta))
    path = tmp_path / "bigheader.zs"
    path.write_bytes(b.build())
    t = RecordingTransport(path)
    with ZS(t) as z:
        assert z.metadata == meta and list(z) == [b"a", b"b", b"c", b"d"]
        assert t.log[1][:2] == ("read", 0)


def test_accepts_file_objects_transports_and_file_urls(deep):
    path, records = deep
    with open(path, "rb") as f, ZS(f) as z:
        assert list(z.search(prefix=b"cherry-1")) == _expected(records, prefix=b"cherry-1")
    with ZS(url=f"file://{path}") as z:
        assert z.root_index_length > 0
    t = LocalFile(str(path))
    with ZS(t) as z:
        pass
    assert t.read(0, 2)  # a caller's transport stays open after close()


# ---- lookups and caches -------------------------------------------------------------------------


def test_point_lookup_reads_one_block_per_level(deep):
    path, records = deep
    t = RecordingTransport(path)
    with ZS(t, index_block_cache=0, data_block_cache=0) as z:
        rng = random.Random(3)
        for record in rng.sample(records, 30):
            before = len(t.log)
            assert list(z.search(prefix=record)) == _expected(records, prefix=record)
            reads = t.log[before:]
            # root cached; one read per lower index level, then one or two data blocks (the block
            # before the first key >= needle may also hold it)
            assert z.root_index_level <= len(reads) <= z.root_index_level + 1
            for _, offset, length in reads:  # each read is exactly one whole block
                n, p = uleb128.decode(t.read(offset, 10), 0)
                assert p + n + 8 == length


def test_repeated_lookups_do_not_decompress_again(deep):
    path, records = deep
    with ZS(path, index_block_cache=200) as z:
        sample = random.Random(5).sample(records, 200)
        first = [list(z.search(prefix=r)) for r in sample]
        stats = z.stats.snapshot()
        second = [list(z.search(prefix=r)) for r in sample]
        after = z.stats.snapshot()
        assert first == second == [_expected(records, prefix=r) for r in sample]
        assert after["decompressions"] == stats["decompressions"]
        assert after["block_reads"] == stats["block_reads"]
        assert after["data_cache_hits"] > stats["data_cache_hits"]


def test_data_block_cache_is_bounded(deep):
    path, records = deep
    with ZS(path, data_block_cache=0) as z:
        list(z.search(prefix=records[100]))
        n = z.stats.decompressions
        list(z.search(prefix=records[100]))
        assert z.stats.decompressions > n  # nothing kept
    with ZS(path, data_block_cache=20_000) as z:
        for r in records[::50]:
            list(z.search(prefix=r))
        assert 0 < z._blocks.data_cache.weight <= 20_000


def test_random_searches_match_a_filtered_list(deep):
    path, records = deep
    rng = random.Random(11)
    probes = [b"", b"a", b"b", b"banana-5", b"cherry-", b"date-999999", b"e", b"\xff", b"apple-\xff"]
    with ZS(path) as z:
        for _ in range(150):
            q = {
                k: rng.choice(probes + [rng.choice(records)[: rng.randint(0, 12)]])
                for k in ("start", "stop", "prefix")
                if rng.random() < 0.6
            }
            assert list(z.search(**q)) == _expected(records, **q), q


def test_prefix_of_ff_bytes_and_empty_ranges(tmp_path):
    recs = sorted([b"\xff", b"\xff\xff", b"\xff\xff\x00", b"\xfe\xff", b"a\xff", b"a\xff\x01", b"b"])
    path = write(tmp_path / "ff.zs", recs, approx_block_size=3)
    with ZS(path) as z:
        for prefix in (b"\xff", b"\xff\xff", b"a\xff", b"\xfe"):
            assert list(z.search(prefix=prefix)) == _expected(recs, prefix=prefix)
        assert list(z.search(start=b"b", stop=b"a")) == []
        assert list(z.search(start=b"b", stop=b"b")) == []


def test_search_arguments_must_be_bytes(deep):
    with ZS(deep[0]) as z:
        with pytest.raises(ZSError, match="start must be bytes"):
            z.search(start="apple")
        assert list(z.search(prefix=bytearray(b"date-99"))) == list(z.search(prefix=b"date-99"))
        for terminator in (None, "\n"):  # a bound may be absent, a terminator not
            with pytest.raises(ZSError, match=f"terminator must be bytes, not {type(terminator).__name__}"):
                z.dump(io.BytesIO(), terminator=terminator)


# ---- scans --------------------------------------------------------------------------------------


def test_scans_read_runs_of_blocks(deep, monkeypatch):
    path, records = deep
    data = path.read_bytes()
    for first_run in (pipeline_module.FIRST_RUN_BYTES, 4096):
        monkeypatch.setattr(pipeline_module, "FIRST_RUN_BYTES", first_run)
        t = RecordingTransport(path)
        with ZS(t) as z:
            assert list(z) == records
            runs, index_reads = [], 0
            for _, offset, length in t.log[1:]:
                _, p = uleb128.decode(data, offset)
                if data[p] == 0:  # a run starts with a data block
                    runs.append(length)
                else:
                    index_reads += 1
            assert z.stats.block_reads - 1 - index_reads > 100  # data blocks
            # index blocks interleaved with data blocks are read through, not split on; runs double
            assert len(runs) <= 2 + math.log2(1 + sum(runs) / first_run)
            assert max(runs) <= pipeline_module.RUN_BYTES


def test_scans_read_the_next_run_while_the_caller_consumes_this_one(deep, monkeypatch):
    """Read-ahead: the first record reaches the caller only after the second run of data blocks
    was asked for (a scan that read only on demand would keep the caller waiting here)."""
    path, records = deep
    data = path.read_bytes()
    monkeypatch.setattr(pipeline_module, "FIRST_RUN_BYTES", 4096)
    second_run = threading.Event()

    class Logged(RecordingTransport):
        def read(self, offset, length):
            _, p = uleb128.decode(data, offset)
            if data[p] == 0 and any(
                entry[0] == "read" and data[uleb128.decode(data, entry[1])[1]] == 0 for entry in self.log
            ):
                second_run.set()
            return super().read(offset, length)

    with ZS(Logged(path), parallelism=2) as z:
        scan = z.search(start=b"banana")
        first = next(scan)
        assert second_run.wait(10)
        assert [first, *scan] == _expected(records, start=b"banana")


def test_block_map_and_exec(deep):
    path, records = deep
    for parallelism in (0, 2):
        with ZS(path, parallelism=parallelism) as z:
            sizes = list(z.block_map(len, start=b"banana", stop=b"date"))
            assert sum(sizes) == len(_expected(records, start=b"banana", stop=b"date"))
            joined = list(
                z.block_map(
                    lambda recs, sep, end=b"": sep.join(recs) + end,
                    prefix=b"cherry",
                    args=(b",",),
                    kwargs={"end": b";"},
                )
            )
            blocks = list(z.block_map(list, prefix=b"cherry"))
            assert len(blocks) > 1 and b"".join(joined).split(b";")[:-1] == [b",".join(g) for g in blocks]
            seen = []
            z.block_exec(seen.extend, prefix=b"apple")
            assert sorted(seen) == _expected(records, prefix=b"apple")


@pytest.mark.parametrize(
    "span",
    [
        {"start": b"banana", "stop": b"date"},
        {"prefix": b"cherry"},
        {"prefix": b"apple"},
        {"start": b"cherry-5"},
        {"stop": b"apple-2"},
        {"start": b"zzz"},
        {},
    ],
)
def test_block_spans_hold_the_records_block_map_gives(deep, span):
    """block_spans: the same records, block by block, as payload spans (trimmed at both ends of the range)."""
    path, records = deep
    for parallelism in (0, 2):
        with ZS(path, parallelism=parallelism) as z:
            spans = [[payload[s:e] for s, e in zip(starts, ends)] for payload, starts, ends in z.block_spans(**span)]
            assert spans == list(z.block_map(list, **span))
            assert [r for block in spans for r in block] == _expected(records, **span)


def test_block_map_errors_propagate_unchanged(deep):
    def boom(records):
        raise KeyError("user code")

    with ZS(deep[0]) as z:
        with pytest.raises(KeyError, match="user code"):
            list(z.block_map(boom))


def test_nested_scans_from_block_map_do_not_deadlock(deep):
    path, records = deep
    with ZS(path, parallelism=1) as z:
        counts = list(z.block_map(lambda recs: len(list(z.search(start=recs[0], stop=b"banana"))), stop=b"apple-2"))
        assert counts and all(c > 0 for c in counts)


@pytest.mark.parametrize("length_prefixed", [None, "uleb128", "u64le"])
def test_dump_ranges(deep, length_prefixed):
    path, records = deep
    with ZS(path) as z:
        for sel in ({}, {"prefix": b"banana-2"}, {"start": b"apple-5", "stop": b"cherry-3"}):
            out = io.BytesIO()
            z.dump(out, terminator=b"<>", length_prefixed=length_prefixed, **sel)
            recs = _expected(records, **sel)
            if length_prefixed is None:
                assert out.getvalue() == b"".join(r + b"<>" for r in recs)
            elif length_prefixed == "u64le":
                assert out.getvalue() == b"".join(struct.pack("<Q", len(r)) + r for r in recs)
            else:
                assert out.getvalue() == b"".join(uleb128.encode(len(r)) + r for r in recs)
        with pytest.raises(ZSError, match="length_prefixed"):
            z.dump(io.BytesIO(), length_prefixed="u32")


def test_dump_progress_reaches_the_data_size(deep):
    path, _ = deep
    done = []
    with ZS(path) as z:
        z.dump(io.BytesIO(), progress=done.append)
        assert 0.5 * z.root_index_offset < sum(done) < z.total_file_length


# ---- threads and lifetime -----------------------------------------------------------------------


def test_many_threads_share_one_reader(deep):
    path, records = deep
    errors = []
    with ZS(path, data_block_cache=200_000) as z:

        def work(seed):
            try:
                rng = random.Random(seed)
                for _ in range(40):
                    r = rng.choice(records)
                    q = (
                        {"prefix": r[: rng.randint(3, len(r))]}
                        if rng.random() < 0.8
                        else {"start": r, "stop": r + b"1"}
                    )
                    assert list(z.search(**q)) == _expected(records, **q)
                out = io.BytesIO()
                z.dump(out, prefix=b"date")
                assert out.getvalue() == b"".join(r + b"\n" for r in _expected(records, prefix=b"date"))
            except BaseException as exc:  # reported below
                errors.append(exc)

        threads = [threading.Thread(target=work, args=(i,)) for i in range(6)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
    assert errors == []


def test_close_stops_iterators_and_refuses_new_work(deep):
    path, _ = deep
    z = ZS(path)
    it = iter(z)
    next(it)
    z.close()
    z.close()  # idempotent
    assert len(list(it)) < 20_000
    with pytest.raises(ZSError, match="closed"):
        z.search()
    assert "closed" in repr(z)


def test_closing_under_a_running_scan_raises_nothing_foreign(deep):
    path, _ = deep
    for parallelism in (0, 2):
        for delay in range(6):
            z = ZS(path, parallelism=parallelism, data_block_cache=0)
            outcome = []

            def scan():
                try:
                    for i, _ in enumerate(z.search(start=b"b")):
                        if i == delay * 500:
                            closer.start()
                    outcome.append("done")
                except ZSError as exc:
                    outcome.append(exc)
                except BaseException as exc:  # the assertion below reports it
                    outcome.append(("foreign", exc))

            closer = threading.Thread(target=z.close)
            scanner = threading.Thread(target=scan)
            scanner.start()
            scanner.join()
            closer.join()
            assert len(outcome) == 1 and not isinstance(outcome[0], tuple), outcome


def test_constructor_arguments(deep):
    with pytest.raises(ZSError, match="exactly one"):
        ZS()
    with pytest.raises(ZSError, match="exactly one"):
        ZS(deep[0], url="file:///x")
    with pytest.raises(ZSError, match="parallelism"):
        ZS(deep[0], parallelism=-1)
    with pytest.raises(ZSError, match="cannot open"):
        ZS("/nonexistent/file.zs")


# ---- bad files ----------------------------------------------------------------------------------


def _file(tmp_path, data: bytes, name="bad.zs"):
    path = tmp_path / name
    path.write_bytes(data)
    return path


def _open_all(path):
    with ZS(path) as z:
        return list(z)


GOOD = LETTERS.read_bytes()


@pytest.mark.parametrize(
    "data, message",
    [
        (PARTIAL_MAGIC + GOOD[8:], "offset 0: ZStoBe magic: this file was only partially written"),
        (b"hello, world\n" * 10, "offset 0: bad magic"),
        (b"", "too short"),
        (GOOD[:12], "header length"),
        (GOOD[:100], "runs past the end"),
        (GOOD[:-1], "offset 32: header says the file is 904 bytes, but it is 903"),
        (GOOD + b"\0", "offset 32: header says the file is 904 bytes, but it is 905"),
        (GOOD[:200] + bytes([GOOD[200] ^ 1]) + GOOD[201:], "header CRC mismatch"),
        (with_header_field(GOOD, 72, b"bzip2\0\0\0"), "offset 72: unknown codec 'bzip2'"),
        (with_header_field(GOOD, 8, struct.pack("<Q", 2**62)), "offset 8: header length"),
        (
            with_header_field(GOOD, 16, struct.pack("<Q", 10)),
            "offset 16: root index block (29 bytes at offset 10) lies outside",
        ),
        (with_header_field(GOOD, 24, struct.pack("<Q", 2**60)), "offset 16: root index block"),
    ],
)
def test_bad_headers_are_one_line_errors(tmp_path, data, message):
    path = _file(tmp_path, data)
    with pytest.raises(ZSCorrupt) as info:
        _open_all(path)
    text = str(info.value)
    assert message in text and str(path) in text and "\n" not in text
    for command in ("dump", "info"):
        result = CliRunner().invoke(main, [command, str(path)])
        assert result.exit_code == 1 and isinstance(result.exception, SystemExit)
        assert result.stderr == f"zs: error: {text}\n" and result.stdout == ""


def test_metadata_must_be_an_object(tmp_path):
    path = _file(tmp_path, minimal(FileBuilder(metadata=[1, 2])).build())
    with pytest.raises(ZSCorrupt, match="metadata is JSON but not an object"):
        ZS(path)


def test_root_must_be_an_index_block(tmp_path):
    b = FileBuilder()
    d = b.data_block([b"a"])
    path = _file(tmp_path, b.build(root=d))
    with pytest.raises(ZSCorrupt, match=f"block at offset {d[0]}: the root must be an index block"):
        ZS(path)


def test_wrong_child_level_and_bad_extents(tmp_path):
    b = FileBuilder()
    d = b.data_block([b"a"])
    i1 = b.index_block(1, [(b"a", *d)])
    b.root_block(3, [(b"a", *i1)])  # level 3 over level 1
    with pytest.raises(ZSCorrupt, match=f"block at offset {i1[0]}: expected an index block \\(level 2\\)"):
        _open_all(_file(tmp_path, b.build()))
    b = FileBuilder()
    d = b.data_block([b"a"])
    b.root_block(1, [(b"a", d[0], d[1] + 1000)])
    with pytest.raises(ZSCorrupt, match="index entry 0 points at offset .* outside the blocks area"):
        _open_all(_file(tmp_path, b.build()))
    b = FileBuilder()
    d1 = b.data_block([b"a"])
    d2 = b.data_block([b"b"])
    b.root_block(1, [(b"b", *d1), (b"a", *d2)])
    with pytest.raises(ZSCorrupt, match="index keys out of order: entry 1 key"):
        _open_all(_file(tmp_path, b.build()))


def test_bad_data_payloads(tmp_path):
    for payload, message in [
        (b"", "holds no records"),
        (b"\x05ab", "runs past the end"),
        (b"\x80\x00", "not in shortest form"),
    ]:
        b = FileBuilder()
        d = b.raw_block(0, payload)
        b.root_block(1, [(b"", *d)])
        path = _file(tmp_path, b.build())
        with pytest.raises(ZSCorrupt, match=message):
            _open_all(path)
        with ZS(path) as z:  # the scan path as well as the lookup path
            with pytest.raises(ZSCorrupt, match=f"block at offset {d[0]}"):
                z.dump(io.BytesIO())


def test_every_bit_flip_and_truncation_is_caught_or_harmless(tmp_path):
    good = GOOD
    expected = _open_all(LETTERS)
    path = tmp_path / "flip.zs"
    for i in range(len(good)):
        for data in (good[:i] + bytes([good[i] ^ (1 << (i % 8))]) + good[i + 1 :], good[:i]):
            path.write_bytes(data)
            try:
                got = _open_all(path)
                with ZS(path, parallelism=0) as z:
                    dumped = io.BytesIO()
                    z.dump(dumped)
            except ZSCorrupt as exc:
                assert str(path) in str(exc)
            else:
                assert got == expected and dumped.getvalue() == b"".join(r + b"\n" for r in expected), i


def test_block_crc_is_checked_on_every_read(tmp_path):
    data = bytearray(GOOD)
    offset, length, level = block_extents(GOOD, 16 + struct.unpack_from("<Q", GOOD, 8)[0] + 8)[0]
    assert level == 0
    data[offset + length - 9] ^= 0x40  # last payload byte of the first data block
    path = _file(tmp_path, bytes(data))
    with ZS(path) as z:
        with pytest.raises(ZSCorrupt, match=f"block at offset {offset}: block CRC mismatch"):
            list(z.search(prefix=b"b"))


# ---- command line -------------------------------------------------------------------------------


def test_cli_errors_are_one_line_without_traceback(tmp_path):
    bad = _file(tmp_path, PARTIAL_MAGIC + GOOD[8:])
    for args in (["dump", str(bad)], ["info", str(bad)], ["info", str(tmp_path / "missing.zs")]):
        one_line_error(run_zs(*args))


@pytest.mark.parametrize(
    "args",
    [
        ["--terminator", "x", "--length-prefixed", "u64le"],
        ["-j", "many"],
        ["--start", "\\x4"],
        ["--length-prefixed", "u32"],
    ],
)
def test_cli_usage_errors_exit_2(args):
    result = CliRunner().invoke(main, ["dump", *args, str(LETTERS)])
    assert result.exit_code == 2, result.output


def test_cli_dump_to_file_and_info(tmp_path, deep):
    path, records = deep
    out = tmp_path / "out.txt"
    result = CliRunner().invoke(main, ["dump", "--prefix", "apple-1", "-o", str(out), "-j", "1", str(path)])
    assert result.exit_code == 0
    assert out.read_bytes() == b"".join(r + b"\n" for r in _expected(records, prefix=b"apple-1"))
    result = CliRunner().invoke(main, ["info", str(path)])
    assert '"root_index_level": ' in result.output and '"codec": "deflate"' in result.output


def test_validate_delegates_to_the_validator(tmp_path, deep):
    with ZS(deep[0]) as z:
        report = z.validate()
        assert report.records == len(deep[1]) and report.root_index_level == z.root_index_level
    b = minimal()
    path = _file(tmp_path, b.build(sha=b"\1" * 32))  # readable, but the data hash is wrong
    with ZS(path, parallelism=0) as z:
        assert list(z) == [b"a", b"b", b"c", b"d"]
        with pytest.raises(ZSCorrupt, match="SHA-256"):
            z.validate()
