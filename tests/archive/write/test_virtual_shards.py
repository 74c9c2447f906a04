"""Virtual shards: zarr-python writes sharded arrays as a plain zarr v3 directory behind nginx, and
real icechunk 2.x points virtual refs at those shard files. An export given ``--authorize`` keeps each
pinned shard's index, so an inner chunk costs one request of its own bytes (requests counted)."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import numpy as np
import pytest
import zarr
from click.testing import CliRunner
from zarr.abc.store import RangeByteRequest, SuffixByteRequest
from zarr.core.buffer import default_buffer_prototype

from toolkit.servers import faulty_server, nginx_server  # noqa: F401
from toolkit.archives import assert_chain_is_full_export
from toolkit.shards import shard_index
from toolkit.virtualshards import LAYOUT, PINNED_BY_ETAG, UNPINNED, etag, virtual  # noqa: F401
from zsarchive import ZSError, open_store
from zsarchive.archive import export
from zsarchive.archive.format import schema as S
from zsarchive.archive.read.chunkdata import ChunkReader
from zsarchive.archive.format.shards import ShardLayout
from zsarchive.archive.write.chunkfiles import VirtualShardEntry
from zsarchive.archive.write.virtualshards import Skipped, index_records
from zsarchive.cli import main
from zsarchive.zs.reader import ZS


def _shards(src: Path, array: str) -> dict[str, bytes]:
    base = src / array / "c"
    return {f"{array}/c/" + str(p.relative_to(base)): p.read_bytes() for p in sorted(base.rglob("*")) if p.is_file()}


async def _get(store, key, byte_range=None) -> bytes | None:
    value = await store.get(key, default_buffer_prototype(), byte_range)
    return None if value is None else value.to_bytes()


def _kept(archive: Path) -> dict[tuple, tuple]:
    with ZS(str(archive)) as z:
        return {
            key: value for family, key, value in map(S.split, z.search(prefix=S.SHARD_INDEX)) if family == S.SHARD_INDEX
        }


def test_an_authorized_export_keeps_each_pinned_virtual_shards_index(virtual, tmp_path):
    repo, _, src, prefix = virtual
    summary = export(repo, tmp_path / "a.zs", authorize=[prefix])
    kept = _kept(tmp_path / "a.zs")
    shards = {k: v for name in LAYOUT for k, v in _shards(src, name).items()}
    expected = {rel for rel in shards if rel != UNPINNED}
    assert {key[0][len(prefix) :] for key in kept} == expected
    for key, (at_end, raw) in kept.items():
        rel = key[0][len(prefix) :]
        assert (key[1], key[2]) == (0, len(shards[rel]))
        assert key[3] == (etag(src / rel) if rel == PINNED_BY_ETAG else None)
        assert at_end == LAYOUT[rel.split("/")[0]][1] and raw == shard_index(shards[rel], *LAYOUT[rel.split("/")[0]])[1]
    assert summary.unindexed.count == 1 and "no checksum" in summary.unindexed.first
    # unauthorized: nothing kept, and the note says how to authorize
    plain = export(repo, tmp_path / "b.zs")
    assert not _kept(tmp_path / "b.zs")
    assert plain.unindexed.count == len(shards) and "--authorize" in plain.unindexed.first
    result = CliRunner().invoke(main, ["validate", str(tmp_path / "a.zs")])
    assert result.exit_code == 0, result.output


def test_an_inner_chunk_of_a_kept_virtual_shard_costs_one_request(virtual, nginx_server, tmp_path):  # noqa: F811
    repo, _, src, prefix = virtual
    result = CliRunner().invoke(
        main, ["export", str(repo), str(tmp_path / "a.zs"), "--authorize", prefix, "--no-progress"]
    )
    assert result.exit_code == 0, result.output
    assert "1 virtual shards' indexes not kept" in result.output and "no checksum" in result.output
    store = open_store(tmp_path / "a.zs", "main", authorize=[prefix])
    try:
        for name, (_, at_end, _) in LAYOUT.items():
            for rel, shard in _shards(src, name).items():
                entries, raw = shard_index(shard, *LAYOUT[name])
                for offset, length in (e for e in entries if e[0] != 2**64 - 1):
                    mark = nginx_server.mark()
                    request = SuffixByteRequest(len(raw)) if at_end else RangeByteRequest(0, len(raw))
                    assert asyncio.run(_get(store, rel, request)) == raw
                    assert (
                        asyncio.run(_get(store, rel, RangeByteRequest(offset, offset + length)))
                        == shard[offset : offset + length]
                    )
                    seen = [r for r in nginx_server.requests_since(mark) if "/vsrc/" in r.path]
                    assert len(seen) == (2 if rel == UNPINNED else 1), (rel, seen)
                    assert seen[-1].bytes_sent == length
        group = zarr.open_group(store=store, mode="r")
        plain = zarr.open_group(str(src), mode="r")
        for name in LAYOUT:
            assert np.array_equal(group[name][...], plain[name][...]), name
    finally:
        store.close()
    number = int(np.ravel_multi_index((1, 2), (4, 3)))
    shard = (src / "end/c/1/0").read_bytes()
    offset, length = shard_index(shard, *LAYOUT["end"])[0][number]
    mark = nginx_server.mark()
    shown = CliRunner().invoke(
        main,
        ["chunk", str(tmp_path / "a.zs"), "main", "/end", "1,0", "--inner", "1,2", "--data", "--authorize", prefix],
    )
    assert shown.exit_code == 0, shown.output
    assert shown.stdout_bytes == shard[offset : offset + length]
    assert len([r for r in nginx_server.requests_since(mark) if "/vsrc/" in r.path]) == 1


def test_a_changed_virtual_shard_is_one_line_never_other_bytes(virtual, tmp_path):
    """The kept index belongs to the object the ref's ETag pins: once the file changes, reading an
    inner chunk through it fails on the ETag instead of mixing the old index with new bytes."""
    repo, _, src, prefix = virtual
    export(repo, tmp_path / "a.zs", authorize=[prefix])
    path = src / PINNED_BY_ETAG
    original, stamp = path.read_bytes(), path.stat()
    try:
        path.write_bytes(original + b"\0" * 16)
        store = open_store(tmp_path / "a.zs", "main", authorize=[prefix])
        entries, _ = shard_index(original, *LAYOUT["end"])
        with pytest.raises(ZSError, match="0,0.*changed|0,0.*412|Precondition") as caught:
            asyncio.run(_get(store, PINNED_BY_ETAG, RangeByteRequest(entries[0][0], entries[0][0] + entries[0][1])))
        assert "\n" not in str(caught.value)
        store.close()
    finally:
        path.write_bytes(original)
        os.utime(path, ns=(stamp.st_atime_ns, stamp.st_mtime_ns))


def test_a_fragment_keeps_the_indexes_of_the_shards_it_adds(virtual, tmp_path):
    repo, first, _, prefix = virtual
    base = tmp_path / "base.zs"
    export(first, base, authorize=[prefix])
    fragment = tmp_path / "fragment.zs"
    export(repo, fragment, base=base, authorize=[prefix])
    added = _kept(fragment)
    assert added and {key[0][len(prefix) :].split("/")[0] for key in added} == {"late"}
    full = tmp_path / "full.zs"
    export(repo, full, authorize=[prefix])
    assert_chain_is_full_export(fragment, full, tmp_path / "consolidated.zs")


def test_index_reads_in_flight_are_bounded_in_bytes():
    """A hostile repository may declare 2^24 inner chunks per shard (256 MiB indexes, the largest a
    layout admits): those are read one at a time, small ones many at a time, never over the budget."""
    from zsarchive.archive.format.shards import ShardLayout
    from zsarchive.archive.write.virtualshards import _BYTES_IN_FLIGHT, read_batches

    huge, small = ShardLayout((4096, 4096), True, False, True), ShardLayout((4, 3), True, False, True)
    assert huge.index_size > _BYTES_IN_FLIGHT
    items = [(("s3://b/h", 0, 1 << 30, "e", None), huge)] * 3 + [(("s3://b/s", 0, 5000, "e", None), small)] * 200
    batches = list(read_batches(iter(items)))
    assert [len(b) for b in batches[:3]] == [1, 1, 1]
    assert all(sum(layout.index_size for _, layout in b) <= _BYTES_IN_FLIGHT for b in batches[3:])
    assert [item for b in batches for item in b] == items and len(batches) < 3 + 200


def test_a_shard_index_of_an_object_that_changed_is_not_kept(faulty_server):  # noqa: F811
    """At export, the index of a pinned virtual shard comes from the object the ref pins or not at all:
    a server that ignores If-Match and serves a new version gives an index no record, and the reason
    names both ETags."""
    layout = ShardLayout((2,), True, False, False)  # two inner chunks, the index at the end, no crc32c
    index = np.array([[0, 4], [4, 4]], "<u8").tobytes()
    faulty_server.files["s.bin"] = b"AAAABBBB" + index
    faulty_server.etags["s.bin"] = '"etag-v1"'
    faulty_server.honor_if_match = False
    url = faulty_server.url("s.bin")
    entry = VirtualShardEntry((url, 0, 8 + len(index), '"etag-v1"', None), layout).encode()
    reader = ChunkReader("test.zs", [url.rsplit("/", 1)[0] + "/"], lambda *_: None)
    skipped = Skipped()
    assert len(list(index_records(reader, [entry], skipped))) == 1 and skipped.count == 0
    faulty_server.files["s.bin"] = b"aaaabbbb" + index
    faulty_server.etags["s.bin"] = '"etag-v2"'
    assert list(index_records(reader, [entry], skipped)) == [] and skipped.count == 1
    assert 'the ref\'s ETag is "etag-v1", the answer\'s is "etag-v2"' in skipped.first, skipped.first
    reader.close()
