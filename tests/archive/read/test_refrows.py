"""An array's chunk ref records read as columns (archive/read/refrows.py): the batch decoder and the
record-by-record one agree with the records' own decoding, whatever the records hold."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolkit.columns import BACKENDS, column_backend
from zsarchive.archive.format import schema as S
from zsarchive.archive.format.pieces import file_size, stream_file
from zsarchive.archive.format.views import ChunkRefValue
from zsarchive.archive.read.reader import records_under
from zsarchive.archive.read.refrows import chunk_ref_rows
from zsarchive.errors import ZSCorrupt
from zsarchive.zs.reader import ZS
from zsarchive.zs.writer import ZSWriter

SIDS = ["A" * 20, "B" * 20, "C" * 20]
u64 = st.integers(0, (1 << 64) - 1)
virtual = st.builds(
    lambda loc, off, n, etag, modified: ChunkRefValue(
        S.VIRTUAL, location=loc, offset=off, length=n, checksum_etag=etag, checksum_last_modified=modified
    ),
    st.sampled_from(["s3://b/f.nc", "s3://b/g\0.nc", "é/x"]) | st.text(max_size=6),
    u64,
    u64,
    st.none() | st.text(max_size=4),
    st.none() | st.integers(0, 1 << 32),
)
native = st.builds(
    lambda cid, off, n: ChunkRefValue(S.NATIVE, chunk_id=cid, offset=off, length=n),
    st.sampled_from(["0" * 20, "1" * 20]),
    u64,
    u64,
)
inline = st.builds(lambda data: ChunkRefValue(S.INLINE, inline=data), st.binary(max_size=5))
removed = st.just(ChunkRefValue(S.REMOVED))


@st.composite
def arrays(draw):
    kinds = draw(st.sampled_from([virtual, native, virtual | native | inline | removed]))
    ndim = draw(st.integers(0, 3))
    coords = draw(st.lists(st.tuples(*[st.integers(0, 1 << 40)] * ndim), min_size=1, max_size=12, unique=True))
    return [
        ((c, sid), draw(kinds))
        for c in sorted(coords)
        for sid in sorted(draw(st.sets(st.sampled_from(SIDS), min_size=1, max_size=2)))
    ]


@pytest.mark.parametrize("backend", BACKENDS)
@settings(max_examples=60, deadline=None)
@given(arrays(), st.sampled_from(["N" * 13, "N\0" * 6]), st.integers(1, 8))
def test_rows_equal_the_records(tmp_path_factory, backend, changes, node, block):
    path = tmp_path_factory.mktemp("refrows") / "a.zs"
    recs = [S.record(S.CHUNK_REF, (node, coords, sid), value.encode()) for (coords, sid), value in changes]
    neighbour = S.record(S.CHUNK_REF, (node + "\0x", (0,) * len(changes[0][0][0]), SIDS[0]), (S.REMOVED,))
    before = S.record(S.CHUNK_REF, ("M" * 13, (0,), SIDS[0]), (S.REMOVED,))
    every = sorted(recs + [neighbour, before])
    with ZSWriter(str(path), {}, codec="none") as writer:
        for at in range(0, len(every), block):  # the array's records over several blocks, cut anywhere
            writer.add_data_block(every[at : at + block])
        writer.finish()
    with ZS(str(path)) as zs, column_backend(backend):
        rows = chunk_ref_rows(zs, node)
        expected = [(k, ChunkRefValue.decode(v)) for k, v in records_under(zs, S.CHUNK_REF, (node,))]
    assert len(rows) == len(expected)
    for i, ((_node, coords, sid), value) in enumerate(expected):
        assert tuple(rows.coords[i].tolist()) == coords and rows.snapshot_ids[rows.snapshot[i]] == sid
        assert rows.kind[i] == value.kind
        named = rows.texts[rows.text[i]] if rows.text[i] >= 0 else None
        assert named == (value.chunk_id if value.kind == S.NATIVE else value.location)
        if value.kind in (S.NATIVE, S.VIRTUAL):
            assert (int(rows.offset[i]), int(rows.length[i])) == (value.offset, value.length)
        assert rows.checksum_etag[i] == value.checksum_etag
        assert rows.checksum_last_modified[i] == value.checksum_last_modified
        assert rows.inline.get(i) == (value.inline if value.kind == S.INLINE else None)


def test_an_array_without_records_has_no_rows(tmp_path):
    path = tmp_path / "a.zs"
    with ZSWriter(str(path), {}, codec="none") as writer:
        writer.add_data_block([S.record(S.CHUNK_REF, ("M" * 13, (0,), SIDS[0]), (S.REMOVED,))])
        writer.finish()
    with ZS(str(path)) as zs:
        assert len(chunk_ref_rows(zs, "N" * 13)) == 0


def test_whole_embedded_files_are_their_pieces(tmp_path):
    """file_size/stream_file on an archive our export writes (format 3: pieces), checked against the
    repository's own chunk files: each file whole, and each range of it."""
    from toolkit.oracle import repo_path
    from zsarchive.archive import export
    from zsarchive.archive.read.reader import ArchiveReader

    repo = repo_path(2)
    archive = tmp_path / "a.zs"
    export(repo, archive, include_chunks=True)
    files = {p.name: p.read_bytes() for p in (repo / "chunks").iterdir()}
    assert files
    with ArchiveReader(archive) as reader:
        for chunk_id, data in files.items():
            assert file_size(reader.zs, chunk_id) == len(data)
            assert b"".join(stream_file(reader.zs, chunk_id, len(data), zero_copy=True)) == data
            for start, stop in ((0, 0), (1, len(data) - 1), (len(data) // 2, len(data))):
                assert b"".join(stream_file(reader.zs, chunk_id, stop, start=start)) == data[start:stop]
        missing = "0" * 20
        assert missing not in files and file_size(reader.zs, missing) is None


def test_whole_file_records_of_older_formats_are_one_piece(tmp_path):
    """Formats 1 and 2 keep a chunk file in one record (record version 1), keyed by its id alone."""
    path = tmp_path / "a.zs"
    files = {"A" * 20: b"first file", "A" * 20 + "\0x": b"an id that starts like it", "B" * 20: b""}
    with ZSWriter(str(path), {}, codec="none") as writer:
        writer.add_data_block(sorted(S.record(S.CHUNK_DATA, (cid,), (data,), version=1) for cid, data in files.items()))
        writer.finish()
    with ZS(str(path)) as zs:
        for chunk_id, data in files.items():
            assert file_size(zs, chunk_id) == len(data) and b"".join(stream_file(zs, chunk_id, len(data))) == data
        assert file_size(zs, "C" * 20) is None


BIG_CHUNKS = """
import sys, numpy as np, zarr, icechunk as ic
repo = ic.Repository.create(ic.local_filesystem_storage(sys.argv[1]))
session = repo.writable_session("main")
array = zarr.group(store=session.store).create_array("v", shape=(3 * 40000,), chunks=(40000,), dtype="f8",
                                                     compressors=None)
array[:] = np.random.default_rng(0).random(3 * 40000)
session.commit("big chunks")
"""


def test_files_that_start_a_block_are_found_from_the_index(icechunk2_python, tmp_path, monkeypatch):
    """Chunk files larger than a shared block start blocks of their own: the index alone says they are
    embedded; their size is where the last piece ends, and they stream a window at a time (windows
    smaller than a file here) to their bytes, a range past the end being refused."""
    from zsarchive.archive.format import pieces

    monkeypatch.setattr(pieces, "STREAM_WINDOW", 100_000)
    import subprocess

    from zsarchive.archive import export
    from zsarchive.archive.read.reader import ArchiveReader

    subprocess.run([str(icechunk2_python), "-c", BIG_CHUNKS, str(tmp_path / "repo")], check=True, capture_output=True)
    export(tmp_path / "repo", tmp_path / "a.zs", include_chunks=True)
    files = {p.name: p.read_bytes() for p in (tmp_path / "repo" / "chunks").iterdir()}
    assert len(files) == 3
    with ArchiveReader(tmp_path / "a.zs") as reader:
        for chunk_id, data in files.items():
            head = S.key_prefix(S.CHUNK_DATA, (chunk_id,))
            assert reader.zs.block_bytes(head, head + b"\xff") > 0
            assert file_size(reader.zs, chunk_id) == len(data) > 3 * pieces.STREAM_WINDOW
            assert b"".join(stream_file(reader.zs, chunk_id, len(data))) == data
            with pytest.raises(ZSCorrupt, match="no piece holds byte 320000"):
                b"".join(stream_file(reader.zs, chunk_id, len(data) + 1))
        assert file_size(reader.zs, "0" * 20) is None
