"""The named views of record keys (archive/format/views.py) against the committed test vectors of every
format: each record's key has the shape its family's view describes, decodes to it and encodes back to
the same elements; and the shapes a view refuses are the ones docs/archive-format.rst rules out."""

from __future__ import annotations

import pytest

from toolkit.places import TESTDATA
from zsarchive.archive.format import schema as S
from zsarchive.archive.format import views
from zsarchive.archive.format.header import has_chunk_pieces, refs_by_manifest
from zsarchive.zs.reader import ZS

VECTORS = sorted((TESTDATA / "archive").glob("v*/archive.zs"))


def _key_view(family: bytes, format_version: int) -> type | None:
    """The view of a family's key in an archive of ``format_version`` (None: the header's empty key)."""
    if family == S.CHUNK_REF and refs_by_manifest(format_version):
        return views.ManifestRefKey
    entry = views.FAMILY_VIEWS.get(family)
    return (
        entry.key
        if entry is not None
        else {
            S.CHUNK_HISTORY: views.HistoryKey,
            S.CHUNK_DATA: views.ChunkBytesKey,
            S.VIRTUAL_DATA: views.VirtualPieceKey,
        }.get(family)
    )


def test_every_family_but_the_version_dependent_ones_has_its_views():
    assert set(views.FAMILY_VIEWS) | {S.CHUNK_HISTORY, S.CHUNK_DATA, S.VIRTUAL_DATA, S.HEADER} == set(S.FAMILY_NAMES)
    for entry in views.FAMILY_VIEWS.values():
        assert issubclass(entry.key, views.KeyView) and (
            entry.value is None or issubclass(entry.value, views.ValueView)
        )


@pytest.mark.parametrize("vector", VECTORS, ids=lambda p: p.parent.name)
def test_every_key_of_every_vector_reads_through_its_view(vector):
    seen = set()
    with ZS(str(vector)) as z:
        version = z.metadata[S.METADATA_KEY]["format_version"]
        for rec in z:
            family, key, _ = S.split(rec)
            view = _key_view(family, version)
            if view is views.VirtualPieceKey and len(key) == 5:  # an alias: the range's own key
                view = views.VirtualRangeKey
            if view is None:
                assert family == S.HEADER and key == ()
                continue
            shaped = (
                view.well_formed(key, has_chunk_pieces(version))
                if view is views.ChunkBytesKey
                else view.well_formed(key)
            )
            assert shaped, (family, key)
            decoded = view.decode(key)
            assert decoded.encode() == key and S.record(family, decoded.encode()) == S.record(family, key)
            seen.add(family)
    assert {S.REFS, S.SNAPSHOT, S.NODE, S.CHUNK_REF, S.SNAPSHOT_TIME, S.CHILDREN} <= seen


def test_every_value_of_the_newest_vector_reads_through_its_familys_view():
    """Each value has the shape its family's value view describes, decodes to it and encodes back to the
    same elements (the newest format: older ones hold fewer elements, which views read as defaults)."""
    with ZS(str(VECTORS[-1])) as z:
        assert z.metadata[S.METADATA_KEY]["format_version"] == S.FORMAT_VERSION
        checked = set()
        for rec in z:
            family, key, value = S.split(rec)
            entry = views.FAMILY_VIEWS.get(family)
            if entry is None or entry.value is None:
                continue
            assert entry.well_formed(key, value), (family, key, value)
            assert entry.value.decode(value).encode() == value, (family, value)
            checked.add(family)
    assert {S.REFS, S.REPO, S.OPS, S.SNAPSHOT, S.NODE, S.TXLOG, S.CHUNK_REF, S.FILES} <= checked


def test_named_fields_are_the_documented_elements():
    node = views.ChunkRefKey.decode(("N" * 13, (1, 2), "S" * 20))
    assert (node.node_id, node.coords, node.snapshot_id) == ("N" * 13, (1, 2), "S" * 20)
    assert views.NodeKey.decode(("S" * 20, ("a", "b"))).path == "/a/b"
    assert views.RefKey.decode(("deleted_tag", "v1")).deleted and not views.RefKey.decode(("tag", "v1")).deleted
    piece = views.ChunkBytesKey.decode(("C" * 20, 4096))
    assert (piece.chunk_id, piece.start) == ("C" * 20, 4096) and views.ChunkBytesKey.decode(("C" * 20,)).encode() == (
        "C" * 20,
    )
    virtual = views.ShardIndexKey.decode(("s3://b/k", 0, 100, "etag", None))
    assert virtual.virtual and virtual.encode() == ("s3://b/k", 0, 100, "etag", None)
    change = views.HistoryKey.of_chunk_ref(("N" * 13, (1, 2), "S" * 20), {"S" * 20: 7}.__getitem__)
    assert isinstance(change, views.HistoryKey) and (change.coords, change.flushed_at) == ((1, 2), 7)
    assert change == views.HistoryKey.decode(("N" * 13, (1, 2), 7, "S" * 20))
    native = views.ShardIndexKey.decode(("C" * 20, 0, 100))
    assert not native.virtual and native.encode() == ("C" * 20, 0, 100)


@pytest.mark.parametrize(
    "view, key",
    [
        (views.RefKey, ("remote", "main")),  # no such kind
        (views.RefKey, ("branch",)),
        (views.SnapshotKey, ("short",)),
        (views.SnapshotTimeKey, ("S" * 20, 5)),  # elements swapped
        (views.NodeKey, ("S" * 20, "/a")),  # a path is components, not text
        (views.ChunkRefKey, ("N" * 13, (0,))),
        (views.HistoryKey, ("N" * 13, (0,), 5)),
        (
            views.ShardIndexKey,
            ("s3://b/k", 0, 100, None, None),
        ),  # a virtual shard's index is kept only under a checksum
        (views.ShardIndexKey, ("C" * 20, -1, 100)),
    ],
)
def test_a_key_of_the_wrong_shape_is_not_well_formed(view, key):
    assert not view.well_formed(key)


def test_decoding_a_key_of_another_length_fails():
    for key in (("N" * 13, (0,)), ("N" * 13, (0,), "S" * 20, "extra")):
        with pytest.raises(TypeError):
            views.ChunkRefKey.decode(key)
    assert views.fits(views.ChunkRefKey, ("N" * 13, (0,), "S" * 20)) and not views.fits(views.ChunkRefKey, ("N" * 13,))
