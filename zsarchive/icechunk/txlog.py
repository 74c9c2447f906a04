"""Decode transaction logs (``transactions/<snapshot id>``), spec V1 and V2."""

from __future__ import annotations

from zsarchive.icechunk import ids
from zsarchive.icechunk.common import decoding, id8, id12
from zsarchive.icechunk.flatbuf import FlatBufferError, byte_vector, check_sorted, require, root, struct_bytes, \
    text, u32_vector
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


def _updated_chunks(log) -> dict[str, list[tuple[int, ...]]]:
    if log.UpdatedChunksIsNone():
        raise FlatBufferError("required field updated_chunks is missing")
    out: dict[str, list[tuple[int, ...]]] = {}
    for j in range(log.UpdatedChunksLength()):
        entry = log.UpdatedChunks(j)
        node_id = id8(entry.NodeId(), f"updated_chunks[{j}].node_id")
        if entry.ChunksIsNone():
            raise FlatBufferError(f"required field updated_chunks[{j}].chunks is missing")
        coords = [require(u32_vector(entry.Chunks(k), 4), f"updated_chunks[{j}].chunks[{k}].coords")
                  for k in range(entry.ChunksLength())]
        check_sorted(coords, f"updated_chunks[{j}] (node {node_id}) chunks")
        out[node_id] = coords
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
