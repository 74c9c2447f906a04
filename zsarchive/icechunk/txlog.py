"""Decode transaction logs (``transactions/<snapshot id>``), spec V1 and V2.

The updated chunk coordinates (one table per changed chunk, millions in a big commit) are read
straight from the little-endian FlatBuffer with ``struct``, every offset bounds-checked; the rest
goes through the generated accessors.
"""

from __future__ import annotations

import itertools
import operator
import struct

from zsarchive.icechunk import ids
from zsarchive.icechunk.common import decoding, id8, id12
from zsarchive.icechunk.flatbuf import FlatBufferError, byte_vector, check_sorted, require, root, struct_bytes, \
    text
from zsarchive.icechunk.generated.TransactionLog import TransactionLog as FbTransactionLog
from zsarchive.icechunk.header import open_file
from zsarchive.icechunk.model import FileType, MoveOperation, NodeType, TransactionLog
from zsarchive.icechunk.paths import path_key

_ID_LISTS = ("new_groups", "new_arrays", "deleted_groups", "deleted_arrays", "updated_groups", "updated_arrays")
_NODE_TYPES = {0: NodeType.GROUP, 1: NodeType.ARRAY}


def _id_list(log, field: str) -> list[str]:
    accessor = "".join(part.title() for part in field.split("_"))
    if getattr(log, accessor + "IsNone")():
        raise FlatBufferError(f"required field {field} is missing")
    get = getattr(log, accessor)
    out = [ids.encode(struct_bytes(get(j), 8)) for j in range(getattr(log, accessor + "Length")())]
    check_sorted(out, field)
    return out


_U32 = struct.Struct("<I")
_I32 = struct.Struct("<i")
_U16 = struct.Struct("<H")


def _no_table(buf, pos):
    return (pos + 1,)  # a soffset no real table has: sends the first table down the checked path


def _no_coords(buf, pos):
    return (None,)


def _indices_layout(buf, pos: int, where: str) -> tuple[int, int, struct.Struct]:
    """(vtable position, coords field offset, unpack of (soffset, coords uoffset)) of the ChunkIndices
    table at ``pos``, its vtable checked; the unpack spans the whole table, so it also checks the
    table fits in the buffer."""
    if pos + 4 > len(buf):
        raise FlatBufferError(f"{where}: table at {pos} outside the {len(buf)}-byte buffer")
    vtable = pos - _I32.unpack_from(buf, pos)[0]
    if vtable < 0 or vtable + 4 > len(buf):
        raise FlatBufferError(f"{where}: vtable of the table at {pos} is at {vtable}, outside the buffer")
    vt_size, table_size = _U16.unpack_from(buf, vtable)[0], _U16.unpack_from(buf, vtable + 2)[0]
    if vt_size < 4 or vt_size & 1 or vtable + vt_size > len(buf):
        raise FlatBufferError(f"{where}: vtable at {vtable} has an impossible size {vt_size}")
    field = _U16.unpack_from(buf, vtable + 4)[0] if vt_size >= 6 else 0
    if not field:
        raise FlatBufferError(f"required field {where}.coords is missing")
    if field < 4 or field + 4 > table_size:
        raise FlatBufferError(f"{where}: coords field at {field} lies outside its {table_size}-byte table")
    return vtable, field, struct.Struct(f"<i{field - 4}xI{table_size - field - 4}x")


def _coords_reader(buf, vec: int, where: str) -> tuple[int, struct.Struct]:
    """(length, unpack giving (length, *coords)) of the ``[uint32]`` vector at ``vec``, checked to fit."""
    if vec + 4 > len(buf):
        raise FlatBufferError(f"{where}.coords: vector at {vec} outside the buffer")
    ndim = _U32.unpack_from(buf, vec)[0]
    if vec + 4 + 4 * ndim > len(buf):
        raise FlatBufferError(f"{where}.coords: uint32 vector at {vec} of length {ndim} runs past the buffer end")
    return ndim, struct.Struct(f"<{ndim + 1}I")


def _chunk_coords(buf, start: int, count: int, what: str, sorted_what: str) -> list[tuple[int, ...]]:
    """Coords of the ``count`` ChunkIndices tables whose offsets start at ``start``, checked to be sorted
    as the spec demands (``what`` and ``sorted_what`` name them in errors). Consecutive tables nearly always share one vtable and dimensionality, so the previous
    ones are tried first and confirmed by the soffset and vector length their struct calls return.
    Every position here is a sum of unsigned values, never negative, so struct's own length check
    bounds-checks each read (struct.error means an offset points outside the buffer).
    """
    if start + 4 * count > len(buf):
        raise FlatBufferError(f"{what}: vector at {start} of length {count} runs past the buffer end")
    out: list[tuple[int, ...]] = []
    append = out.append
    vtable, field, unpack = None, 0, _no_table
    ndim, coords_unpack = -1, _no_coords
    slot = start
    try:
        for rel in struct.unpack_from(f"<{count}I", buf, start):
            pos = slot + rel
            slot += 4
            try:
                values = unpack(buf, pos)
            except struct.error:  # a smaller table may end the buffer: take the checked path
                values = (pos + 1,)
            if pos - values[0] != vtable:
                vtable, field, layout = _indices_layout(buf, pos, f"{what}[{(slot - start) // 4 - 1}]")
                unpack = layout.unpack_from
                values = unpack(buf, pos)
            vec = pos + field + values[1]
            try:
                coords = coords_unpack(buf, vec)
            except struct.error:  # a shorter vector may end the buffer: let _coords_reader judge it
                coords = (None,)
            if coords[0] != ndim:
                ndim, reader = _coords_reader(buf, vec, f"{what}[{(slot - start) // 4 - 1}]")
                coords_unpack = reader.unpack_from
                coords = coords_unpack(buf, vec)
            append(coords[1:])
    except struct.error:
        raise FlatBufferError(f"{what}[{(slot - start) // 4 - 1}]: an offset points outside the "
                              f"{len(buf)}-byte buffer") from None
    # Sortedness checked at C speed; check_sorted only runs to name the offending entry.
    if not all(map(operator.lt, out, itertools.islice(out, 1, None))):
        check_sorted(out, sorted_what)
    return out


def _updated_chunks(log) -> dict[str, list[tuple[int, ...]]]:
    if log.UpdatedChunksIsNone():
        raise FlatBufferError("required field updated_chunks is missing")
    out: dict[str, list[tuple[int, ...]]] = {}
    for j in range(log.UpdatedChunksLength()):
        entry = log.UpdatedChunks(j)
        node_id = id8(entry.NodeId(), f"updated_chunks[{j}].node_id")
        tab = entry._tab
        off = tab.Offset(6)
        if not off:
            raise FlatBufferError(f"required field updated_chunks[{j}].chunks is missing")
        out[node_id] = _chunk_coords(tab.Bytes, tab.Vector(off), tab.VectorLen(off), f"updated_chunks[{j}].chunks",
                                     f"updated_chunks[{j}] (node {node_id}) chunks")
    check_sorted(list(out), "updated_chunks (by node_id)")
    return out


def _moves(log) -> list[MoveOperation]:
    moves = []
    for j in range(log.MovedNodesLength()):
        move = log.MovedNodes(j)
        what = f"moved_nodes[{j}]"
        node_type = move.NodeType()
        if node_type not in _NODE_TYPES:
            raise FlatBufferError(f"{what}.node_type has unknown value {node_type}")
        node = move.NodeId()
        moves.append(MoveOperation(
            text(require(move.From_(), f"{what}.from"), f"{what}.from"),
            text(require(move.To(), f"{what}.to"), f"{what}.to"),
            None if node is None else ids.encode(struct_bytes(node, 8)),
            _NODE_TYPES[node_type],
        ))
    check_sorted([path_key(m.to_path) for m in moves], "moved_nodes (by to path)")
    return moves


def decode_transaction_log(raw: bytes, name: str) -> TransactionLog:
    """Decode a transaction log file (``name`` is used in error messages)."""
    header, payload = open_file(raw, name, FileType.TRANSACTION_LOG)
    with decoding(name):
        log = root(FbTransactionLog, payload)
        lists = {field: _id_list(log, field) for field in _ID_LISTS}
        return TransactionLog(
            header=header,
            id=id12(log.Id(), "id"),
            updated_chunks=_updated_chunks(log),
            moved_nodes=_moves(log),
            extra=byte_vector(log, 22),
            **lists,
        )
