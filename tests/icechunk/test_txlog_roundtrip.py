"""The direct (struct) decoder of transaction-log chunk coordinates against logs built with the
flatc-generated builders.

icechunk's own files cover the layouts it writes; these cover what the schema allows: several arrays,
0-d to 4-d coordinates (mixed within one array), tables in either order in the buffer, and damage
that must be reported as corruption of the named file.
"""

from __future__ import annotations

import re

import flatbuffers
import pytest
from hypothesis import given, settings, strategies as st

from toolkit.icechunk_files import finish_transaction_log, repack, table_vector, unpack
from zsarchive.errors import ZSCorrupt
from zsarchive.icechunk import ids
from zsarchive.icechunk.generated import ArrayUpdatedChunks as AUC
from zsarchive.icechunk.generated import ChunkIndices as CI
from zsarchive.icechunk.generated import TransactionLog as TL
from zsarchive.icechunk.generated.ObjectId8 import CreateObjectId8
from zsarchive.icechunk.txlog import decode_transaction_log

u32 = st.integers(0, 2**32 - 1)


@st.composite
def updated_chunks(draw):
    """{node id bytes: sorted unique coordinate tuples} for a few arrays of 0 to 4 dimensions."""
    nodes = draw(st.lists(st.binary(min_size=8, max_size=8), max_size=3, unique=True))
    out = {}
    for node in sorted(nodes):
        ndim = draw(st.integers(0, 4))
        coords = st.tuples(*[u32] * ndim)
        out[node] = sorted(draw(st.lists(coords, max_size=1 if ndim == 0 else 15, unique=True)))
    return out


def build(log_id: bytes, chunks: dict, reverse_tables: bool = False, new_arrays: tuple = ()) -> bytes:
    """A transaction log file (header + zstd FlatBuffer) built with the generated builder functions.

    ``reverse_tables`` builds each array's ChunkIndices tables last to first, so the last one read
    sits nearest the buffer end (the decoder's guessed layout must not overrun it).
    """
    b = flatbuffers.Builder(1024)
    entries = []
    for node, coords_list in chunks.items():
        tables = []
        for index in reversed(coords_list) if reverse_tables else coords_list:
            CI.StartCoordsVector(b, len(index))
            for i in reversed(index):
                b.PrependUint32(i)
            vec = b.EndVector()
            CI.Start(b)
            CI.AddCoords(b, vec)
            tables.append(CI.End(b))
        if reverse_tables:
            tables.reverse()
        chunks_vec = table_vector(b, AUC.StartChunksVector, tables)
        AUC.Start(b)
        AUC.AddNodeId(b, CreateObjectId8(b, node))
        AUC.AddChunks(b, chunks_vec)
        entries.append(AUC.End(b))
    return finish_transaction_log(b, log_id, table_vector(b, TL.StartUpdatedChunksVector, entries), new_arrays)


@settings(max_examples=150, deadline=None)
@given(st.binary(min_size=12, max_size=12), updated_chunks(), st.booleans())
def test_direct_decoder_reads_what_the_builder_wrote(log_id, chunks, reverse_tables):
    log = decode_transaction_log(build(log_id, chunks, reverse_tables, new_arrays=tuple(chunks)), "built")
    assert log.id == ids.encode(log_id)
    assert log.new_arrays == [ids.encode(n) for n in chunks]
    assert log.updated_chunks == {ids.encode(node): c for node, c in chunks.items()}


@settings(max_examples=60, deadline=None)
@given(st.binary(min_size=12, max_size=12), updated_chunks(), st.booleans(), st.integers(1, 3))
def test_chunks_read_a_batch_at_a_time_are_the_same(log_id, chunks, reverse_tables, batch):
    """Batches of 1 to 3 chunk tables (their edges anywhere, a vtable first met in a later batch) read as
    the whole vector does."""
    from zsarchive.icechunk import txlog

    raw = build(log_id, chunks, reverse_tables)
    whole = decode_transaction_log(raw, "built")
    original, txlog._BATCH = txlog._BATCH, batch
    try:
        assert decode_transaction_log(raw, "built").updated_chunks == whole.updated_chunks
    finally:
        txlog._BATCH = original


@pytest.mark.parametrize("which", [0, 3])
def test_an_offset_outside_the_buffer_is_named_in_a_later_batch(which, monkeypatch):
    from zsarchive.icechunk import txlog

    monkeypatch.setattr(txlog, "_BATCH", 2)
    header, payload = unpack(build(b"\x01" * 12, CHUNKS))
    start = _chunk_tables_vector(payload, 4)
    payload[start + 4 * which : start + 4 * which + 4] = (len(payload) - start).to_bytes(4, "little")
    with pytest.raises(ZSCorrupt, match=rf"^log-b: updated_chunks\[0\]\.chunks\[{which}\]"):
        decode_transaction_log(repack(header, payload), "log-b")


def _chunk_tables_vector(payload: bytes, count: int) -> int:
    """Position of the ``count``-long offsets vector of the (only) array's ChunkIndices tables."""
    log = TL.TransactionLog.GetRootAs(payload)
    tab = log.UpdatedChunks(0)._tab
    off = tab.Offset(6)
    assert tab.VectorLen(off) == count
    return tab.Vector(off)


CHUNKS = {b"\x07" * 8: [(0, 0), (0, 1), (1, 0), (2, 5)]}


def test_unsorted_coordinates_are_read_as_written():
    """icechunk 1.1 writes a log's chunks in hash-set order (and reads them so in its diff)."""
    chunks = [(2, 5), (0, 1), (1, 0), (0, 0)]
    log = decode_transaction_log(build(b"\x01" * 12, {b"\x07" * 8: chunks}), "log-a")
    assert list(log.updated_chunks.values()) == [chunks]


@pytest.mark.parametrize("chunks, first, again", [([(0, 1), (3, 3), (0, 1)], 0, 2), ([(), ()], 0, 1)])
def test_repeated_coordinates_are_corrupt(chunks, first, again):
    raw = build(b"\x01" * 12, {b"\x07" * 8: chunks})
    with pytest.raises(
        ZSCorrupt,
        match=rf"^log-a: updated_chunks\[0\] \(node \w+\) chunks MUST NOT repeat a "
        rf"chunk, but entry {again} \({re.escape(repr(chunks[again]))}\) "
        rf"repeats entry {first}$",
    ):
        decode_transaction_log(raw, "log-a")


@pytest.mark.parametrize("which", [0, 3])
def test_table_offset_outside_the_buffer_is_corrupt(which):
    header, payload = unpack(build(b"\x01" * 12, CHUNKS))
    start = _chunk_tables_vector(payload, 4)
    payload[start + 4 * which : start + 4 * which + 4] = (len(payload) - start).to_bytes(4, "little")
    with pytest.raises(ZSCorrupt, match=rf"^log-b: updated_chunks\[0\]\.chunks\[{which}\]"):
        decode_transaction_log(repack(header, payload), "log-b")


def test_coords_vector_running_past_the_end_is_corrupt():
    header, payload = unpack(build(b"\x01" * 12, CHUNKS))
    start = _chunk_tables_vector(payload, 4)
    table = start + 12 + int.from_bytes(payload[start + 12 : start + 16], "little")
    field = table + 4  # the builder puts the one field right after the soffset
    vec = field + int.from_bytes(payload[field : field + 4], "little")
    payload[vec : vec + 4] = (1 << 30).to_bytes(4, "little")
    with pytest.raises(ZSCorrupt, match=r"^log-c: updated_chunks\[0\]\.chunks\[3\]\.coords: uint32 vector"):
        decode_transaction_log(repack(header, payload), "log-c")


def test_chunk_table_without_coords_is_corrupt():
    header, payload = unpack(build(b"\x01" * 12, CHUNKS))
    start = _chunk_tables_vector(payload, 4)
    table = start + int.from_bytes(payload[start : start + 4], "little")
    vtable = table - int.from_bytes(payload[table : table + 4], "little", signed=True)
    payload[vtable + 4 : vtable + 6] = b"\x00\x00"  # every table shares this vtable: coords absent
    with pytest.raises(
        ZSCorrupt,
        match=r"^log-d: required field updated_chunks\[0\]\.chunks\[0\]\.coords is "
        r"missing",
    ):
        decode_transaction_log(repack(header, payload), "log-d")


def test_coordinates_of_different_lengths_in_one_array_are_corrupt():
    raw = build(b"\x01" * 12, {b"\x07" * 8: [(0, 0), (0, 1), (1,)]})
    with pytest.raises(
        ZSCorrupt,
        match=r"^log-e: updated_chunks\[0\]\.chunks\[2\]\.coords: uint32 vector at \d+ "
        r"has 1 coordinates, the entries before it 2$",
    ):
        decode_transaction_log(raw, "log-e")
