"""Nodes and chunk refs are typed values inside the library (archive/read/model.py); the documented dicts of
``RepoArchive``'s commands are made from them, and a dict a caller hands back describes the same value."""

from __future__ import annotations

import pytest

from toolkit.places import TESTDATA
from zsarchive.archive import ChunkInfo, NodeInfo, RepoArchive
from zsarchive.errors import ZSCorrupt

VECTOR = TESTDATA / "archive" / "v5" / "archive.zs"  # native chunk bytes embedded: read without the repository


def test_nodes_and_chunks_are_typed_and_the_commands_give_their_dicts():
    with RepoArchive(VECTOR) as archive:
        nodes = archive.node_infos("main")
        assert nodes and all(isinstance(n, NodeInfo) for n in nodes)
        assert archive.ls("main") == [n.as_dict() for n in nodes]
        arrays = [n for n in nodes if n.is_array]
        assert arrays and all(set(n.as_dict()) >= {"shape", "num_chunks", "dtype", "chunk_shape"} for n in arrays)
        assert all("shape" not in n.as_dict() for n in nodes if not n.is_array)
        chunks = 0
        for node in arrays:
            assert NodeInfo.of(node.as_dict()) == node  # what a caller hands back is the same node
            assert archive.node_info("main", node.path) == node and archive.node("main", node.path) == node.as_dict()
            for chunk in archive.array_chunks(node):
                assert isinstance(chunk, ChunkInfo) and ChunkInfo.of(chunk.as_dict()) == chunk
                assert archive.chunk_ref("main", node.path, chunk.coords) == chunk.as_dict()
                if chunk.kind != "virtual":  # virtual ones are read under an authorized prefix only
                    data = bytes(archive.read_chunk(chunk, "main"))
                    assert bytes(archive.read_chunk(chunk.as_dict(), "main")) == data and len(data) == chunk.length
                    chunks += 1
            assert [c.as_dict() for c in archive.array_chunks(node)] == list(archive.chunk_refs("main", node.path))
        assert chunks > 0


def test_a_narrowed_chunk_reads_its_part_of_the_bytes():
    with RepoArchive(VECTOR) as archive:
        chunk = next(
            c
            for n in archive.node_infos("main")
            if n.is_array
            for c in archive.array_chunks(n)
            if c.length > 2 and c.kind != "virtual"
        )
        whole = bytes(archive.read_chunk(chunk, "main"))
        part = chunk.narrowed(1, chunk.length - 2)
        assert bytes(archive.read_chunk(part, "main")) == whole[1:-1]
        assert (part.path, part.coords, part.kind) == (chunk.path, chunk.coords, chunk.kind)


def test_a_handed_back_ref_missing_what_its_kind_needs_is_one_line():
    """A dict of an inline ref without its bytes is refused, never read as None; a virtual one without
    its location likewise."""
    with RepoArchive(VECTOR) as archive:
        for kind, missing in (("inline", "its bytes"), ("virtual", "its location")):
            ref = {"path": "/a", "coords": [0], "kind": kind, "offset": 0, "length": 3}
            with pytest.raises(ZSCorrupt, match=f"chunk 0 of '/a' at 'main': an? {kind} ref without {missing}$"):
                archive.read_chunk(ref, "main")
