"""Hostile input made by code: decompression bombs in ZS files and Icechunk files, alias bombs and deep
nesting in a V1 config.yaml, loops in an archive's history, numbers past their range. Every case runs
``zs`` as a fresh process under a 1 GiB address-space ceiling and a timeout, and must end in one line
naming the file and what is wrong."""

from __future__ import annotations

import lzma
import os
import shutil
import struct
import subprocess
import sys
import zlib
from pathlib import Path

import flatbuffers
import pytest
import zarr
import zstandard

from toolkit.servers import faulty_server  # noqa: F401
from toolkit.archives import NODE, SNAPSHOT, history_archive
from toolkit.cli import one_line_error, run_hostile, zs_peak
from toolkit.icechunk_files import finish_transaction_log, replace_u64, table_vector
from toolkit.places import ROOT
from toolkit.zsfiles import FileBuilder
from zsarchive.archive import RepoArchive
from zsarchive.archive.format import schema as S
from zsarchive.errors import ZSCorrupt, ZSError
from zsarchive.icechunk import ids
from zsarchive.icechunk.repository import Repository
from zsarchive.icechunk.generated import ArrayUpdatedChunks as AUC
from zsarchive.icechunk.generated import ChunkIndices as CI
from zsarchive.icechunk.generated import TransactionLog as TL
from zsarchive.icechunk.generated.ObjectId8 import CreateObjectId8
from zsarchive.icechunk.header import HEADER_LENGTH
from zsarchive.zs.format.crc64 import crc64
from zsarchive.zs.format.header import MAGIC
from zsarchive.zs.writer import ZSWriter


FIXTURES = ROOT / "testdata" / "icechunk"
MiB = 1 << 20


def bomb_file(path: Path, codec: str, decoded: int) -> Path:
    """A valid-looking ZS file whose one data block decodes to ``decoded`` zero bytes."""
    builder = FileBuilder(codec)
    block = builder.raw_block(0, bytes(decoded))
    builder.root_block(1, [(b"\0", *block)])
    path.write_bytes(builder.build())
    return path


@pytest.mark.parametrize("codec", ["deflate", "lzma", "zstd"])
def test_a_block_decoding_past_the_ceiling_is_refused(tmp_path, codec):
    path = bomb_file(tmp_path / f"{codec}.zs", codec, 64 * MiB)
    assert path.stat().st_size < 200_000
    for command in ("dump", "validate"):
        one_line_error(
            run_hostile(command, str(path), env={"ZSARCHIVE_MAX_BLOCK": "16M"}),
            str(path),
            "decodes to more than 16777216 bytes, the ceiling ZSARCHIVE_MAX_BLOCK",
        )


def test_the_default_block_ceiling_holds_under_the_memory_limit(tmp_path):
    path = bomb_file(tmp_path / "big.zs", "zstd", 100 * MiB)
    one_line_error(run_hostile("dump", str(path)), "decodes to more than 67108864 bytes")


def streamed_bomb(path: Path, codec: str, decoded: int) -> Path:
    """``bomb_file`` without holding the decoded bytes: the stream is made 16 MiB at a time, and
    declares no size (a zstd frame that does would be refused unread)."""
    zeros = bytes(16 * MiB)
    if codec == "lzma":
        out = lzma.LZMACompressor(lzma.FORMAT_RAW, filters=[{"id": lzma.FILTER_LZMA2, "preset": 0}])
    elif codec == "deflate":
        out = zlib.compressobj(9, zlib.DEFLATED, -15)
    else:
        out = zstandard.ZstdCompressor(level=1, write_content_size=False).compressobj()
    stream = b"".join(out.compress(zeros) for _ in range(decoded // len(zeros))) + out.flush()
    builder = FileBuilder(codec)
    block = builder.raw_block(0, stream, compress=False)
    builder.root_block(1, [(b"\0", *block)])
    path.write_bytes(builder.build())
    return path


@pytest.mark.parametrize("codec", ["lzma", "deflate", "zstd"])
def test_a_bomb_costs_at_most_the_ceiling_and_a_few_mib(tmp_path, codec):
    """Past the ceiling the decoded bytes are held once: peak memory grows by no more than the ceiling
    (64 MiB), the eighth a growing buffer may hold spare, and a few MiB over a run of the same command
    on a small file, and the run fits an address space that leaves just that much room."""
    bomb = streamed_bomb(tmp_path / "bomb.zs", codec, 512 * MiB)
    assert bomb.stat().st_size < 1 * MiB
    builder = FileBuilder(codec)
    builder.root_block(1, [(b"", *builder.data_block([b"record %03d" % i for i in range(100)]))])
    small = tmp_path / "small.zs"
    small.write_bytes(builder.build())
    env = {"MALLOC_ARENA_MAX": "2"}  # the same few malloc arenas in every run, however many threads
    for command in ("dump", "validate"):
        done, base_rss, base_vm = zs_peak(tmp_path, command, str(small), env=env)
        assert done.returncode == 0, done.stderr
        bound = 64 * MiB * 9 // 8 + 8 * MiB
        room = base_vm + bound
        done, rss, _ = zs_peak(tmp_path, command, str(bomb), env=env, memory=room)
        one_line_error(done, str(bomb), "decodes to more than 67108864 bytes")
        assert rss - base_rss < bound, (command, rss - base_rss)


def test_a_bad_ceiling_setting_is_one_line(tmp_path):
    path = bomb_file(tmp_path / "small.zs", "deflate", 1000)
    one_line_error(run_hostile("dump", str(path), env={"ZSARCHIVE_MAX_BLOCK": "lots"}), "ZSARCHIVE_MAX_BLOCK='lots'")


def zstd_zeros(n: int) -> bytes:
    """A zstd frame of ``n`` zero bytes that does not declare its size."""
    out = zstandard.ZstdCompressor(level=1, write_content_size=False).compressobj()
    parts = [out.compress(bytes(16 * MiB)) for _ in range(n // (16 * MiB))]
    return b"".join(parts) + out.flush()


def test_an_icechunk_manifest_bomb_is_refused(tmp_path):
    repo = tmp_path / "repo"
    shutil.copytree(FIXTURES / "v2", repo)
    manifest = sorted((repo / "manifests").iterdir())[0]
    raw = manifest.read_bytes()
    manifest.write_bytes(raw[:HEADER_LENGTH] + zstd_zeros(1 << 30))
    assert manifest.stat().st_size < 100_000
    needles = (manifest.name, "decodes to more than 67108864 bytes, the ceiling ZSARCHIVE_MAX_ICECHUNK")
    one_line_error(run_hostile("icechunk", "inspect", str(repo), "--manifest", manifest.name), *needles)
    one_line_error(run_hostile("export", str(repo), str(tmp_path / "out.zs")), *needles)
    assert not (tmp_path / "out.zs").exists()


LAUGHS = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, "
    f"*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}]\n"
    for i in range(9)
)


@pytest.mark.parametrize(
    "text, needle",
    [
        (LAUGHS, "aliases are not accepted"),
        ("[" * 50_000 + "]" * 50_000, "nested too deeply"),
        ("inline_chunk_threshold_bytes: " + "9" * 5000, "out of range"),
        ("a: !!timestamp 2001-13-45", "out of range"),
    ],
)
def test_v1_config_yaml_bombs_are_refused(tmp_path, text, needle):
    repo = tmp_path / "repo"
    shutil.copytree(FIXTURES / "v1", repo)
    (repo / "config.yaml").write_text(text)
    one_line_error(run_hostile("export", str(repo), str(tmp_path / "out.zs")), "config.yaml", needle)


def test_a_history_that_loops_ends_in_one_line(tmp_path):
    path = history_archive(
        tmp_path / "loop.zs",
        {"A" * 20: ("B" * 20, 2 * 10**15, "a", "{}", ()), "B" * 20: ("A" * 20, 10**15, "b", "{}", ())},
    )
    for command in (
        ["log", str(path), "main"],
        ["log", str(path), "main", "--since", "1990-01-01"],
        ["ls", str(path), "main@1990-01-01"],
    ):
        one_line_error(run_hostile(*command), "loops at snapshot")


def test_times_and_json_out_of_range_end_in_one_line(tmp_path):
    path = history_archive(tmp_path / "far.zs", {"A" * 20: (None, 2**62, "far future", "{}", ())})
    one_line_error(run_hostile("log", str(path), "main"), "snapshot", "malformed")
    deep = history_archive(tmp_path / "deep.zs", {"A" * 20: (None, 1, "m", "[" * 100_000 + "]" * 100_000, ())})
    one_line_error(run_hostile("log", str(deep), "main"), "snapshot", "malformed")


def test_a_record_length_running_on_for_pages_is_refused_at_once(tmp_path):
    builder = FileBuilder("none")
    block = builder.raw_block(0, b"\xff" * 1_000_000 + b"\x01")
    builder.root_block(1, [(b"\0", *block)])
    path = tmp_path / "long.zs"
    path.write_bytes(builder.build())
    for command in ("dump", "validate"):
        one_line_error(run_hostile(command, str(path)), str(path), "record 0 length")


def test_a_negative_embedded_offset_is_refused_not_read_from_the_end(tmp_path):
    sid, node, chunk = SNAPSHOT, NODE, "C" * 19 + "0"
    zarr_json = (
        b'{"zarr_format":3,"node_type":"array","shape":[4],"data_type":"uint8",'
        b'"chunk_grid":{"name":"regular","configuration":{"chunk_shape":[2]}}}'
    )
    records = [
        S.record(S.NODE, (sid, ("v",)), (node, S.ARRAY, zarr_json, ((4, None, 2),), None, (), sid)),
        S.record(S.CHUNK_REF, (node, (0,), sid), (S.NATIVE, chunk, -3, 2)),
        S.record(S.CHUNK_DATA, (chunk,), (b"0123456789",)),
    ]
    path = history_archive(tmp_path / "negative.zs", {sid: (None, 1, "m", "{}", ())}, records, main=sid)
    one_line_error(run_hostile("chunk", str(path), "main", "/v", "0", "--data"), "offset -3", "must be integers >= 0")


def shared_chunks_log(log_id: bytes, arrays: int, chunks: int) -> bytes:
    """A transaction log whose ``arrays`` entries all point at one vector of ``chunks`` chunk tables:
    a DAG of offsets, about 10 bytes per chunk and 20 per array, that reads as arrays x chunks."""
    b = flatbuffers.Builder(1 << 20)
    tables = []
    for i in range(chunks):
        CI.StartCoordsVector(b, 1)
        b.PrependUint32(i)
        vec = b.EndVector()
        CI.Start(b)
        CI.AddCoords(b, vec)
        tables.append(CI.End(b))
    shared = table_vector(b, AUC.StartChunksVector, tables)
    entries = []
    for i in range(arrays):
        AUC.Start(b)
        AUC.AddNodeId(b, CreateObjectId8(b, i.to_bytes(8, "big")))
        AUC.AddChunks(b, shared)
        entries.append(AUC.End(b))
    return finish_transaction_log(b, log_id, table_vector(b, TL.StartUpdatedChunksVector, entries))


def test_a_flatbuffer_whose_offsets_form_a_dag_is_refused(tmp_path):
    repo = tmp_path / "repo"
    shutil.copytree(FIXTURES / "v2", repo)
    log = sorted((repo / "transactions").iterdir())[-1]
    # 20,000 x 20,000 shared entries: 400 M coordinates (1.6 GB) read from a file of a few hundred KB
    log.write_bytes(shared_chunks_log(ids.decode(log.name, 12), 20_000, 20_000))
    assert log.stat().st_size < 1_000_000
    needles = (log.name, "share vectors or strings")
    one_line_error(run_hostile("icechunk", "inspect", str(repo), "--transaction-log", log.name), *needles)
    one_line_error(run_hostile("export", str(repo), str(tmp_path / "out.zs")), *needles)


def test_names_holding_nul_and_control_characters_are_told_apart_and_printed_escaped(tmp_path):
    """Text keys escape NUL, so the bytes of "a" start those of "a\0b": a lookup of one must never
    answer with the other; a table shows such names escaped, one row per line."""
    sid = SNAPSHOT
    path = tmp_path / "nul.zs"
    records = [
        S.record(S.REFS, ("branch", "a\0b"), (sid,)),
        S.record(S.REFS, ("tag", "t\n\x1b[2J"), (sid,)),
        S.record(S.HEADER, (), (2, 2, 0, "test", ())),
        S.record(S.SNAPSHOT, (sid,), (None, 10**15, "line\nbreak", "{}", ())),
        S.record(S.NODE, (sid, ("g\0h",)), (NODE, S.GROUP, b'{"zarr_format":3,"node_type":"group"}', None, None, ())),
    ]
    with ZSWriter(str(path), {S.METADATA_KEY: {"format_version": 2}}, codec="none") as writer:
        writer.add_records(sorted(records))
        writer.finish()
    archive = RepoArchive(str(path))
    assert archive.resolve("a\0b") == sid
    with pytest.raises(ZSError, match="unknown branch, tag or snapshot"):
        archive.resolve("a")
    assert archive.node("a\0b", "/g\0h")["id"] == NODE
    with pytest.raises(ZSError):
        archive.node("a\0b", "/g")
    done = run_hostile("refs", str(path))
    assert done.returncode == 0 and [line.split() for line in done.stdout.splitlines()[1:]] == [
        ["branch", "a\\x00b", sid],
        ["tag", "t\\n\\x1b[2J", sid],
    ], done.stdout
    done = run_hostile("log", str(path), "tag:t\n\x1b[2J")
    assert done.returncode == 0 and done.stdout.splitlines()[1].endswith("line\\nbreak"), done.stdout


def index_dag_file(path: Path, codec: str = "zstd") -> Path:
    """A ZS file of a few hundred bytes whose four index levels each hold 1,000 entries all pointing
    at the same child: read as a tree, 10^12 data blocks."""
    builder = FileBuilder(codec)
    child = builder.data_block([b"a"])
    for level in (1, 2, 3):
        child = builder.index_block(level, [(b"a", *child)] * 1000)
    builder.root_block(4, [(b"a", *child)] * 1000)
    path.write_bytes(builder.build())
    return path


def test_an_index_dag_ends_every_scan_in_one_line(tmp_path):
    path = index_dag_file(tmp_path / "dag.zs")
    assert path.stat().st_size < 400
    for command in (["dump", str(path)], ["dump", str(path), "--prefix", "a"], ["validate", str(path)]):
        one_line_error(run_hostile(*command), str(path), "offset")
    message = one_line_error(run_hostile("dump", str(path)), str(path))
    assert "reached twice" in message or "data blocks must follow in file order" in message, message
    from zsarchive.zs import ZS

    with ZS(str(path), parallelism=0) as z:
        with pytest.raises(ZSCorrupt, match="reached twice|must follow in file order"):
            list(z.search(start=b"a"))


def test_header_metadata_nested_100000_deep_is_one_line(tmp_path):
    deep = b'{"a":' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    padded = b'{"a": "' + b"x" * (len(deep) - len(b'{"a": ""}')) + b'"}'  # as long as ``deep``
    builder = FileBuilder("none", metadata={"a": "x" * (len(deep) - len(b'{"a": ""}'))})
    block = builder.data_block([b"a"])
    builder.root_block(1, [(b"a", *block)])
    raw = builder.build().replace(padded, deep)
    length = int.from_bytes(raw[len(MAGIC) : len(MAGIC) + 8], "little")
    data_end = len(MAGIC) + 8 + length
    raw = raw[:data_end] + struct.pack("<Q", crc64(raw[len(MAGIC) + 8 : data_end])) + raw[data_end + 8 :]
    path = tmp_path / "deep.zs"
    path.write_bytes(raw)
    for command in ("validate", "dump", "info"):
        one_line_error(run_hostile(command, str(path)), str(path), "nested too deeply")


def test_a_snapshot_flushed_past_year_9999_is_one_line(tmp_path):
    repo = tmp_path / "repo"
    shutil.copytree(FIXTURES / "v2", repo)
    info = Repository.open(str(repo)).repo_info().snapshots[-1]
    replaced = sum(replace_u64(path, info.flushed_at, 2**62) for path in [repo / "repo", repo / "snapshots" / info.id])
    assert replaced == 2
    needles = ("flushed_at 4611686018427387904 is not a time",)
    one_line_error(run_hostile("export", str(repo), str(tmp_path / "out.zs")), str(repo / "repo"), *needles)
    assert not (tmp_path / "out.zs").exists()
    one_line_error(run_hostile("icechunk", "inspect", str(repo), "--snapshot", info.id), *needles)
    shutil.copy(FIXTURES / "v2" / "repo", repo / "repo")  # the snapshot file alone is wrong
    one_line_error(run_hostile("icechunk", "inspect", str(repo), "--snapshot", info.id), info.id, *needles)


@pytest.fixture
def full_disk(tmp_path):
    """A directory on a filesystem of 8 KiB (a tmpfs, where mounting one is allowed) and the limit that
    makes a write fail there: ``(directory, file_size limit or None, the error's words)``. Without
    the right to mount, a process file-size limit of 8 KiB fails the same writes (EFBIG for ENOSPC)."""
    disk = tmp_path / "disk"
    disk.mkdir()
    if (
        os.geteuid() == 0
        and subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=8k", "tmpfs", str(disk)], capture_output=True
        ).returncode
        == 0
    ):
        yield disk, None, "No space left on device"
        subprocess.run(["umount", str(disk)], check=True)
    else:
        yield disk, 8192, "File too large"


def test_every_writer_on_a_full_disk_is_one_line_and_leaves_no_file(tmp_path, full_disk):
    disk, limit, words = full_disk
    records = tmp_path / "records"
    records.write_bytes(b"".join(b"%08d " % i + os.urandom(40).hex().encode() + b"\n" for i in range(20_000)))
    out = disk / "out.zs"
    one_line_error(
        run_hostile("make", "{}", str(records), str(out), "--codec", "none", file_size=limit),
        f"{out}: make failed: {words}",
    )
    repo = tmp_path / "repo"
    shutil.copytree(FIXTURES / "v2", repo)
    one_line_error(
        run_hostile("export", str(repo), str(out), "--codec", "none", file_size=limit), f"{out}: export failed: {words}"
    )
    base, fragment = tmp_path / "base.zs", tmp_path / "fragment.zs"
    assert run_hostile("export", str(repo), str(base), "--codec", "none").returncode == 0
    assert run_hostile("export", str(repo), str(fragment), "--base", str(base)).returncode == 0
    one_line_error(
        run_hostile("consolidate", str(fragment), str(out), "--codec", "none", file_size=limit),
        f"{out}: consolidate failed: {words}",
    )
    assert list(disk.iterdir()) == []


def test_output_to_a_full_device_is_one_line(tmp_path):
    """``zs dump`` into /dev/full: the write fails wherever it strikes, and that is the machine's state,
    not a bug."""
    path = bomb_file(tmp_path / "small.zs", "deflate", 100_000)
    with open("/dev/full", "w") as full:
        done = subprocess.run(
            [sys.executable, "-m", "zsarchive", "dump", str(path)],
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            timeout=60,
        )
    assert done.returncode == 1 and done.stderr == "zs: error: No space left on device\n", done.stderr


PINNED_REFS_SCRIPT = r'''
import os, sys, icechunk as ic, zarr
from datetime import datetime, timezone
path, url, s3_url, when = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
repo = ic.Repository.create(ic.local_filesystem_storage(path))
s = repo.writable_session("main")
a = zarr.group(store=s.store).create_array("v", shape=(8,), chunks=(1,), dtype="<u4", compressors=None, fill_value=0)
moment = datetime.fromtimestamp(when, timezone.utc)
specs = []
for base, first in ((url, 0), (s3_url, 4)):
    specs += [ic.VirtualChunkSpec(index=[first], location=base, offset=0, length=4, etag_checksum='"etag-v1"'),
              ic.VirtualChunkSpec(index=[first + 1], location=base, offset=4, length=4, last_updated_at_checksum=moment),
              ic.VirtualChunkSpec(index=[first + 2], location=base, offset=8, length=4, etag_checksum="etag-v1"),
              ic.VirtualChunkSpec(index=[first + 3], location=base, offset=12, length=4)]
s.store.set_virtual_refs("v", specs, validate_containers=False)
s.commit("refs pinned by ETag, by modification time, unquoted, and not at all")
sys.stdout.flush(); os._exit(0)  # icechunk 2.3 sometimes crashes in its own shutdown
'''


def test_a_virtual_object_that_changed_is_refused_even_where_the_server_ignores_preconditions(
    icechunk2_python, faulty_server, tmp_path
):  # noqa: F811
    """A server (and an S3 endpoint: the same server, as a bucket) that honours Range but ignores
    If-Match and If-Unmodified-Since, serving a new version of the object: every read of a pinned
    ref checks the answer's own ETag and Last-Modified, and fails in one line naming both values."""
    from email.utils import formatdate

    from zsarchive import open_store

    when = 1_700_000_000  # the ref's checksum time
    name = "lab/granule.bin"  # also key granule.bin of bucket "lab" at the S3 endpoint
    faulty_server.files[name] = b"ABCDEFGHIJKLMNOP"  # printable: run_hostile() reads stdout as text
    faulty_server.etags[name] = '"etag-v1"'
    faulty_server.modified[name] = formatdate(when, usegmt=True)  # the same second as the ref's time
    faulty_server.honor_if_match = False
    url = faulty_server.url(name)
    subprocess.run(
        [
            str(icechunk2_python),
            "-c",
            PINNED_REFS_SCRIPT,
            str(tmp_path / "repo"),
            url,
            "s3://lab/granule.bin",
            str(when),
        ],
        check=True,
        capture_output=True,
        timeout=120,
    )
    archive = tmp_path / "v.zs"
    assert run_hostile("export", str(tmp_path / "repo"), str(archive)).returncode == 0
    endpoint = f"http://127.0.0.1:{faulty_server.server_address[1]}"
    s3 = f"s3://lab/ endpoint={endpoint} anon=true region=us-east-1"
    authorize = {
        url.rsplit("/", 1)[0] + "/": {},
        "s3://lab/": {"endpoint": endpoint, "anon": "true", "region": "us-east-1"},
    }

    def chunk(i: int) -> subprocess.CompletedProcess:
        return run_hostile(
            "chunk",
            str(archive),
            "main",
            "/v",
            str(i),
            "--data",
            "--authorize",
            url.rsplit("/", 1)[0] + "/",
            "--authorize",
            s3,
        )

    faulty_server.etags[name] = 'W/"etag-v1"'  # a weak answer names the same opaque tag
    for i in range(8):
        done = chunk(i)
        assert done.returncode == 0 and done.stdout == "ABCDEFGHIJKLMNOP"[4 * (i % 4) : 4 * (i % 4) + 4], (
            i,
            done.stderr,
        )
    faulty_server.files[name] = b"abcdefghijklmnop"  # replaced in place, a second later
    faulty_server.etags[name] = '"etag-v2"'
    faulty_server.modified[name] = formatdate(when + 1, usegmt=True)
    for first, where in ((0, url), (4, "s3://lab/granule.bin")):
        for i, needles in (
            (first, ('the ref\'s ETag is "etag-v1", the answer\'s is "etag-v2"',)),
            (first + 1, ("Last-Modified is 2023-11-14T22:13:21Z, after the ref's checksum time 2023-11-14T22:13:20Z",)),
            (first + 2, ("the ref's ETag is etag-v1, the answer's is \"etag-v2\"",)),
        ):
            one_line_error(chunk(i), f"chunk {i} of '/v' at 'main'", where, "changed since the virtual ref", *needles)
        done = chunk(first + 3)  # pinned by nothing: the new bytes, as icechunk reads them
        assert done.returncode == 0 and done.stdout == "mnop"
    with open_store(archive, "main", authorize=authorize) as store:
        array = zarr.open_array(store=store, path="v", mode="r")
        assert array[3] == array[7] == int.from_bytes(b"mnop", "little")
        for i in (0, 1, 2, 4, 5, 6):
            with pytest.raises(ZSError, match=r"changed since the virtual ref was written \(.*etag-v|Last-Modified"):
                array[i]
