"""The manifest encoder: laid out as icechunk lays a manifest out, a batch of refs at a time.

Held against icechunk 2.3's own files (every manifest of a repository with every kind of ref comes back
byte for byte, whatever the batch edges), against our decoder for any refs the schema allows, and held
to a memory bound: a batch's temporaries, never the whole payload.
"""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from zsarchive.icechunk.manifest import encode as E
from zsarchive.icechunk.manifest.decode import decode_manifest
from zsarchive.icechunk.manifest.encode import encode_manifest
from zsarchive.icechunk.manifest.refs import RefTable
from zsarchive.icechunk.model import ChunkRef, RefKind


def encoded_again(raw: bytes, name: str) -> bytes:
    manifest = decode_manifest(raw, name)
    arrays = [(a.node_id, list(manifest.chunk_refs(a.node_id))) for a in manifest.arrays]
    return encode_manifest(
        manifest.id,
        arrays,
        manifest.header.spec_version,
        manifest.header.implementation,
        location_dictionary=manifest.location_dictionary,
    )


@pytest.mark.parametrize("batch", [1, 7, 1000, E._BATCH])
def test_icechunk_manifests_come_back_byte_for_byte_at_any_batch_edge(refs_history, monkeypatch, batch):
    """Virtual refs with locations of 14 to 60 bytes compressed with a dictionary, last-modified times and
    etags, native refs among them, offsets of 0: each vtable written where icechunk writes it, the tables
    after it aligned as icechunk aligns them, across batches of any size."""
    monkeypatch.setattr(E, "_BATCH", batch)
    paths = sorted((refs_history / "manifests").iterdir())
    assert len(paths) >= 2
    for path in paths:
        raw = path.read_bytes()
        assert encoded_again(raw, str(path)) == raw, path


locations = st.sampled_from(["s3://b/f.nc", "s3://bucket/granules/file0001.nc", "", "é/🧊", "x" * 61])
refs = st.one_of(
    st.builds(lambda data: (RefKind.INLINE, data), st.binary(max_size=40)),
    st.builds(
        lambda cid, off, n: (RefKind.NATIVE, cid, off, n),
        st.sampled_from(["0" * 20, "ABCDEFGHJKMNPQRSTVW0"]),
        st.sampled_from([0, 1, 2**40, 2**64 - 1]),
        st.sampled_from([0, 7, 2**33]),
    ),
    st.builds(
        lambda loc, off, n, etag, mod: (RefKind.VIRTUAL, loc, off, n, etag, mod),
        locations,
        st.sampled_from([0, 4000, 2**63]),
        st.sampled_from([0, 4000]),
        st.none() | st.sampled_from(["", "e1"]),
        st.none() | st.sampled_from([1, 2**32 - 1]),
    ),
)


def _ref(index: tuple, spec: tuple) -> ChunkRef:
    kind = spec[0]
    if kind is RefKind.INLINE:
        return ChunkRef(index, kind, inline=spec[1])
    if kind is RefKind.NATIVE:
        return ChunkRef(index, kind, chunk_id=spec[1], offset=spec[2], length=spec[3])
    return ChunkRef(
        index,
        kind,
        location=spec[1],
        offset=spec[2],
        length=spec[3],
        checksum_etag=spec[4],
        checksum_last_modified=spec[5],
    )


@st.composite
def manifests(draw):
    arrays = []
    for node in sorted(draw(st.sets(st.sampled_from(["A" * 12 + "0", "B" * 12 + "0", "C" * 12 + "0"]), min_size=1))):
        ndim = draw(st.integers(0, 4))
        indexes = sorted(
            draw(st.sets(st.tuples(*[st.integers(0, 2**32 - 1)] * ndim), min_size=1, max_size=1 if ndim == 0 else 30))
        )
        arrays.append((node, [_ref(index, draw(refs)) for index in indexes]))
    return arrays


@settings(max_examples=150, deadline=None)
@given(manifests(), st.sampled_from([(2, True), (2, False), (1, False)]), st.integers(1, 9))
def test_any_refs_decode_back(arrays, form, batch):
    """Every kind of ref in any order of layouts (tables with and without an 8-byte field one after the
    other, vtables first written in a later batch), 0-d to 4-d, V1 and V2, plain and compressed locations."""
    spec_version, packed = form
    dictionary = bytes(range(8)) * 8 if packed else None  # a raw-content zstd dictionary
    original = E._BATCH
    E._BATCH = batch
    try:
        raw = encode_manifest("M" * 19 + "0", arrays, spec_version, "ic-2.3.0", location_dictionary=dictionary)
    finally:
        E._BATCH = original
    manifest = decode_manifest(raw, "encoded")
    assert manifest.header.spec_version == spec_version and manifest.location_dictionary == dictionary
    for node, expected in arrays:
        got = list(manifest.chunk_refs(node))
        assert got == [r._replace(checksum_last_modified=r.checksum_last_modified or None) for r in expected]
        if packed and any(r.kind is RefKind.VIRTUAL for r in expected):
            assert manifest.compressed_locations(node) == sum(r.kind is RefKind.VIRTUAL for r in expected)


@given(
    st.lists(st.binary(min_size=12, max_size=12), min_size=1, max_size=40),
    st.integers(0, 39),
    st.sampled_from(["", "U", "?", "é", "1", "0"]),
)
def test_many_chunk_ids_decode_as_each_does(raws, at, damage):
    """The encoder's batch of chunk ids read as :func:`ids.decode` reads each, and refused as it refuses one
    (a letter outside the alphabet, a wrong length, padding bits set)."""
    from zsarchive.errors import ZSError
    from zsarchive.icechunk import ids

    texts = [ids.encode(raw) for raw in raws]
    assert ids.decode_many(texts, 12).tobytes() == b"".join(raws)
    at %= len(texts)
    texts[at] = texts[at][:-1] + damage if damage != "0" else texts[at][:-1] + "1"
    try:
        ids.decode(texts[at], 12)
    except ZSError as exc:
        with pytest.raises(ZSError) as caught:
            ids.decode_many(texts, 12)
        assert str(caught.value) == str(exc)


def _peak(n: int) -> tuple[int, int]:
    """(peak bytes the encoder allocates for ``n`` virtual refs, their payload's size)."""
    texts = [f"s3://bucket/granules/file{j:04d}.nc" for j in range(1000)]
    table = RefTable(
        np.stack([np.arange(n), np.zeros(n, np.int64)], axis=1).astype(np.uint32),
        np.full(n, 2, np.uint8),
        np.arange(n, dtype=np.int64) % 1000,
        texts,
        4000 * (np.arange(n, dtype=np.uint64) // 1000),
        np.full(n, 4000, np.uint64),
        np.full(n, -1, np.int64),
        [],
        np.zeros(n, np.uint32),
        np.full(n, -1, np.int64),
        [],
    )
    tracemalloc.start()
    try:
        raw = encode_manifest("M" * 19 + "0", [("A" * 12 + "0", table)], 2, "ic-2.3.0")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    manifest = decode_manifest(raw, "big")
    assert manifest.arrays[0].num_chunk_refs == n
    return peak, manifest.payload_size


def test_memory_is_a_batchs_not_the_payloads(monkeypatch):
    """The payload (~84 bytes a ref here) is never whole in memory: what the encoder allocates grows with
    the refs by each ref's table position and its share of the compressed file (~20 bytes a ref), the
    rest is one batch's."""
    monkeypatch.setattr(E, "_BATCH", 1 << 15)
    small, large = _peak(100_000), _peak(400_000)
    per_ref = (large[0] - small[0]) / 300_000
    payload_per_ref = (large[1] - small[1]) / 300_000
    assert payload_per_ref > 80 and per_ref < payload_per_ref / 3, (per_ref, payload_per_ref)
