"""Decode transaction logs (``transactions/<snapshot id>``), spec V1 and V2.

The updated chunk coordinates (one table per changed chunk, millions in a big commit) are read
straight from the little-endian FlatBuffer with numpy gathers, every offset bounds-checked; the
rest goes through the generated accessors.
"""

from __future__ import annotations

import functools

import numpy as np

from zsarchive.icechunk import ids
from zsarchive.icechunk.common import ForwardWriter, decoding, id8, id12, vtable_bytes
from zsarchive.icechunk.flatbuf import (
    FlatBufferError,
    byte_vector,
    check_sorted,
    require,
    root,
    struct_bytes,
    text,
    vtable_slots,
)
from zsarchive.icechunk.gather import first, first_unsorted, gather, offset_vector, uint32_vectors
from zsarchive.icechunk.generated.NodeType import NodeType as FbNodeType
from zsarchive.icechunk.generated.TransactionLog import TransactionLog as FbTransactionLog
from zsarchive.icechunk.header import IMPLEMENTATION, open_file, wrap_file
from zsarchive.icechunk.model import FileType, MoveOperation, NodeType, TransactionLog
from zsarchive.icechunk.paths import path_key

_ID_LISTS = ("new_groups", "new_arrays", "deleted_groups", "deleted_arrays", "updated_groups", "updated_arrays")
_NODE_TYPES = {FbNodeType.Group: NodeType.GROUP, FbNodeType.Array: NodeType.ARRAY}
"""A move's node type as the log's flatbuffer codes it, and back."""
_NODE_TYPE_CODES = {node_type: code for code, node_type in _NODE_TYPES.items()}
_BATCH = 1 << 20
"""Updated chunks decoded per step of a transaction log (bounds the temporary arrays)."""


def _id_list(log, field: str) -> list[str]:
    accessor = "".join(part.title() for part in field.split("_"))
    if getattr(log, accessor + "IsNone")():
        raise FlatBufferError(f"required field {field} is missing")
    get = getattr(log, accessor)
    out = [ids.encode(struct_bytes(get(j), 8)) for j in range(getattr(log, accessor + "Length")())]
    check_sorted(out, field)
    return out


def _indices_layout(buf, vtable: int, where: str) -> tuple[int, int]:
    """(coords field offset, table size) of ChunkIndices tables with the vtable at ``vtable``, checked."""
    table_size, (field,) = vtable_slots(buf, vtable, 1, where)
    if not field:
        raise FlatBufferError(f"required field {where}.coords is missing")
    if field < 4 or field + 4 > table_size:
        raise FlatBufferError(f"{where}: coords field at {field} lies outside its {table_size}-byte table")
    return field, table_size


def _chunk_coords(buf, start: int, count: int, what: str, unique_what: str) -> np.ndarray:
    """Coords of the ``count`` ChunkIndices tables whose offsets start at ``start``, as a (count, ndim)
    matrix in the file's order, checked to hold no chunk twice (``what`` and ``unique_what`` name them
    in errors). icechunk 1.1 writes them in hash-set order, 2.x sorted: both are read as written."""
    size = len(buf)
    if start + 4 * count > size:
        raise FlatBufferError(f"{what}: vector at {start} of length {count} runs past the buffer end")
    b = np.frombuffer(buf, np.uint8)
    layouts: dict[int, tuple[int, int]] = {}
    parts: list[np.ndarray] = []
    for lo in range(0, count, _BATCH):  # a batch at a time: the temporaries stay a batch's
        hi = min(count, lo + _BATCH)
        pos = offset_vector(buf, start, lo, hi)
        if (j := first(pos + 4 > size)) is not None:
            raise FlatBufferError(f"{what}[{lo + j}]: an offset points outside the {size}-byte buffer")
        vtables = pos - gather(b, pos, "<i4")
        if (vtables == vtables[0]).all():  # one vtable for all (as icechunk writes them): no sort
            unique, inverse = vtables[:1], None
        else:
            unique, inverse = np.unique(vtables, return_inverse=True)
        for v in unique.tolist():
            if v not in layouts:
                layouts[v] = _indices_layout(buf, v, f"{what}[{lo + int((vtables == v).argmax())}]")
        table = np.array([layouts[v] for v in unique.tolist()], dtype=np.int64).reshape(-1, 2)
        fields = np.broadcast_to(table, (hi - lo, 2)) if inverse is None else table[inverse]
        if (j := first(pos + fields[:, 1] > size)) is not None:
            raise FlatBufferError(f"{what}[{lo + j}]: an offset points outside the {size}-byte buffer")
        at = pos + fields[:, 0]
        parts.append(
            uint32_vectors(
                b,
                at + gather(b, at, "<u4"),
                functools.partial(_coords_name, what, lo),
                parts[0].shape[1] if parts else None,
            )
        )
    coords = parts[0] if len(parts) == 1 else np.concatenate(parts) if parts else np.zeros((0, 0), np.uint32)
    del parts
    if first_unsorted(coords) is None:  # strictly ascending (as 2.x writes them): no chunk twice
        return coords
    order = np.lexsort(coords.T[::-1]) if coords.shape[1] else np.arange(len(coords))
    if (j := first_unsorted(coords[order])) is not None:
        first_at, again_at = sorted(order[j - 1 : j + 1].tolist())
        raise FlatBufferError(
            f"{unique_what} MUST NOT repeat a chunk, but entry {again_at} "
            f"({tuple(coords[again_at].tolist())!r}) repeats entry {first_at}"
        )
    return coords


def _coords_name(what: str, lo: int, j: int) -> str:
    """How a message names the coordinates of entry ``lo + j`` of ``what``."""
    return f"{what}[{lo + j}].coords"


def _updated_chunks(log) -> dict[str, np.ndarray]:
    if log.UpdatedChunksIsNone():
        raise FlatBufferError("required field updated_chunks is missing")
    out: dict[str, np.ndarray] = {}
    for j in range(log.UpdatedChunksLength()):
        entry = log.UpdatedChunks(j)
        node_id = id8(entry.NodeId(), f"updated_chunks[{j}].node_id")
        tab = entry._tab
        off = tab.Offset(6)
        if not off:
            raise FlatBufferError(f"required field updated_chunks[{j}].chunks is missing")
        out[node_id] = _chunk_coords(
            tab.Bytes,
            tab.Vector(off),
            tab.VectorLen(off),
            f"updated_chunks[{j}].chunks",
            f"updated_chunks[{j}] (node {node_id}) chunks",
        )
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
        moves.append(
            MoveOperation(
                text(require(move.From_(), f"{what}.from"), f"{what}.from"),
                text(require(move.To(), f"{what}.to"), f"{what}.to"),
                None if node is None else ids.encode(struct_bytes(node, 8)),
                _NODE_TYPES[node_type],
            )
        )
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
            updated_coords=_updated_chunks(log),
            moved_nodes=_moves(log),
            extra=byte_vector(log, 22),
            **lists,
        )


def merge_transaction_logs(logs: list[TransactionLog]) -> TransactionLog:
    """One log holding every change of ``logs`` (oldest first; the last one names the result), as
    icechunk merges a snapshot's own log with those of the ancestors expiration pruned from under it:
    id lists and chunk lists united, each node's moves joined into one (first origin, last
    destination) and dropped where it ends where it began."""
    own = logs[-1]
    lists = {field: sorted({i for log in logs for i in getattr(log, field)}) for field in _ID_LISTS}
    coords: dict[str, list[np.ndarray]] = {}
    for log in logs:
        for node_id, table in log.updated_coords.items():
            coords.setdefault(node_id, []).append(table)
    moves: dict[str | None, MoveOperation] = {}
    for log in logs:
        for move in log.moved_nodes:
            first_move = moves.get(move.node_id)
            moves[move.node_id] = (
                move
                if first_move is None
                else MoveOperation(first_move.from_path, move.to_path, move.node_id, move.node_type)
            )
    return TransactionLog(
        header=own.header,
        id=own.id,
        updated_coords={node_id: _union_rows(tables) for node_id, tables in sorted(coords.items())},
        moved_nodes=sorted((m for m in moves.values() if m.from_path != m.to_path), key=lambda m: path_key(m.to_path)),
        extra=own.extra,
        **lists,
    )


def _union_rows(tables: list[np.ndarray]) -> np.ndarray:
    """The distinct rows of coordinate matrices, ascending."""
    rows = np.concatenate(tables)
    if not rows.shape[1]:
        return rows[:1]
    return np.unique(rows, axis=0)


# -- encoding ------------------------------------------------------------------------------------
#
# A big commit changes millions of chunks, one ChunkIndices table each: the log is laid out directly,
# front to back (parents before children, so offsets point forward), each array's chunk tables with
# numpy at a fixed stride (table, then its coordinates vector).

_LIST_SLOTS = ("new_groups", "new_arrays", "deleted_groups", "deleted_arrays", "updated_arrays", "updated_groups")
"""The id lists in the order of their fields in the schema (slots 1 to 6)."""


def encode_transaction_log(log: TransactionLog, spec_version: int, implementation: str = IMPLEMENTATION) -> bytes:
    """A transaction log file holding ``log``: id lists and updated chunks sorted by bytes, moves by
    ``to`` path component by component (V2 only: V1 has no moves), as icechunk expects."""
    w = ForwardWriter()
    w.reserve(4)
    buf = w.buf
    moves = spec_version >= 2
    size = 48 if moves else 44
    vt_log = len(buf)
    buf += vtable_bytes((size - 12, 4, 8, 12, 16, 20, 24, 28) + ((32,) if moves else ()), size)
    vt_array = w.align(2)
    buf += vtable_bytes((8, 4), 16)
    vt_chunk = w.align(2)
    buf += vtable_bytes((4,), 8)
    vt_move = w.align(2)
    buf += vtable_bytes((4, 8, 12, 20), 21)
    root = w.table(vt_log, size)
    w.point(0, root)
    buf[root + size - 12 : root + size] = ids.decode(log.id, 12)
    for slot, field in enumerate(_LIST_SLOTS):
        values = sorted(getattr(log, field))
        w.point(root + 4 + 4 * slot, w.blob(b"".join(ids.decode(v, 8) for v in values), count=len(values)))
    nodes = sorted(log.updated_coords)
    vector = w.vector(len(nodes), 4)
    w.point(root + 28, vector)
    for j, node_id in enumerate(nodes):
        array = w.table(vt_array, 16)
        w.point(vector + 4 + 4 * j, array)
        buf[array + 8 : array + 16] = ids.decode(node_id, 8)
        coords = np.asarray(log.updated_coords[node_id], dtype=np.int64)
        count, ndim = coords.shape if coords.ndim == 2 else (len(coords), 0)
        if count > 1 and ndim and first_unsorted(coords) is not None:  # a restore's come sorted already
            coords = coords[np.lexsort(coords.T[::-1])]
        chunks = w.vector(count, 4)
        w.point(array + 4, chunks)
        stride = 12 + 4 * ndim  # the table (soffset, coords offset), then the vector (length, coords)
        first = len(buf)
        buf += bytes(stride * count)
        # written in place, a word column at a time: no copy of the tables beside the buffer
        words = np.frombuffer(buf, "<u4", (len(buf) - chunks - 4) // 4, chunks + 4)
        words[:count] = (first - chunks - 4) + (stride - 4) * np.arange(count, dtype=np.int64)  # the vector's offsets
        rows = words[count:].reshape(count, 3 + ndim)
        rows[:, 0] = (first - vt_chunk) + stride * np.arange(count, dtype=np.int64)
        rows[:, 1] = 4
        rows[:, 2] = ndim
        rows[:, 3:] = coords.reshape(count, ndim)
        del words, rows
    if moves:
        ordered = sorted(log.moved_nodes, key=lambda m: path_key(m.to_path))
        vector = w.vector(len(ordered), 4)
        w.point(root + 32, vector)
        for j, move in enumerate(ordered):
            at = w.table(vt_move, 24)
            w.point(vector + 4 + 4 * j, at)
            if move.node_id is not None:
                buf[at + 12 : at + 20] = ids.decode(move.node_id, 8)
            buf[at + 20] = (
                FbNodeType.Group if move.node_type is None else _NODE_TYPE_CODES.get(move.node_type, FbNodeType.Group)
            )
            w.point(at + 4, w.blob(move.from_path.encode("utf-8"), terminate=True))
            w.point(at + 8, w.blob(move.to_path.encode("utf-8"), terminate=True))
    return wrap_file(FileType.TRANSACTION_LOG, spec_version, buf, implementation)
