"""Sharded arrays (zarr v3 ``sharding_indexed``) written by real zarr-python through real icechunk 2.x:
every inner chunk read through the archive's zarr store equals icechunk's, locally and over nginx
(requests counted), with chunk bytes embedded in pieces or read from the repository."""

from __future__ import annotations

import asyncio
import base64
import json
import shutil
import subprocess

import numpy as np
import pytest
import zarr
from click.testing import CliRunner
from zarr.abc.store import RangeByteRequest, SuffixByteRequest
from zarr.core.buffer import default_buffer_prototype

from toolkit.servers import nginx_server  # noqa: F401
from toolkit.cli import one_line_error
from toolkit.shards import shard_index
from zsarchive import ZSCorrupt, open_store
from zsarchive.archive import RepoArchive, export
from zsarchive.archive.format import schema as S
from zsarchive.archive.format.pieces import BLOCK_BYTES, PIECE_SIZE
from zsarchive.cli import main
from zsarchive.zs.reader import ZS

# Runs under icechunk 2.x: writes the repository, then answers for every shard what icechunk's store
# holds (the shard's bytes) and what zarr reads of each array, per commit.
WRITER = r'''
import asyncio, base64, json, sys
import icechunk as ic, numpy as np, zarr
from zarr.codecs import BytesCodec, Crc32cCodec, ShardingCodec, ZstdCodec
from zarr.core.buffer import default_buffer_prototype

path, answer = sys.argv[1], sys.argv[2]
repo = ic.Repository.create(ic.local_filesystem_storage(path))
s = repo.writable_session("main")
root = zarr.group(store=s.store)
# index at the end with crc32c (zarr's default), partial shards at both edges, inner chunks of 400 B
end = root.create_array("end", shape=(100, 90), chunks=(10, 10), shards=(40, 30), dtype="f4", compressors=None)
end[:] = np.arange(9000, dtype="f4").reshape(100, 90)
# index at the start without a checksum, compressed inner chunks, some never written
start = root.create_array("grp/start", shape=(64,), dtype="i8", chunks=(32,), serializer=ShardingCodec(
    chunk_shape=(4,), codecs=[BytesCodec(), ZstdCodec()], index_codecs=[BytesCodec()], index_location="start"),
    compressors=None)
start[:50] = np.arange(50) * 3
# zstd over whole shards: the stored bytes are not a shard, so nothing can be read by the piece
wrapped = root.create_array("wrapped", shape=(64,), dtype="i8", chunks=(32,), shards=(64,))
wrapped[:] = np.arange(64)
# shards of ~1.1 MiB, inner chunks larger than a piece in one corner
big = root.create_array("big", shape=(2, 300_000), dtype="u1", chunks=(1, 150_000), shards=(2, 300_000),
                        compressors=None)
big[:] = np.random.default_rng(1).integers(0, 255, size=(2, 300_000), dtype="u1")
first = s.commit("sharded arrays")
s = repo.writable_session("main")
zarr.open_array(store=s.store, path="end", mode="r+")[35:45, 0:10] = -1
second = s.commit("overwrite across two shards")
b64 = lambda b: base64.b64encode(b).decode()

async def shards(sid):
    store = repo.readonly_session(snapshot_id=sid).store
    out = {"shards": {}, "arrays": {}}
    async for key in store.list():
        if key.endswith("zarr.json"):
            continue
        out["shards"][key] = b64((await store.get(key, default_buffer_prototype())).to_bytes())
    group = zarr.open_group(store=store, mode="r")
    for name, arr in group.arrays():
        out["arrays"][name] = arr[...].tolist()
    out["arrays"]["grp/start"] = group["grp/start"][...].tolist()
    return out

with open(answer, "w") as f:
    json.dump({"main": second, "first": first, "snapshots": {sid: asyncio.run(shards(sid)) for sid in (first, second)}}, f)
'''

LAYOUT = {"end": ((4, 3), True, True), "grp/start": ((8,), False, False), "big": ((2, 2), True, True)}
"""Per array: inner chunks per shard, index at the end, crc32c: what the test expects zarr wrote."""


@pytest.fixture(scope="module")
def sharded(tmp_path_factory, icechunk2_python):
    """(repository, icechunk's answers, {name: archive}) for one repository icechunk 2.x wrote."""
    work = tmp_path_factory.mktemp("shards")
    repo, answer = work / "repo", work / "answer.json"
    proc = subprocess.run(
        [str(icechunk2_python), "-c", WRITER, str(repo), str(answer)], capture_output=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr.decode()[-3000:]
    archives = {
        "stored": export(repo, work / "stored.zs", include_chunks=True).path,
        "none": export(repo, work / "none.zs", include_chunks=True, codec="none").path,
        "compressed": export(repo, work / "compressed.zs", include_chunks=True, codec="zstd", chunk_codec="same").path,
        "refs-only": export(repo, work / "refs.zs").path,
    }
    return repo, json.loads(answer.read_text()), archives


async def _get(store, key, byte_range=None) -> bytes | None:
    value = await store.get(key, default_buffer_prototype(), byte_range)
    return None if value is None else value.to_bytes()


def _array_of(key: str) -> str:
    return key.rsplit("/c/", 1)[0]


@pytest.mark.parametrize("kind", ["stored", "none", "compressed", "refs-only"])
def test_every_inner_chunk_and_index_equals_icechunks(sharded, kind):
    repo, truth, archives = sharded
    for sid, answer in truth["snapshots"].items():
        store = open_store(archives[kind], f"snapshot:{sid}", repo=repo if kind == "refs-only" else None)
        try:
            for key, encoded in answer["shards"].items():
                shard = base64.b64decode(encoded)
                assert asyncio.run(_get(store, key)) == shard
                if _array_of(key) not in LAYOUT:
                    continue
                entries, raw = shard_index(shard, *LAYOUT[_array_of(key)])
                at_end = LAYOUT[_array_of(key)][1]
                request = SuffixByteRequest(len(raw)) if at_end else RangeByteRequest(0, len(raw))
                assert asyncio.run(_get(store, key, request)) == raw, key
                for offset, length in entries:
                    if offset == 2**64 - 1:
                        continue
                    got = asyncio.run(_get(store, key, RangeByteRequest(offset, offset + length)))
                    assert got == shard[offset : offset + length], (key, offset)
            group = zarr.open_group(store=store, mode="r")
            for name, values in answer["arrays"].items():
                assert group[name][...].tolist() == values, (kind, sid, name)
        finally:
            store.close()


def test_shard_indexes_and_pieces_are_recorded_as_documented(sharded):
    repo, truth, archives = sharded
    with ZS(str(archives["stored"])) as z:
        records = [S.split(r) for r in z]
        assert z.metadata[S.METADATA_KEY]["format_version"] == 6
    indexes = {key: value for family, key, value in records if family == S.SHARD_INDEX}
    # every distinct shard file of both commits, with its array
    shards = {
        base64.b64decode(v): _array_of(k)
        for answer in truth["snapshots"].values()
        for k, v in answer["shards"].items()
        if _array_of(k) in LAYOUT
    }
    with RepoArchive(archives["stored"]) as arc:  # icechunk keeps the smallest shards inline: no file, no record
        native = {
            bytes(arc.read_chunk(chunk, sid))
            for sid in truth["snapshots"]
            for node in arc.ls(f"snapshot:{sid}")
            if node["path"].strip("/") in LAYOUT
            for chunk in arc.node_chunk_refs(node)
            if chunk["kind"] == "native"
        }
    assert native <= set(shards) and len(native) >= 10
    assert sorted(value[1] for value in indexes.values()) == sorted(
        shard_index(s, *LAYOUT[shards[s]])[1] for s in native
    )
    pieces: dict[str, list] = {}
    for family, key, value in records:
        if family == S.CHUNK_DATA:
            pieces.setdefault(key[0], []).append((key[1], value[0]))
    files = {b"".join(data for _, data in parts) for parts in pieces.values()}
    assert files >= native
    for chunk_id, parts in pieces.items():
        data = b"".join(d for _, d in parts)
        starts = [start for start, _ in parts]
        assert all(len(d) <= PIECE_SIZE for _, d in parts)
        index = next((v for k, v in indexes.items() if k[0] == chunk_id), None)
        if index is None:
            continue
        entries, raw = shard_index(data, *LAYOUT[shards[data]])
        for offset, length in entries:
            if offset != 2**64 - 1:
                assert offset in starts and (offset + length in starts or offset + length == len(data))


def test_zero_copy_from_an_uncompressed_local_archive(sharded):
    _, truth, archives = sharded
    store = open_store(archives["none"], "main")
    key = "big/c/0/0"
    shard = base64.b64decode(truth["snapshots"][truth["main"]]["shards"][key])
    (offset, length), *_ = shard_index(shard, *LAYOUT["big"])[0]
    value = asyncio.run(store.get(key, default_buffer_prototype(), RangeByteRequest(offset, offset + length)))
    array = value.as_numpy_array()
    assert array.tobytes() == shard[offset : offset + length]
    view = array.base
    assert isinstance(view, memoryview) and type(view.obj).__name__ == "mmap"  # the archive's map, no copy
    small = asyncio.run(store.get("end/c/0/0", default_buffer_prototype(), RangeByteRequest(0, 400)))
    assert isinstance(small.as_numpy_array().base, memoryview)
    # the default archive (stored deflate blocks) and a compressed one cannot hand out views of the map:
    # views of each block's decoded bytes
    for name in ("stored", "compressed"):
        store = open_store(archives[name], "main")
        value = asyncio.run(store.get(key, default_buffer_prototype(), RangeByteRequest(offset, offset + length)))
        assert value.to_bytes() == shard[offset : offset + length]
        base = value.as_numpy_array().base
        assert isinstance(base, memoryview) and type(base.obj) is bytes


def test_inner_chunks_over_http_cost_one_request_each(sharded, nginx_server):  # noqa: F811
    repo, truth, archives = sharded
    shutil.copy(archives["stored"], nginx_server.root / "shards.zs")
    answer = truth["snapshots"][truth["main"]]
    store = open_store(nginx_server.url("shards.zs"), "main")
    try:
        keys = sorted(k for k in answer["shards"] if k.startswith("end/")) + ["big/c/0/0"]
        asyncio.run(_get(store, keys[0], RangeByteRequest(0, 10)))  # warm: the index blocks on the way
        for key in keys[1:]:
            shard = base64.b64decode(answer["shards"][key])
            entries, raw = shard_index(shard, *LAYOUT[_array_of(key)])
            at_end = LAYOUT[_array_of(key)][1]
            for offset, length in (e for e in entries if e[0] != 2**64 - 1):
                mark = nginx_server.mark()
                assert (
                    asyncio.run(
                        _get(store, key, SuffixByteRequest(len(raw)) if at_end else RangeByteRequest(0, len(raw)))
                    )
                    == raw
                )
                assert (
                    asyncio.run(_get(store, key, RangeByteRequest(offset, offset + length)))
                    == shard[offset : offset + length]
                )
                seen = nginx_server.requests_since(mark)
                # the index comes from the archive's shard index records, the inner chunk from one range
                # read of the blocks holding just its pieces (none where the tail read at open holds them)
                assert len(seen) <= 1, (key, seen)
                assert all(r.bytes_sent <= length + BLOCK_BYTES + 4096 for r in seen), (key, length, seen)
                if key.startswith("big/"):  # 150 kB inner chunks in the middle of the file
                    assert len(seen) == 1 and seen[0].bytes_sent >= length
        group = zarr.open_group(store=store, mode="r")
        assert group["big"][...].tolist() == answer["arrays"]["big"]
    finally:
        store.close()


def test_zs_chunk_inner_shows_an_inner_chunk(sharded):
    repo, truth, archives = sharded
    answer = truth["snapshots"][truth["main"]]
    shard = base64.b64decode(answer["shards"]["end/c/1/0"])
    entries, _ = shard_index(shard, *LAYOUT["end"])
    number = np.ravel_multi_index((1, 2), (4, 3))
    offset, length = entries[number]
    runner = CliRunner()
    for kind, extra in (("stored", []), ("refs-only", ["--repo", str(repo)])):
        result = runner.invoke(
            main, ["chunk", str(archives[kind]), "main", "/end", "1,0", "--inner", "1,2", "--data", *extra]
        )
        assert result.exit_code == 0, result.output
        assert result.stdout_bytes == shard[offset : offset + length]
        shown = runner.invoke(
            main, ["chunk", str(archives[kind]), "main", "/end", "1,0", "--inner", "1,2", "--json", *extra]
        )
        assert shown.exit_code == 0, shown.output
        assert json.loads(shown.output)["length"] == length
    with RepoArchive(archives["stored"]) as arc:
        empty = arc.inner_chunk("main", "/grp/start", (1,), (7,))  # elements 60..63: never written
        assert empty["empty"] and empty["length"] == 0
    bad = runner.invoke(main, ["chunk", str(archives["stored"]), "main", "/end", "1,0", "--inner", "9,9"])
    assert bad.exit_code == 1 and "outside the shard" in bad.output and "Traceback" not in bad.output
    plain = runner.invoke(main, ["chunk", str(archives["stored"]), "main", "/end", "1,0", "--inner", "1"])
    assert plain.exit_code == 1 and "outside the shard" in plain.output


def test_a_missing_piece_is_one_line_never_other_bytes(sharded, tmp_path):
    """An archive whose pieces of one file leave a gap: validate names the record, a read across the
    gap is one line, bytes on either side still read."""
    repo, truth, archives = sharded
    with ZS(str(archives["stored"])) as z:
        records, metadata = list(z), z.metadata
    big = [r for r in records if r[:1] == S.CHUNK_DATA and len(S.split(r)[2][0]) > BLOCK_BYTES]
    dropped = big[len(big) // 2]
    damaged = tmp_path / "gap.zs"
    from zsarchive import ZSWriter

    with ZSWriter(damaged, metadata, codec="deflate", include_default_metadata=False) as w:
        w.add_records([r for r in records if r != dropped])
        w.finish()
    result = CliRunner().invoke(main, ["validate", str(damaged)])
    one_line_error(result, "piece starts at")
    chunk_id, start = S.split(dropped)[1]
    with RepoArchive(damaged) as arc:
        from zsarchive.archive.format.pieces import read_pieces

        with pytest.raises(ZSCorrupt, match="gap|no piece holds"):
            read_pieces(arc.zs, chunk_id, start - 10, start + 10)
        with pytest.raises(ZSCorrupt, match="no piece holds"):
            read_pieces(arc.zs, chunk_id, start + 10, start + 20)
        assert read_pieces(arc.zs, chunk_id, 0, 10) == (repo / "chunks" / chunk_id).read_bytes()[:10]


def test_a_shard_whose_index_does_not_check_out_is_read_as_stored(sharded, tmp_path):
    """A shard file whose index crc32c is wrong (a damaged repository): the export keeps no index for
    it and reads it as stored (zarr then meets the bad checksum, as it would through icechunk);
    ``zs chunk --inner`` on it is one line naming the shard."""
    repo, _, archives = sharded
    damaged = tmp_path / "repo"
    shutil.copytree(repo, damaged)
    with RepoArchive(archives["refs-only"]) as arc:
        chunk = next(c for c in arc.chunk_refs("main", "/end") if c["kind"] == "native")
        kept = sum(1 for _ in arc._records(S.SHARD_INDEX))
    path = damaged / "chunks" / chunk["chunk_id"]
    data = bytearray(path.read_bytes())
    data[-1] ^= 0xFF  # the last byte of the crc32c after the index
    path.write_bytes(bytes(data))
    for include in (True, False):
        target = tmp_path / f"damaged-{include}.zs"
        export(damaged, target, include_chunks=include)
        with RepoArchive(target) as arc:
            assert sum(1 for _ in arc._records(S.SHARD_INDEX)) == kept - 1
        key = "end/c/" + "/".join(map(str, chunk["coords"]))
        store = open_store(target, "main", repo=None if include else damaged)
        assert asyncio.run(_get(store, key, SuffixByteRequest(16 * 12 + 4))) == bytes(data[-(16 * 12 + 4) :])
        store.close()
        result = CliRunner().invoke(
            main,
            [
                "chunk",
                str(target),
                "main",
                "/end",
                ",".join(map(str, chunk["coords"])),
                "--inner",
                "0,0",
                *([] if include else ["--repo", str(damaged)]),
            ],
        )
        one_line_error(result, "crc32c mismatch")
