"""ZS files read from a real nginx: same output as the local file, in few requests (access log)."""

from __future__ import annotations

import io
import random
import shutil
import subprocess
import threading
from pathlib import Path

import pytest
from click.testing import CliRunner

from toolkit.servers import nginx_server  # noqa: F401
from toolkit.zsfiles import block_extents
from zsarchive import ZS
from zsarchive.cli import main
from zsarchive.zs.format.header import blocks_start
from zsarchive.io import HTTPTransport
from toolkit.places import TESTDATA

RECORDS = [b"%07d %s" % (i * 7, b"payload-%d" % (i % 97) * (1 + i % 5)) for i in range(30_000)]


def _make(reference_zs: Path, records: list[bytes], target: Path, *options: str) -> Path:
    source = target.with_suffix(".txt")
    source.write_bytes(b"".join(r + b"\n" for r in sorted(records)))
    subprocess.run(
        [str(reference_zs), "make", "--no-spinner", *options, '{"made-by": "reference"}', str(source), str(target)],
        check=True,
        capture_output=True,
    )
    source.unlink()
    return target


@pytest.fixture(scope="module")
def files(nginx_server, reference_zs):
    """Reference-made files served by nginx: ``deep`` (tiny blocks, branching 4: a deep index),
    ``blocks`` (tiny blocks, one index block: hundreds of adjacent data blocks), ``flat`` (default
    layout) and one of the reference's example files."""
    root = nginx_server.root
    _make(
        reference_zs, RECORDS, root / "deep.zs", "--approx-block-size=2000", "--branching-factor=4", "--codec=deflate"
    )
    _make(reference_zs, RECORDS, root / "blocks.zs", "--approx-block-size=2000", "--codec=deflate")
    _make(reference_zs, RECORDS, root / "flat.zs", "--codec=deflate")
    example = sorted((TESTDATA / "interop").glob("*.zs"))[0]
    shutil.copy(example, root / "example.zs")
    return nginx_server


def _cli(*args: str) -> tuple[int, bytes]:
    result = CliRunner().invoke(main, list(args), catch_exceptions=False)
    return result.exit_code, result.stdout_bytes


@pytest.mark.parametrize("name", ["deep.zs", "flat.zs", "example.zs"])
@pytest.mark.parametrize(
    "command",
    [
        ["info"],
        ["dump"],
        ["validate"],
        ["dump", "--prefix=0012"],
        ["dump", "--start=0100", "--stop=0200", "--length-prefixed=uleb128"],
    ],
)
def test_cli_output_over_http_is_byte_for_byte_the_local_output(files, name, command):
    local = _cli(*command, str(files.root / name))
    remote = _cli(*command, files.url(name))
    assert local[0] == 0
    assert local[1] or (name == "example.zs" and len(command) > 1)  # its keys are not numbers
    assert remote == local


def test_reference_dump_of_the_url_equals_ours(files, reference_zs):
    ours = _cli("dump", files.url("deep.zs"))[1]
    theirs = subprocess.run([str(reference_zs), "dump", files.url("deep.zs")], check=True, capture_output=True).stdout
    assert ours == theirs == b"".join(r + b"\n" for r in sorted(RECORDS))


def test_zs_info_needs_at_most_two_requests(files):
    mark = files.mark()
    assert _cli("info", files.url("deep.zs"))[0] == 0
    assert len(files.requests_since(mark)) <= 2


def test_cold_lookup_needs_at_most_depth_plus_two_requests(files):
    data = (files.root / "deep.zs").read_bytes()
    blocks = {
        f"bytes={offset}-{offset + length - 1}"
        for offset, length, _ in block_extents(data, blocks_start(int.from_bytes(data[8:16], "little")))
    }
    rng = random.Random(5)
    for key in rng.sample(sorted(RECORDS), 10):
        mark = files.mark()
        with ZS(url=files.url("deep.zs")) as zs:
            assert zs.root_index_level >= 4  # a deep file, or the bound proves little
            assert list(zs.search(prefix=key[:7])) == [key]
            depth = zs.root_index_level
        logged = files.requests_since(mark)
        assert len(logged) <= depth + 2, [line.range for line in logged]
        # open is the only place two requests go out together; every later one is one block
        assert all(line.status == 206 for line in logged)
        assert {line.range for line in logged[2:]} <= blocks  # exactly a block, as its parent gives it


def test_warm_lookups_reuse_cached_index_blocks(files):
    with ZS(url=files.url("flat.zs")) as zs:
        transport = zs.transport
        assert isinstance(transport, HTTPTransport)
        keys = random.Random(6).sample(sorted(RECORDS), 50)
        before = transport.stats.requests
        for key in keys:
            assert list(zs.search(prefix=key[:7])) == [key]
        # a one-level index is in the tail read at open: each lookup costs at most its data block
        assert transport.stats.requests - before <= len(keys)
        assert transport.stats.connections <= 2


def test_range_scan_of_many_adjacent_blocks_uses_few_requests(files):
    with ZS(url=files.url("blocks.zs")) as zs:
        assert zs.root_index_level == 1
        start, stop = b"0010000", b"0150000"
        expected = [r for r in sorted(RECORDS) if start <= r < stop]
        mark = files.mark()
        assert list(zs.search(start=start, stop=stop)) == expected
        logged = files.requests_since(mark)
    blocks = sum(len(r) + 2 for r in expected) // 2000  # data blocks the span covers, at least
    assert blocks >= 100
    assert len(logged) <= blocks // 10, [line.range for line in logged]


def test_range_scan_with_index_blocks_between_data_blocks_uses_few_requests(files):
    """The reference writes each index block right after the blocks it indexes: with branching
    factor 4 a long scan meets an index block every few data blocks (and more above them)."""
    with ZS(url=files.url("deep.zs")) as zs:
        assert zs.root_index_level >= 4
        start, stop = b"0010000", b"0150000"
        expected = [r for r in sorted(RECORDS) if start <= r < stop]
        mark = files.mark()
        assert list(zs.search(start=start, stop=stop)) == expected
        logged = files.requests_since(mark)
    blocks = sum(len(r) + 2 for r in expected) // 2000
    assert blocks >= 100
    assert len(logged) <= blocks // 10, [line.range for line in logged]


def test_random_searches_over_http_match_the_local_file(files):
    rng = random.Random(7)
    keys = sorted(RECORDS)
    with ZS(url=files.url("deep.zs")) as remote, ZS(files.root / "deep.zs") as local:
        for _ in range(25):
            i = rng.randrange(len(keys))
            a, b = keys[i], keys[min(len(keys) - 1, i + rng.randrange(1000))]
            prefix = rng.choice(keys)[: rng.randrange(1, 7)]
            assert list(remote.search(start=a, stop=b)) == list(local.search(start=a, stop=b))
            assert list(remote.search(prefix=prefix)) == list(local.search(prefix=prefix))


def test_threads_sharing_one_reader_over_http_get_the_right_records(files):
    """Lookups, scans and dumps from several threads at once on one reader (one connection pool,
    shared caches, batched index reads) each see exactly their own records."""
    keys = sorted(RECORDS)
    errors: list[BaseException] = []
    with ZS(url=files.url("deep.zs"), data_block_cache=50_000) as zs:

        def work(seed: int) -> None:
            try:
                rng = random.Random(seed)
                for _ in range(8):
                    i = rng.randrange(len(keys))
                    key = keys[i]
                    assert list(zs.search(prefix=key[:7])) == [key]
                    a, b = key, keys[min(len(keys) - 1, i + rng.randrange(3000))]
                    assert list(zs.search(start=a, stop=b)) == keys[i : keys.index(b)]
                out = io.BytesIO()
                zs.dump(out, prefix=b"01")
                assert out.getvalue() == b"".join(r + b"\n" for r in keys if r.startswith(b"01"))
            except BaseException as exc:  # reported below
                errors.append(exc)

        threads = [threading.Thread(target=work, args=(seed,)) for seed in range(6)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert errors == []


def test_missing_url_is_one_line_exit_1(files):
    result = CliRunner().invoke(main, ["info", files.url("missing.zs")])
    assert result.exit_code == 1
    assert result.output.strip() == f"zs: error: {files.url('missing.zs')}: HTTP 404 Not Found"


@pytest.fixture(scope="module")
def archive(nginx_server):
    """The icechunk 2.x fixture repository exported with its chunk bytes, served by nginx."""
    from toolkit.oracle import fixtures, repo_path
    from zsarchive.archive import export

    export(repo_path(2), nginx_server.root / "repo.zs", include_chunks=True)
    main_commits = [c["id"] for c in fixtures()["v2"]["commits"] if c["branch"] == "main"]
    return nginx_server, main_commits


@pytest.mark.parametrize(
    "command",
    [
        ["refs"],
        ["refs", "--json"],
        ["log", "{}", "main"],
        ["log", "{}", "--json"],
        ["ls", "{}", "main"],
        ["chunks", "{}", "main", "/data/temperature"],
        ["chunk", "{}", "main", "/data/temperature", "0,0"],
        ["chunk", "{}", "main", "/data/big", "0,0", "--data"],
        ["diff", "{}", "FIRST", "LAST", "--json"],
        ["ops", "{}"],
        ["chunk-log", "{}", "main", "/data/temperature", "0,0"],
        ["info", "{}"],
    ],
)
def test_archive_commands_over_http_give_the_local_output(archive, command):
    server, commits = archive
    args = [arg.replace("FIRST", commits[0]).replace("LAST", commits[-1]) for arg in command]
    if "{}" not in args:
        args.append("{}")
    local = _cli(*[arg.replace("{}", str(server.root / "repo.zs")) for arg in args])
    remote = _cli(*[arg.replace("{}", server.url("repo.zs")) for arg in args])
    assert local[0] == 0 and local[1]
    assert remote == local
