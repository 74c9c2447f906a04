"""The direct (struct) manifest decoder against manifests built with the flatc-generated builders.

icechunk's own files cover the layouts it writes; these cover what the schema allows: any mix of
kinds, absent defaults, etags and last-modified checksums, plain locations, 0-d to 4-d indexes.
"""

from __future__ import annotations

import struct

import flatbuffers
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from toolkit.icechunk_files import MANIFEST, icechunk_file, table_vector
from zsarchive.errors import ZSCorrupt
from zsarchive.icechunk import ids
from zsarchive.icechunk.generated import ArrayManifest as AM
from zsarchive.icechunk.generated import ChunkRef as CR
from zsarchive.icechunk.generated import Manifest as M
from zsarchive.icechunk.generated.ObjectId8 import CreateObjectId8
from zsarchive.icechunk.generated.ObjectId12 import CreateObjectId12
from zsarchive.icechunk.manifest.decode import decode_manifest
from zsarchive.icechunk.model import ChunkRef, RefKind

u32 = st.integers(0, 2**32 - 1)
u64 = st.integers(0, 2**64 - 1)
ref_kinds = st.one_of(
    st.builds(lambda data: (RefKind.INLINE, data), st.binary(max_size=40)),
    st.builds(lambda cid, off, n: (RefKind.NATIVE, cid, off, n), st.binary(min_size=12, max_size=12), u64, u64),
    st.builds(
        lambda loc, off, n, etag, mod: (RefKind.VIRTUAL, loc, off, n, etag, mod),
        st.text(min_size=1, max_size=30),
        u64,
        u64,
        st.none() | st.text(max_size=10),
        st.none() | u32,
    ),
)


@st.composite
def arrays(draw):
    """{node id bytes: sorted [(index, ref spec)]} for a few arrays of random dimensionality."""
    out = {}
    for node in draw(st.lists(st.binary(min_size=8, max_size=8), min_size=1, max_size=3, unique=True)):
        ndim = draw(st.integers(0, 4))
        indexes = draw(st.lists(st.tuples(*[u32] * ndim), min_size=1, max_size=1 if ndim == 0 else 12, unique=True))
        out[node] = [(index, draw(ref_kinds)) for index in sorted(indexes)]
    return dict(sorted(out.items()))


def build(manifest_id: bytes, spec: dict, last_ref_at_end: bool = False) -> bytes:
    """A manifest file (header + zstd FlatBuffer) built with the generated builder functions.

    The builder writes back to front: ``last_ref_at_end`` builds the tables in reverse so the last ref
    read sits at the very end of the buffer (the decoder's layout guess must not overrun it).
    """
    b = flatbuffers.Builder(1024)
    array_offsets = []
    for node, refs in spec.items():
        ref_offsets = []
        for index, kind in reversed(refs) if last_ref_at_end else refs:
            strings = {}
            if kind[0] is RefKind.INLINE:
                strings["inline"] = b.CreateByteVector(kind[1])
            elif kind[0] is RefKind.VIRTUAL:
                strings["location"] = b.CreateString(kind[1])
                if kind[4] is not None:
                    strings["etag"] = b.CreateString(kind[4])
            CR.StartIndexVector(b, len(index))
            for i in reversed(index):
                b.PrependUint32(i)
            index_vec = b.EndVector()
            CR.Start(b)
            CR.AddIndex(b, index_vec)
            if kind[0] is RefKind.INLINE:
                CR.AddInline(b, strings["inline"])
            elif kind[0] is RefKind.NATIVE:
                CR.AddOffset(b, kind[2])
                CR.AddLength(b, kind[3])
                CR.AddChunkId(b, CreateObjectId12(b, kind[1]))
            else:
                CR.AddOffset(b, kind[2])
                CR.AddLength(b, kind[3])
                CR.AddLocation(b, strings["location"])
                if "etag" in strings:
                    CR.AddChecksumEtag(b, strings["etag"])
                if kind[5] is not None:
                    CR.AddChecksumLastModified(b, kind[5])
            ref_offsets.append(CR.End(b))
        if last_ref_at_end:
            ref_offsets.reverse()
        refs_vec = table_vector(b, AM.StartRefsVector, ref_offsets)
        AM.Start(b)
        AM.AddNodeId(b, CreateObjectId8(b, node))
        AM.AddRefs(b, refs_vec)
        array_offsets.append(AM.End(b))
    arrays_vec = table_vector(b, M.StartArraysVector, array_offsets)
    M.Start(b)
    M.AddId(b, CreateObjectId12(b, manifest_id))
    M.AddArrays(b, arrays_vec)
    b.Finish(M.End(b))
    return icechunk_file(MANIFEST, b)


def expected_ref(index: tuple, kind: tuple) -> ChunkRef:
    if kind[0] is RefKind.INLINE:
        return ChunkRef(index, RefKind.INLINE, inline=kind[1])
    if kind[0] is RefKind.NATIVE:
        return ChunkRef(index, RefKind.NATIVE, chunk_id=ids.encode(kind[1]), offset=kind[2], length=kind[3])
    return ChunkRef(
        index,
        RefKind.VIRTUAL,
        location=kind[1],
        offset=kind[2],
        length=kind[3],
        checksum_etag=kind[4],
        checksum_last_modified=kind[5] or None,
    )


@settings(max_examples=150, deadline=None)
@given(st.binary(min_size=12, max_size=12), arrays(), st.booleans())
def test_direct_decoder_reads_what_the_builder_wrote(manifest_id, spec, last_ref_at_end):
    manifest = decode_manifest(build(manifest_id, spec, last_ref_at_end), "built")
    assert manifest.id == ids.encode(manifest_id)
    assert [a.node_id for a in manifest.arrays] == [ids.encode(n) for n in spec]
    for node, refs in spec.items():
        node_id = ids.encode(node)
        assert list(manifest.chunk_refs(node_id)) == [expected_ref(i, k) for i, k in refs]
        kinds = [k[0] for _, k in refs]
        assert manifest.kind_counts(node_id) == (
            kinds.count(RefKind.INLINE),
            kinds.count(RefKind.NATIVE),
            kinds.count(RefKind.VIRTUAL),
        )


def test_a_small_table_after_a_large_one_at_the_buffer_end():
    """Regression: a virtual ref then an inline ref whose small table ends the buffer."""
    spec = {b"\x01" * 8: [((0,), (RefKind.VIRTUAL, "s3://b/k", 5, 7, "etag", 9)), ((1,), (RefKind.INLINE, b""))]}
    manifest = decode_manifest(build(b"\x02" * 12, spec, last_ref_at_end=True), "built")
    assert list(manifest.chunk_refs(ids.encode(b"\x01" * 8))) == [expected_ref(i, k) for i, k in spec[b"\x01" * 8]]


@settings(max_examples=60, deadline=None)
@given(arrays(), st.lists(st.integers(0, 14), max_size=4))
def test_ranges_of_refs_concatenate_to_all_refs(spec, cuts):
    manifest = decode_manifest(build(b"\x03" * 12, spec), "built")
    for node in spec:
        node_id = ids.encode(node)
        full = list(manifest.chunk_refs(node_id))
        bounds = sorted({0, *cuts})
        parts = [list(manifest.source.chunk_refs(node_id, lo, hi)) for lo, hi in zip(bounds, bounds[1:] + [None])]
        assert [ref for part in parts for ref in part] == full


def test_a_range_checks_its_order_against_the_ref_before_it():
    spec = {
        b"\x01" * 8: [((0,), (RefKind.INLINE, b"a")), ((2,), (RefKind.INLINE, b"b")), ((1,), (RefKind.INLINE, b"c"))]
    }
    manifest = decode_manifest(build(b"\x02" * 12, spec), "built")
    with pytest.raises(ZSCorrupt, match=r"^built: array \w+ refs MUST be sorted by index, but ref 2 \[1\]"):
        list(manifest.source.chunk_refs(ids.encode(b"\x01" * 8), 2))


def _many_virtual_refs(n: int) -> list:
    """``n`` 2-d virtual refs: locations mostly repeating (as in real manifests), some unique, some
    longer than the deduplicating path takes, plus etags and last-modified times here and there."""
    refs = []
    for i in range(n):
        if i % 97 == 0:
            location = f"s3://bucket/unique/{i}-" + "x" * (i % 7)
        elif i == n - 100:
            location = "https://example.org/" + "long/" * 60 + f"{i % 3}.nc"
        else:
            location = f"s3://bucket/granules/file{i % 13:03d}.nc"
        etag = f"e{i % 5}" if i % 11 == 0 else None
        modified = 1_700_000_000 + i if i % 17 == 0 else None
        refs.append(((i // 40, i % 40), (RefKind.VIRTUAL, location, 4000 * i, 4000, etag, modified)))
    return refs


@pytest.mark.parametrize("batch", [65536, 300, 1])
def test_many_refs_decode_in_batches(monkeypatch, batch):
    """Thousands of refs, decoded a batch at a time (batch edges anywhere), locations deduplicated."""
    from zsarchive.icechunk.manifest import decode as M_

    monkeypatch.setattr(M_, "_BATCH", batch)
    deduplicated = []
    distinct = M_._distinct
    monkeypatch.setattr(M_, "_distinct", lambda *a: deduplicated.append(distinct(*a)) or deduplicated[-1])
    spec = {b"\x05" * 8: _many_virtual_refs(3000 if batch > 1 else 400)}
    manifest = decode_manifest(build(b"\x04" * 12, spec), "built")
    node_id = ids.encode(b"\x05" * 8)
    assert list(manifest.chunk_refs(node_id)) == [expected_ref(i, k) for i, k in spec[b"\x05" * 8]]
    # A batch holding the long location decodes ref by ref; the others go the deduplicating way.
    assert any(d is None for d in deduplicated)
    assert batch != 300 or any(d is not None for d in deduplicated)


def test_equal_hashes_of_different_locations_fall_back_to_exact_decoding(monkeypatch):
    """The location deduplication confirms hash matches byte for byte: a hash that collides for
    everything must still give every ref its own location."""
    from zsarchive.icechunk.manifest import decode as M_

    monkeypatch.setattr(M_, "_MIX", np.zeros_like(M_._MIX))
    spec = {b"\x05" * 8: [(i, k) for i, k in _many_virtual_refs(2000) if len(k[1]) < 100]}
    manifest = decode_manifest(build(b"\x04" * 12, spec), "built")
    assert list(manifest.chunk_refs(ids.encode(b"\x05" * 8))) == [expected_ref(i, k) for i, k in spec[b"\x05" * 8]]


def test_unsorted_refs_across_a_batch_edge_name_the_ref(monkeypatch):
    from zsarchive.icechunk.manifest import decode as M_

    monkeypatch.setattr(M_, "_BATCH", 4)
    refs = [((i,), (RefKind.INLINE, bytes([i]))) for i in range(10)]
    refs[4], refs[3] = refs[3], refs[4]  # ref 4 ([3]) starts the second batch and comes after [4]
    manifest = decode_manifest(build(b"\x02" * 12, {b"\x01" * 8: refs}), "built")
    with pytest.raises(
        ZSCorrupt,
        match=r"^built: array \w+ refs MUST be sorted by index, but ref 4 \[3\] "
        r"does not come after \[4\]$",
    ):
        list(manifest.chunk_refs(ids.encode(b"\x01" * 8)))


def test_unaligned_reads_equal_aligned_ones():
    """Scalars of a well-formed FlatBuffer are aligned; a damaged one may not be: both reads agree."""
    from zsarchive.icechunk.gather import gather

    raw = bytes(range(256)) * 4
    b = np.frombuffer(raw, np.uint8)
    for dtype, fmt in (("<u4", "<I"), ("<i4", "<i"), ("<u8", "<Q")):
        for positions in ([0, 8, 64, 1000 // 8 * 8], [1, 3, 17, 1001], [0, 5, 8]):
            at = np.array([p for p in positions if p + 8 <= len(raw)], dtype=np.int64)
            assert gather(b, at, dtype).tolist() == [struct.unpack_from(fmt, raw, p)[0] for p in at.tolist()]


@given(st.lists(st.integers(-3, 3), max_size=50))
def test_distinct_values_are_found_at_their_first_occurrence(values):
    from zsarchive.icechunk.gather import distinct

    firsts, inverse = distinct(np.array(values, dtype=np.int64))
    assert sorted(firsts.tolist()) == sorted(values.index(v) for v in set(values))
    assert [values[j] for j in firsts[inverse].tolist()] == values


def _shared_inline_manifest(refs: int, size: int) -> bytes:
    """A manifest whose ``refs`` inline refs all point at one ``size``-byte vector (a DAG of offsets)."""
    b = flatbuffers.Builder(size + 64 * refs)
    shared = b.CreateByteVector(bytes(range(256)) * (size // 256))
    tables = []
    for i in range(refs):
        CR.StartIndexVector(b, 1)
        b.PrependUint32(i)
        index_vec = b.EndVector()
        CR.Start(b)
        CR.AddIndex(b, index_vec)
        CR.AddInline(b, shared)
        tables.append(CR.End(b))
    refs_vec = table_vector(b, AM.StartRefsVector, tables)
    AM.Start(b)
    AM.AddNodeId(b, CreateObjectId8(b, b"\x05" * 8))
    AM.AddRefs(b, refs_vec)
    array = AM.End(b)
    M.StartArraysVector(b, 1)
    b.PrependUOffsetTRelative(array)
    arrays_vec = b.EndVector()
    M.Start(b)
    M.AddId(b, CreateObjectId12(b, b"\x04" * 12))
    M.AddArrays(b, arrays_vec)
    b.Finish(M.End(b))
    return icechunk_file(MANIFEST, b)


def test_refs_sharing_one_vector_hold_one_copy_of_it():
    """4,000 refs pointing at one 256 KiB inline vector read as 4,000 refs to one bytes object, not
    a gigabyte of copies."""
    manifest = decode_manifest(_shared_inline_manifest(4000, 1 << 18), "shared")
    batches = list(manifest.source.ref_batches(ids.encode(b"\x05" * 8)))
    inline = [value for batch in batches for value in batch.inline]
    assert len(inline) == 4000 and inline[0] == bytes(range(256)) * 1024
    assert len({id(value) for value in inline}) == len(batches)


@given(st.lists(st.binary(max_size=40), min_size=256, max_size=400), st.integers(0, 7))
def test_distinct_strings_are_grouped_byte_for_byte(strings, pad):
    """The location deduplication at any alignment, strings up to the buffer's last byte included."""
    from zsarchive.icechunk.manifest.decode import _distinct

    raw = b"\xff" * pad + b"".join(s + b"\xee" for s in strings[:-1]) + strings[-1]
    ends = np.cumsum([pad] + [len(s) + 1 for s in strings])[1:] - 1
    starts = ends - np.array([len(s) for s in strings])
    found = _distinct(np.frombuffer(raw, np.uint8), starts.astype(np.int64), ends.astype(np.int64))
    if found is None:
        return
    firsts, inverse = found
    assert [strings[j] for j in firsts[inverse].tolist()] == strings
    assert len(set(firsts.tolist())) == len(set(strings))


@given(st.lists(st.integers(0, 12), max_size=60))
def test_few_distinct_values_index_every_value(values):
    """The vtable grouping: a pass per value while they are few, a sort beyond that."""
    from zsarchive.icechunk.manifest.decode import _few_distinct

    unique, inverse = _few_distinct(np.array(values, dtype=np.int64))
    assert sorted(unique.tolist()) == sorted(set(values))
    assert (unique.tolist() * len(values) if inverse is None else unique[inverse].tolist())[: len(values)] == values


@pytest.mark.parametrize("span", [7, 1000, 2**62])
def test_distinct_values_of_many_through_the_hash_table(span):
    """Thousands of values, few or all distinct (values sharing a slot go the sorting way): every
    value indexes its own first occurrence."""
    from zsarchive.icechunk.gather import distinct

    values = np.random.default_rng(span % 1000).integers(-span, span, 5000)
    firsts, inverse = distinct(values)
    assert (values[firsts][inverse] == values).all()
    assert sorted(firsts.tolist()) == sorted(np.unique(values, return_index=True)[1].tolist())


near_kinds = st.one_of(  # few values per field: refs of two manifests are often equal, or differ in one field
    st.builds(lambda data: (RefKind.INLINE, data), st.sampled_from([b"", b"x", b"xy"])),
    st.builds(
        lambda cid, off, n: (RefKind.NATIVE, cid, off, n),
        st.sampled_from([b"\x01" * 12, b"\x01" * 11 + b"\x02"]),
        st.integers(0, 1),
        st.integers(0, 1),
    ),
    st.builds(
        lambda loc, off, n, etag, mod: (RefKind.VIRTUAL, loc, off, n, etag, mod),
        st.sampled_from(["s3://b/a", "s3://b/b", "x"]),
        st.integers(0, 1),
        st.integers(0, 1),
        st.sampled_from([None, "", "e", "x"]),
        st.sampled_from([None, 0, 7]),
    ),
)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(near_kinds, near_kinds), min_size=1, max_size=12))
def test_identities_are_equal_exactly_where_the_refs_are(pairs):
    """The refs of two manifests as numbered rows (one numbering of texts for both): a fragment's diff
    takes equal rows for unchanged refs, so rows must be equal exactly when the refs are."""
    node = b"\x05" * 8
    node_id = ids.encode(node)
    texts: dict = {}
    rows = []
    for side, manifest_id in ((0, b"\x01" * 12), (1, b"\x02" * 12)):
        spec = {node: [((i,), pair[side]) for i, pair in enumerate(pairs)]}
        source = decode_manifest(build(manifest_id, spec), "built").source
        rows.append(
            np.concatenate(
                [
                    np.array(
                        [
                            np.broadcast_to(np.asarray(field, np.uint64), (len(columns.pos),))
                            for field in source.ref_identities(node_id, columns).numbered(texts)
                        ]
                    )
                    for columns in source.ref_columns(node_id)
                ],
                axis=1,
            )
        )
    for i, (a, _) in enumerate(pairs):
        for j, (_, b) in enumerate(pairs):
            assert (rows[0][:, i] == rows[1][:, j]).all() == (expected_ref((), a) == expected_ref((), b)), (a, b)
