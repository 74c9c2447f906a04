"""zsarchive.zs.validate and ``zs validate`` on valid files: the reference's, the reference's own
test corpus, and valid-but-unusual layouts the spec allows. (Broken files: tests/zs/test_corrupt.py.)"""

from __future__ import annotations

import dataclasses
import importlib
import io
import json
import os
import pty
import subprocess
import sys
import threading
import tracemalloc
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from click.testing import CliRunner

import zsarchive
import zsarchive.zs.format.header
from toolkit.cli import one_line_error, run_zs
from zsarchive import ZSCorrupt
from zsarchive.cli import main
from zsarchive.zs.format.block import encode_block, encode_index, encode_records
from zsarchive.io import Transport, open_transport
from zsarchive.zs.validate import validate
from toolkit.servers import nginx_server  # noqa: F401
from toolkit.zsfiles import FileBuilder, minimal, reference_make, reference_verdicts
from toolkit.places import ROOT

TESTDATA = ROOT / "testdata"

WORDS = sorted(b"%05d %s" % (i * 7919 % 4000, b"xyz"[i % 3 :] * (i % 5)) for i in range(4000))
BINARY = sorted([b"", b"\x00", b"\x00\x00", b"\n", b"a\nb", b"\xff" * 3, b"\x80\x00\x01"] * 3 + [bytes(range(256))])

# name -> (records, reference `zs make` options)
REFERENCE_LAYOUTS = {
    "deflate": (WORDS, ["--codec", "deflate"]),
    "lzma": (WORDS, ["--codec", "lzma"]),
    "none-tiny-blocks-branching-2": (
        WORDS[:300],
        ["--codec", "none", "--approx-block-size", "64", "--branching-factor", "2"],
    ),
    "deflate-branching-3": (WORDS, ["--codec", "deflate", "--approx-block-size", "500", "--branching-factor", "3"]),
    "duplicates": (
        sorted(WORDS[:50] * 20),
        ["--codec", "deflate", "--approx-block-size", "100", "--branching-factor", "4"],
    ),
    "binary": (BINARY, ["--codec", "lzma", "--approx-block-size", "16", "--branching-factor", "2"]),
    "huge-record": (sorted([b"a", b"m" * 1_500_000, b"z"]), ["--codec", "deflate", "--approx-block-size", "1000"]),
}


@pytest.fixture(scope="module")
def reference_files(reference_zs, tmp_path_factory) -> dict[str, tuple[Path, int]]:
    """Valid files written by the reference ``zs make``: name -> (path, record count)."""
    d = tmp_path_factory.mktemp("reference")
    with ThreadPoolExecutor(4) as pool:  # the reference is slow to start: overlap the processes
        made = {
            name: pool.submit(reference_make, reference_zs, d / f"{name}.zs", records, *options)
            for name, (records, options) in REFERENCE_LAYOUTS.items()
        }
        return {name: (made[name].result(), len(REFERENCE_LAYOUTS[name][0])) for name in made}


_REFERENCE_INFO = """
import json, sys, zs
for path in sys.argv[1:]:
    with zs.ZS(path) as z:
        print(json.dumps([path, z.root_index_level, z.total_file_length, z.codec]))
"""


@pytest.fixture(scope="module")
def reference_info(reference_files, reference_python) -> dict[str, tuple[int, int, str]]:
    """What the reference reader says about each file: root level, total length, codec."""
    paths = [str(path) for path, _ in reference_files.values()]
    out = subprocess.run(
        [str(reference_python), "-c", _REFERENCE_INFO, *paths], check=True, capture_output=True, text=True
    ).stdout
    return {row[0]: tuple(row[1:]) for row in map(json.loads, out.splitlines())}


@pytest.mark.parametrize("name", sorted(REFERENCE_LAYOUTS))
def test_every_reference_made_file_is_valid(reference_files, reference_info, name):
    path, count = reference_files[name]
    report = validate(path)
    assert report.records == count
    assert (report.root_index_level, report.total_file_length, report.codec) == reference_info[str(path)]
    assert report.total_file_length == path.stat().st_size
    assert report.extension_blocks == 0
    assert validate(path, parallelism=1) == report


def test_deep_reference_file_has_the_levels_we_asked_for(reference_files):
    # 300 records in blocks of ~64 bytes with two keys per index block: a tall tree.
    report = validate(reference_files["none-tiny-blocks-branching-2"][0])
    assert report.data_blocks > 30
    assert report.root_index_level >= 5
    assert report.index_blocks >= report.data_blocks - 1


def test_reference_example_files_are_valid():
    paths = sorted((TESTDATA / "interop").glob("*.zs"))
    assert paths
    for path in paths:
        assert validate(path).records > 0


def _reference_corpus(reference_python: Path) -> Path:
    out = subprocess.run(
        [str(reference_python), "-c", "import zs, os; print(os.path.dirname(zs.__file__))"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    return Path(out) / "tests" / "data" / "broken-files"


def test_reference_test_corpus_gets_the_same_verdicts(reference_python):
    """The reference ships hand-made broken and good files: we accept exactly the good ones."""
    paths = sorted(_reference_corpus(reference_python).glob("*.zs"))
    assert len(paths) > 40
    theirs = reference_verdicts(reference_python, paths)
    for path in paths:
        should_pass = path.name.startswith("good-")
        assert (theirs[str(path)] == "ACCEPT") == should_pass
        if should_pass:
            validate(path)
        else:
            with pytest.raises(ZSCorrupt, match=rf"^{path}: offset \d+: "):
                validate(path)


# -- valid but unusual -----------------------------------------------------------------------------


def _unusual_extension_blocks() -> bytes:
    b = FileBuilder(codec="deflate")
    b.raw_block(200, b"not even compressed", compress=False)  # right after the header
    d1 = b.data_block([b"a", b"b"])
    for level in (64, 100, 255):
        b.raw_block(level, b"\x00garbage that no codec would accept", compress=False)
    d2 = b.data_block([b"c", b"d"])
    b.raw_block(64, encode_index([(b"zzz", 0, 0)]))  # looks like an index, but is an extension
    b.root_block(1, [(b"a", *d1), (b"c", *d2)])
    b.raw_block(77, b"", compress=False)  # at the very end
    return b.build()


def _unusual_short_keys() -> bytes:
    b = FileBuilder()
    d1 = b.data_block([b"apple", b"apricot"])
    d2 = b.data_block([b"apricot", b"banana"])  # a duplicate straddles the boundary: key must equal it
    d3 = b.data_block([b"cherry", b"date"])
    d4 = b.data_block([b"elder"])
    i1 = b.index_block(1, [(b"", *d1), (b"apricot", *d2)])
    i2 = b.index_block(1, [(b"c", *d3), (b"dz", *d4)])
    b.root_block(2, [(b"", *i1), (b"bb", *i2)])
    return b.build()


def _unusual_index_before_children() -> bytes:
    # The spec puts no requirement on where index blocks sit: here the root comes first.
    b = FileBuilder()
    data = [[b"a", b"b"], [b"c", b"d"]]
    lengths = [len(encode_block(0, encode_records(r))) for r in data]
    root_length = 0
    while True:  # the root's own length moves the offsets it holds
        first = b.offset + root_length
        entries = [(b"a", first, lengths[0]), (b"c", first + lengths[0], lengths[1])]
        n = len(encode_block(1, encode_index(entries)))
        if n == root_length:
            break
        root_length = n
    b.root_block(1, entries)
    for records, entry in zip(data, entries):
        assert b.data_block(records) == entry[1:]
    return b.build()


def _unusual_header_extension() -> bytes:
    return minimal(FileBuilder(header_extra=b"future header fields")).build()


def _unusual_deepest_tree() -> bytes:
    b = FileBuilder()
    ref = b.data_block([b"only"])
    for level in range(1, 64):
        ref = b.index_block(level, [(b"o", *ref)])
    b.root = ref
    return b.build()


def _unusual_all_records_equal() -> bytes:
    b = FileBuilder(codec="lzma")
    blocks = [b.data_block([b"same"] * n) for n in (1, 3, 2)]
    b.root_block(1, [(b"same", *d) for d in blocks])
    return b.build()


UNUSUAL = {
    f.__name__.removeprefix("_unusual_"): f
    for f in [
        _unusual_extension_blocks,
        _unusual_short_keys,
        _unusual_index_before_children,
        _unusual_header_extension,
        _unusual_deepest_tree,
        _unusual_all_records_equal,
    ]
}


@pytest.mark.parametrize("case", sorted(UNUSUAL))
def test_valid_but_unusual_files_pass(case):
    data = UNUSUAL[case]()
    for parallelism in (1, 4):
        validate(io.BytesIO(data), parallelism=parallelism)


def test_extension_blocks_are_counted_and_not_hashed():
    report = validate(io.BytesIO(_unusual_extension_blocks()))
    assert (report.data_blocks, report.index_blocks, report.extension_blocks) == (2, 1, 6)
    assert report.records == 4 and report.data_bytes == 8


def test_deepest_tree_reports_level_63():
    assert validate(io.BytesIO(_unusual_deepest_tree())).root_index_level == 63


def test_reference_accepts_the_unusual_files_it_can_read(reference_python, tmp_path):
    paths = {}
    for case, make in UNUSUAL.items():
        paths[case] = tmp_path / f"{case}.zs"
        paths[case].write_bytes(make())
    verdicts = reference_verdicts(reference_python, list(paths.values()))
    got = {case: verdicts[str(p)] for case, p in paths.items()}
    # The reference's validator wants every index after its children (the spec does not).
    assert got.pop("index_before_children") == "REJECT"
    assert set(got.values()) == {"ACCEPT"}, got


# -- sources, progress, memory -----------------------------------------------------------------------


def test_sources_path_file_object_and_transport(reference_files):
    path = reference_files["deflate"][0]
    by_path = validate(path)
    with open(path, "rb") as f:
        assert validate(f).records == by_path.records
        assert not f.closed
    transport = open_transport(path)
    assert validate(transport).records == by_path.records
    assert transport.read(0, 8) == b"\xabZSfiLe\x01"  # still open: the caller owns it
    transport.close()


def test_validate_over_http_agrees_with_local_in_few_requests(nginx_server, reference_files):
    local = reference_files["deflate-branching-3"][0]
    data = local.read_bytes()
    (nginx_server.root / "good.zs").write_bytes(data)
    bad = bytearray(data)
    bad[len(data) // 2] ^= 0x04
    (nginx_server.root / "bad.zs").write_bytes(bytes(bad))
    mark = nginx_server.mark()
    report = validate(nginx_server.url("good.zs"))
    assert len(nginx_server.requests_since(mark)) <= 3  # header, then one window for this small file
    assert dataclasses.replace(report, name=str(local)) == validate(local)
    with pytest.raises(ZSCorrupt) as remote:
        validate(nginx_server.url("bad.zs"))
    with pytest.raises(ZSCorrupt) as here:
        validate(io.BytesIO(bytes(bad)))
    assert str(remote.value).split(": ", 1)[1] == str(here.value).split(": ", 1)[1]


@pytest.mark.parametrize("window", [1, 9, 100, 4096])
def test_blocks_straddling_read_windows(reference_files, monkeypatch, window):
    """Without mmap views the walk reads windows; blocks and length fields cross their edges."""
    path = reference_files["deflate-branching-3"][0]
    expected = validate(path)
    # (zsarchive.zs.validate is the function: the package re-exports it over the module's name)
    monkeypatch.setattr(importlib.import_module("zsarchive.zs.validate"), "WINDOW", window)
    with open(path, "rb") as f:
        assert dataclasses.replace(validate(f), name=expected.name) == expected
    bad = bytearray(path.read_bytes())
    bad[-20] ^= 1
    with pytest.raises(ZSCorrupt, match="CRC mismatch"):
        validate(io.BytesIO(bytes(bad)))


def test_windows_are_fetched_ahead_of_the_walk_within_a_bound(reference_files, monkeypatch):
    """Over a network the next windows must be on their way while blocks are checked, but only a
    few: the first block is consumed only once a later window was asked for (the serial walk
    would wait forever), and no read reaches more than a few windows past the walk."""
    path = reference_files["deflate-branching-3"][0]
    expected = validate(path)
    data = path.read_bytes()
    window = 1024  # a few blocks of this file
    monkeypatch.setattr(importlib.import_module("zsarchive.zs.validate"), "WINDOW", window)
    walked = [0]  # end of the last block the walk consumed
    reach: list[int] = []  # how far past the walk each window read went
    window_reads: list[int] = []
    second_window = threading.Event()
    seen_ahead: list[bool] = []

    class Remote(Transport):
        name, size = str(path), len(data)

        def read(self, offset: int, length: int) -> bytes:
            self._check_range(offset, length)
            if length and offset >= zsarchive.zs.format.header.blocks_start(
                zsarchive.zs.format.header.header_length_of(data[:16], "x")
            ):
                window_reads.append(offset)
                reach.append(offset + length - walked[0])
                if len(window_reads) > 1:
                    second_window.set()
            return data[offset : offset + length]

    def progress(done: int, total: int) -> None:
        if not seen_ahead:
            seen_ahead.append(second_window.wait(10))
        walked[0] = done

    report = validate(Remote(), parallelism=1, progress=progress)
    assert dataclasses.replace(report, name=expected.name) == expected
    assert seen_ahead == [True]
    assert len(window_reads) > 10 and max(reach) <= 4 * window


def test_a_failed_walk_stops_its_read_ahead_thread_at_once(reference_files):
    """The read-ahead thread ends with the walk, also when a block fails: left to the garbage
    collector, its shutdown could run inside another thread's start-up and deadlock."""
    bad = bytearray(reference_files["deflate-branching-3"][0].read_bytes())
    bad[len(bad) // 4] ^= 1  # early: the walk still has windows to read when it fails
    for parallelism in (1, 3):
        with pytest.raises(ZSCorrupt) as failure:
            validate(io.BytesIO(bytes(bad)), parallelism=parallelism)
        readers = [t for t in threading.enumerate() if t.name.startswith("zs-validate-read")]
        for thread in readers:
            thread.join(10)
        assert not any(thread.is_alive() for thread in readers), (parallelism, failure)


def test_progress_reports_every_byte_in_order(reference_files):
    path = reference_files["deflate-branching-3"][0]
    calls = []
    validate(path, progress=lambda done, total: calls.append((done, total)))
    size = path.stat().st_size
    assert calls[-1] == (size, size)
    assert all(total == size for _, total in calls)
    assert [d for d, _ in calls] == sorted({d for d, _ in calls})
    assert len(calls) == validate(path).data_blocks + validate(path).index_blocks


def _peak_while_validating(path: Path) -> int:
    tracemalloc.start()
    try:
        validate(path, parallelism=2)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_memory_does_not_grow_with_the_record_count(tmp_path):
    # Same block size, 8x the records: only the per-block summaries may grow. Both files have
    # enough blocks (12 and 96) to fill the bounded decode pipeline, so its peak is in both; how
    # many parsed blocks (~0.3 MB each) it holds at its peak depends on thread timing, so the
    # test bounds the growth per extra record (anything kept per record costs far more than 3 bytes).
    peaks = []
    counts = (80_000, 640_000)
    for n in counts:
        path = tmp_path / f"{n}.zs"
        with zsarchive.ZSWriter(str(path), {}, codec="deflate", approx_block_size=65536) as w:
            w.add_records(b"%09d" % i for i in range(n))
            w.finish()
        peaks.append(_peak_while_validating(path))
    assert peaks[1] - peaks[0] < 3 * (counts[1] - counts[0]), peaks


# -- the command line ----------------------------------------------------------------------------------


def _zs(*args: str):
    return CliRunner().invoke(main, list(args))


def test_cli_prints_what_the_reference_prints(reference_files, reference_zs):
    path = str(reference_files["lzma"][0])
    ours = _zs("validate", path)
    theirs = subprocess.run([str(reference_zs), "validate", path], capture_output=True, text=True)
    assert (ours.exit_code, ours.stdout) == (theirs.returncode, theirs.stdout) == (0, "looks good!\n")
    assert ours.stderr == ""  # no progress bar when stderr is not a terminal
    assert _zs("validate", "-j", "1", "--no-spinner", path).stdout == "looks good!\n"


def test_cli_corrupt_file_is_one_line_and_exit_1(tmp_path):
    path = tmp_path / "bad.zs"
    path.write_bytes(minimal().build(sha=b"\0" * 32))
    # A real process, to see exactly what a user sees: no traceback, one line, status 1.
    result = run_zs("validate", str(path))
    assert result.stdout == ""
    assert one_line_error(result).startswith(f"zs: error: {path}: offset 40: data SHA-256 mismatch")


def test_cli_missing_file_and_usage_errors(tmp_path):
    missing = _zs("validate", str(tmp_path / "nope.zs"))
    assert missing.exit_code == 1 and missing.stderr.startswith("zs: error:")
    for args in (["-j", "0", "x.zs"], ["-j", "many", "x.zs"], []):
        assert _zs("validate", *args).exit_code == 2, args


def _stderr_on_a_terminal(*args: str) -> tuple[int, str, str]:
    """Run ``zs`` with stderr on a pseudo-terminal: (status, stdout, what the terminal showed)."""
    leader, follower = pty.openpty()
    with os.fdopen(leader, "rb", buffering=0) as terminal:
        proc = subprocess.Popen([sys.executable, "-m", "zsarchive", *args], stdout=subprocess.PIPE, stderr=follower)
        os.close(follower)
        shown = b""
        while True:
            try:
                chunk = terminal.read(4096)
            except OSError:  # EIO: the process closed its end
                break
            if not chunk:
                break
            shown += chunk
        out = proc.stdout.read().decode()
        proc.stdout.close()
        return proc.wait(), out, shown.decode(errors="replace")


def test_cli_progress_bar_only_on_a_terminal(reference_files):
    path = str(reference_files["deflate"][0])
    status, out, shown = _stderr_on_a_terminal("validate", path)
    assert (status, out) == (0, "looks good!\n")
    assert "validating" in shown and "100%" in shown
    status, out, shown = _stderr_on_a_terminal("validate", "--no-spinner", path)
    assert (status, out, shown) == (0, "looks good!\n", "")


def test_cli_dump_and_make_progress_bars_on_a_terminal(reference_files, tmp_path):
    path = str(reference_files["deflate"][0])
    status, out, shown = _stderr_on_a_terminal("dump", "-o", str(tmp_path / "out.txt"), path)
    assert (status, out) == (0, "") and "dumping" in shown and shown.rstrip().endswith("100%\x1b[?25h")
    assert (tmp_path / "out.txt").read_bytes() == b"".join(r + b"\n" for r in WORDS)
    status, out, shown = _stderr_on_a_terminal(
        "make", "--codec", "deflate", "{}", str(tmp_path / "out.txt"), str(tmp_path / "made.zs")
    )
    assert (status, out) == (0, "") and "zs make" in shown and "100%" in shown
    status, out, shown = _stderr_on_a_terminal("dump", "--no-spinner", str(tmp_path / "made.zs"))
    assert (status, out, shown) == (0, "".join(r.decode() + "\n" for r in WORDS), "")
