"""Hostile input made by code: decompression bombs in ZS files and Icechunk files, alias bombs and deep
nesting in a V1 config.yaml, loops in an archive's history, numbers past their range. Every case runs
``zs`` as a fresh process under a 1 GiB address-space ceiling and a timeout, and must end in one line
naming the file and what is wrong."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import flatbuffers
import pytest
import zstandard

from hostile import one_line_error, zs
from icechunk_files import finish_transaction_log, table_vector
from zsarchive.archive import RepoArchive
from zsarchive.archive.format import schema as S
from zsarchive.errors import ZSError
from zsarchive.icechunk import ids
from zsarchive.icechunk.generated import ArrayUpdatedChunks as AUC
from zsarchive.icechunk.generated import ChunkIndices as CI
from zsarchive.icechunk.generated import TransactionLog as TL
from zsarchive.icechunk.generated.ObjectId8 import CreateObjectId8
from zsarchive.icechunk.header import HEADER_LENGTH
from zsarchive.zs.writer import ZSWriter

sys.path.insert(0, str(Path(__file__).resolve().parent / "zs"))  # the ZS format tests' file builder
from zsfiles import FileBuilder  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
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
        one_line_error(zs(command, str(path), env={"ZSARCHIVE_MAX_BLOCK": "16M"}), str(path),
                       "decodes to more than 16777216 bytes, the ceiling ZSARCHIVE_MAX_BLOCK")


def test_the_default_block_ceiling_holds_under_the_memory_limit(tmp_path):
    path = bomb_file(tmp_path / "big.zs", "zstd", 300 * MiB)
    one_line_error(zs("dump", str(path)), "decodes to more than 268435456 bytes")


def test_a_bad_ceiling_setting_is_one_line(tmp_path):
    path = bomb_file(tmp_path / "small.zs", "deflate", 1000)
    one_line_error(zs("dump", str(path), env={"ZSARCHIVE_MAX_BLOCK": "lots"}), "ZSARCHIVE_MAX_BLOCK='lots'")


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
    one_line_error(zs("icechunk", "inspect", str(repo), "--manifest", manifest.name), *needles)
    one_line_error(zs("export", str(repo), str(tmp_path / "out.zs")), *needles)
    assert not (tmp_path / "out.zs").exists()


LAUGHS = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, "
    f"*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}]\n" for i in range(9))


@pytest.mark.parametrize("text, needle", [(LAUGHS, "aliases are not accepted"),
                                          ("[" * 50_000 + "]" * 50_000, "nested too deeply"),
                                          ("inline_chunk_threshold_bytes: " + "9" * 5000, "out of range"),
                                          ("a: !!timestamp 2001-13-45", "out of range")])
def test_v1_config_yaml_bombs_are_refused(tmp_path, text, needle):
    repo = tmp_path / "repo"
    shutil.copytree(FIXTURES / "v1", repo)
    (repo / "config.yaml").write_text(text)
    one_line_error(zs("export", str(repo), str(tmp_path / "out.zs")), "config.yaml", needle)


def archive(path: Path, snapshots: dict[str, tuple], nodes: list[bytes] = ()) -> Path:
    """A format-2 archive holding branch main at snapshot "A..." and the given snapshot records."""
    records = [S.record(S.REFS, ("branch", "main"), ("A" * 20,)),
               S.record(S.HEADER, (), (2, 2, 0, "test", ()))]
    records += [S.record(S.SNAPSHOT, (sid,), value) for sid, value in snapshots.items()]
    with ZSWriter(str(path), {S.METADATA_KEY: {"format_version": 2}}, codec="none") as writer:
        writer.add_records(sorted([*records, *nodes]))
        writer.finish()
    return path


def test_a_history_that_loops_ends_in_one_line(tmp_path):
    path = archive(tmp_path / "loop.zs", {"A" * 20: ("B" * 20, 2 * 10**15, "a", "{}", ()),
                                          "B" * 20: ("A" * 20, 10**15, "b", "{}", ())})
    for command in (["log", str(path), "main"], ["log", str(path), "main", "--since", "1990-01-01"],
                    ["ls", str(path), "main@1990-01-01"]):
        one_line_error(zs(*command), "loops at snapshot")


def test_times_and_json_out_of_range_end_in_one_line(tmp_path):
    path = archive(tmp_path / "far.zs", {"A" * 20: (None, 2**62, "far future", "{}", ())})
    one_line_error(zs("log", str(path), "main"), "snapshot", "malformed")
    deep = archive(tmp_path / "deep.zs", {"A" * 20: (None, 1, "m", "[" * 100_000 + "]" * 100_000, ())})
    one_line_error(zs("log", str(deep), "main"), "snapshot", "malformed")


def test_a_record_length_running_on_for_pages_is_refused_at_once(tmp_path):
    builder = FileBuilder("none")
    block = builder.raw_block(0, b"\xff" * 1_000_000 + b"\x01")
    builder.root_block(1, [(b"\0", *block)])
    path = tmp_path / "long.zs"
    path.write_bytes(builder.build())
    for command in ("dump", "validate"):
        one_line_error(zs(command, str(path)), str(path), "record 0 length")


def test_a_negative_embedded_offset_is_refused_not_read_from_the_end(tmp_path):
    sid, node, chunk = "A" * 20, "NODEID0000000", "C" * 20
    zarr_json = (b'{"zarr_format":3,"node_type":"array","shape":[4],"data_type":"uint8",'
                 b'"chunk_grid":{"name":"regular","configuration":{"chunk_shape":[2]}}}')
    records = [S.record(S.NODE, (sid, ("v",)), (node, S.ARRAY, zarr_json, ((4, None, 2),), None, (), sid)),
               S.record(S.CHUNK_REF, (node, (0,), sid), (S.NATIVE, chunk, -3, 2)),
               S.record(S.CHUNK_DATA, (chunk,), (b"0123456789",))]
    path = archive(tmp_path / "negative.zs", {sid: (None, 1, "m", "{}", ())}, records)
    one_line_error(zs("chunk", str(path), "main", "/v", "0", "--data"), "offset -3", "must be integers >= 0")


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
    one_line_error(zs("icechunk", "inspect", str(repo), "--transaction-log", log.name), *needles)
    one_line_error(zs("export", str(repo), str(tmp_path / "out.zs")), *needles)


def test_names_holding_nul_and_control_characters_are_told_apart_and_printed_escaped(tmp_path):
    """Text keys escape NUL, so the bytes of "a" start those of "a\0b": a lookup of one must never
    answer with the other; a table shows such names escaped, one row per line."""
    sid = "A" * 20
    path = tmp_path / "nul.zs"
    records = [S.record(S.REFS, ("branch", "a\0b"), (sid,)), S.record(S.REFS, ("tag", "t\n\x1b[2J"), (sid,)),
               S.record(S.HEADER, (), (2, 2, 0, "test", ())),
               S.record(S.SNAPSHOT, (sid,), (None, 10**15, "line\nbreak", "{}", ())),
               S.record(S.NODE, (sid, ("g\0h",)), ("NODEID0000000", S.GROUP, b'{"zarr_format":3,"node_type":"group"}',
                                                   None, None, ()))]
    with ZSWriter(str(path), {S.METADATA_KEY: {"format_version": 2}}, codec="none") as writer:
        writer.add_records(sorted(records))
        writer.finish()
    archive = RepoArchive(str(path))
    assert archive.resolve("a\0b") == sid
    with pytest.raises(ZSError, match="unknown branch, tag or snapshot"):
        archive.resolve("a")
    assert archive.node("a\0b", "/g\0h")["id"] == "NODEID0000000"
    with pytest.raises(ZSError):
        archive.node("a\0b", "/g")
    done = zs("refs", str(path))
    assert done.returncode == 0 and [line.split() for line in done.stdout.splitlines()[1:]] == [
        ["branch", "a\\x00b", sid], ["tag", "t\\n\\x1b[2J", sid]], done.stdout
    done = zs("log", str(path), "tag:t\n\x1b[2J")
    assert done.returncode == 0 and done.stdout.splitlines()[1].endswith("line\\nbreak"), done.stdout
