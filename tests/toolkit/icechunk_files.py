"""Icechunk files in tests: a file's header and payload apart and back together (to damage or edit the
payload), and the shared last steps of files built with the flatc-generated builders."""

from __future__ import annotations

from typing import Callable

import flatbuffers
import zstandard

from zsarchive.icechunk import ids
from zsarchive.icechunk.generated import ArrayManifest as AM, ChunkRef as CR, Manifest as M
from zsarchive.icechunk.generated import TransactionLog as TL
from zsarchive.icechunk.generated.ObjectId8 import CreateObjectId8
from zsarchive.icechunk.generated.ObjectId12 import CreateObjectId12
from zsarchive.icechunk.header import HEADER_LENGTH, MAGIC

MANIFEST, TRANSACTION_LOG = 2, 4  # file type codes of the header


def unpack(raw: bytes) -> tuple[bytes, bytearray]:
    """An Icechunk file's header and its payload decompressed (editable)."""
    return raw[:HEADER_LENGTH], bytearray(zstandard.ZstdDecompressor().decompressobj().decompress(raw[HEADER_LENGTH:]))


def repack(header: bytes, payload: bytes | bytearray) -> bytes:
    """An Icechunk file of ``header`` and ``payload``, compressed as icechunk writes it."""
    return header + zstandard.ZstdCompressor().compress(bytes(payload))


def icechunk_file(file_type: int, builder: flatbuffers.Builder) -> bytes:
    """Header (spec version 2, zstd) and the finished FlatBuffer of ``builder``, compressed."""
    return repack(MAGIC + b"zsarchive-test".ljust(24) + bytes([2, file_type, 1]), builder.Output())


def table_vector(b: flatbuffers.Builder, start: Callable[[flatbuffers.Builder, int], None], tables: list[int]) -> int:
    """A vector of the tables at ``tables`` (offsets in ``b``), begun by the generated ``Start...Vector``."""
    start(b, len(tables))
    for off in reversed(tables):
        b.PrependUOffsetTRelative(off)
    return b.EndVector()


def first_ref_first_manifest(manifest_id: str, node_id: str, refs: list) -> bytes:
    """A manifest of one array's native and virtual ``refs`` whose first ref is laid out at the front of
    the buffer (icechunk lays it out at the end): the generated builder, given the refs last first."""
    b = flatbuffers.Builder(1 << 16)
    tables = []
    for ref in reversed(refs):
        CR.StartIndexVector(b, len(ref.index))
        for value in reversed(ref.index):
            b.PrependUint32(value)
        index = b.EndVector()
        location = None if ref.location is None else b.CreateString(ref.location)
        etag = None if ref.checksum_etag is None else b.CreateString(ref.checksum_etag)
        CR.Start(b)
        CR.AddIndex(b, index)
        CR.AddOffset(b, ref.offset)
        CR.AddLength(b, ref.length)
        if ref.chunk_id is not None:
            CR.AddChunkId(b, CreateObjectId12(b, ids.decode(ref.chunk_id, 12)))
        if location is not None:
            CR.AddLocation(b, location)
        if etag is not None:
            CR.AddChecksumEtag(b, etag)
        if ref.checksum_last_modified:
            CR.AddChecksumLastModified(b, ref.checksum_last_modified)
        tables.append(CR.End(b))
    refs_vector = table_vector(b, AM.StartRefsVector, tables[::-1])
    AM.Start(b)
    AM.AddNodeId(b, CreateObjectId8(b, ids.decode(node_id, 8)))
    AM.AddRefs(b, refs_vector)
    arrays = table_vector(b, M.StartArraysVector, [AM.End(b)])
    M.Start(b)
    M.AddId(b, CreateObjectId12(b, ids.decode(manifest_id, 12)))
    M.AddArrays(b, arrays)
    M.AddCompressionAlgorithm(b, 0)
    b.Finish(M.End(b))
    return icechunk_file(MANIFEST, b)


def finish_transaction_log(b: flatbuffers.Builder, log_id: bytes, updated_chunks: int, new_arrays: tuple = ()) -> bytes:
    """A transaction log file around an ``updated_chunks`` vector already in ``b``: id lists (only
    ``new_arrays`` filled), the root table, header and compression."""
    id_lists = []
    for values in (new_arrays, (), (), (), (), ()):
        b.StartVector(8, len(values), 1)
        for node in reversed(values):
            CreateObjectId8(b, node)
        id_lists.append(b.EndVector())
    TL.Start(b)
    TL.AddId(b, CreateObjectId12(b, log_id))
    for add, vec in zip(
        (
            TL.AddNewArrays,
            TL.AddNewGroups,
            TL.AddDeletedGroups,
            TL.AddDeletedArrays,
            TL.AddUpdatedArrays,
            TL.AddUpdatedGroups,
        ),
        id_lists,
    ):
        add(b, vec)
    TL.AddUpdatedChunks(b, updated_chunks)
    b.Finish(TL.End(b))
    return icechunk_file(TRANSACTION_LOG, b)


def replace_u64(path, old: int, new: int) -> int:
    """Replace every little-endian u64 ``old`` in the FlatBuffer of the Icechunk file at ``path``
    (a ``pathlib.Path``) by ``new``, recompressing it; return how many were replaced."""
    raw = path.read_bytes()
    body = zstandard.ZstdDecompressor().decompressobj().decompress(raw[HEADER_LENGTH:])
    before, after = old.to_bytes(8, "little"), new.to_bytes(8, "little")
    count = body.count(before)
    path.write_bytes(raw[:HEADER_LENGTH] + zstandard.ZstdCompressor().compress(body.replace(before, after)))
    return count
