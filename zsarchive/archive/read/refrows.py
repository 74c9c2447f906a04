"""One array's chunk ref records (format 2, family ``C``) as columns, decoded a batch at a time: the
restore reads millions of them, and one record at a time that costs more than everything else it does."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from zsarchive.archive.format import schema, tuples
from zsarchive.archive.format.refrecords import key_layout, value_columns
from zsarchive.archive.format.tuplecolumns import Columns
from zsarchive.archive.format.views import ChunkRefKey, ChunkRefValue
from zsarchive.errors import MALFORMED, RecordFault, ZSCorrupt
from zsarchive.zs.reader import ZS


@dataclass
class ChunkRefRows:
    """The ``C`` records of one array in key order (coordinates, then snapshot id), one row each."""

    coords: np.ndarray
    """(rows, ndim) int64."""
    snapshot: np.ndarray
    """Index into ``snapshot_ids`` of the snapshot that made each change."""
    snapshot_ids: list[str]
    kind: np.ndarray
    """``schema.INLINE`` ... ``schema.REMOVED``."""
    text: np.ndarray
    """Index into ``texts`` of a native ref's chunk id or a virtual ref's location (-1: none)."""
    texts: list[str]
    offset: np.ndarray
    length: np.ndarray
    checksum_etag: list
    checksum_last_modified: list
    inline: dict[int, bytes]
    """Row -> the bytes of an inline ref."""

    def __len__(self) -> int:
        return len(self.kind)


def _bulk(buf: bytes, starts: np.ndarray, ends: np.ndarray, skip: int) -> ChunkRefRows | None:
    """The rows of the records ``buf[starts[i]:ends[i]]`` decoded a batch at a time, or None when some
    record is not in the common shapes."""
    at = int(starts[0]) + skip
    ndim = len(tuples.decode(buf, at, ends[0], what="chunk ref key")[0][0]) if buf[at] == tuples.TUPLE else -1
    if ndim < 0:
        return None
    decoder = Columns(buf)
    key_columns = decoder.decode(starts + skip, ends, key_layout(ndim, closed=True))
    if key_columns is None:
        return None
    columns, pos = key_columns
    values = value_columns(decoder, pos, ends)
    if values is None:
        return None
    kind, (text_begin, text_stop), offset, length, *checks = values
    try:
        snapshot, snapshot_ids = decoder.texts(*columns[-1])
        text, texts = decoder.texts(text_begin, text_stop)
        if checks:
            (etag_begin, etag_stop, etag_present), (modified, modified_present) = checks
            etags = [None] * len(starts)
            if etag_present.any():
                codes, names = decoder.texts(etag_begin, etag_stop)
                etags = [names[c] if p else None for c, p in zip(codes.tolist(), etag_present.tolist())]
            modifieds = [None] * len(starts)
            if modified_present.any():
                modifieds = [m if p else None for m, p in zip(modified.tolist(), modified_present.tolist())]
        else:
            etags = modifieds = [None] * len(starts)
    except UnicodeDecodeError:
        return None
    coords = np.stack(columns[:ndim], axis=1).astype(np.int64) if ndim else np.zeros((len(starts), 0), np.int64)
    return ChunkRefRows(
        coords, snapshot, snapshot_ids, kind.astype(np.int8), text, texts, offset, length, etags, modifieds, {}
    )


def _one_by_one(records: list[bytes], node_id: str) -> ChunkRefRows:
    """The rows decoded record by record (any record the bulk decoder does not take)."""
    coords, sids, kinds, text, offsets, lengths, etags, modifieds, inline = [], [], [], [], [], [], [], [], {}
    snapshots: dict[str, int] = {}
    texts: dict[str, int] = {}
    for rec in records:
        _, k, raw = schema.split(rec)
        try:  # the record's own shape is checked where it is validated, after its array's rows are read
            key, value = ChunkRefKey.decode(k), ChunkRefValue.decode(raw)
            where, sid = key.coords, key.snapshot_id
            if coords and len(where) != len(coords[0]):
                raise ZSCorrupt(
                    f"chunk ref record of array {node_id} at {where}: {len(where)} coordinates, not {len(coords[0])}"
                )
            if value.kind == schema.INLINE:
                inline[len(kinds)] = bytes(value.inline)
            named = value.chunk_id if value.kind == schema.NATIVE else value.location
            text.append(-1 if named is None else texts.setdefault(named, len(texts)))
            sids.append(snapshots.setdefault(sid, len(snapshots)))
        except MALFORMED as exc:
            raise schema.fault(schema.CHUNK_REF, k, f"has a malformed value: {exc}") from None
        coords.append(where)
        kinds.append(value.kind)
        offsets.append(value.offset)
        lengths.append(value.length)
        etags.append(value.checksum_etag)
        modifieds.append(value.checksum_last_modified)
    ndim = len(coords[0]) if coords else 0
    try:
        return ChunkRefRows(
            np.array(coords, np.int64).reshape(len(coords), ndim),
            np.array(sids, np.int64),
            list(snapshots),
            np.array(kinds, np.int8),
            np.array(text, np.int64),
            list(texts),
            np.array(offsets, np.uint64),
            np.array(lengths, np.uint64),
            etags,
            modifieds,
            inline,
        )
    except MALFORMED as exc:  # a coordinate, kind, offset or length no integer column holds
        raise RecordFault(f"archive chunk refs records of array {node_id!r}: a value out of range ({exc})") from None


def chunk_ref_rows(zs: ZS, node_id: str, first: int | None = None, stop: int | None = None) -> ChunkRefRows:
    """Every ``C`` record of array ``node_id`` in a format 2 archive, as columns; only those whose first
    coordinate is at least ``first`` and below ``stop``, if given (a range of keys: no other record read)."""
    prefix = schema.key_prefix(schema.CHUNK_REF, (node_id,))
    # a key's coordinates are a tuple of integers in an order-preserving encoding: a tuple begun with
    # one integer sorts before every tuple whose first element is that integer or larger
    low, high = (
        None if at is None else prefix + bytes((tuples.TUPLE,)) + tuples.encode_int(at) for at in (first, stop)
    )
    if isinstance(zs, ZS):  # the blocks' payloads as they were decoded, no object per record
        # the payloads copied one after another as they come, each let go once copied: memory holds
        # the joined bytes and one block's, not every block's twice
        joined, begins, stops, base = bytearray(), [], [], 0
        for payload, s, e in zs.block_spans(low, high, prefix):
            joined += payload
            begins.append(np.frombuffer(s, np.int64) + base)
            stops.append(np.frombuffer(e, np.int64) + base)
            base += len(payload)
            del payload
        buf = joined
        starts = np.concatenate(begins or [np.zeros(0, np.int64)])
        ends = np.concatenate(stops or [np.zeros(0, np.int64)])
    else:
        records = list(zs.search(low, high, prefix))
        buf = b"".join(records)
        sizes = np.fromiter(map(len, records), np.int64, len(records))
        ends = np.cumsum(sizes)
        starts = ends - sizes
    lengths = ends - starts
    # the bytes of text "a" start those of "a\0b" (NUL is escaped as 00 FF): those are another array's
    data = np.frombuffer(buf, np.uint8)
    mine = (lengths <= len(prefix)) | (data[np.minimum(starts + len(prefix), max(len(buf) - 1, 0))] != 0xFF)
    if not mine.all():
        starts, ends = starts[mine], ends[mine]
    if not len(starts):
        return _one_by_one([], node_id)
    rows = _bulk(buf, starts, ends, len(prefix))
    if rows is None:
        rows = _one_by_one([bytes(buf[a:b]) for a, b in zip(starts.tolist(), ends.tolist())], node_id)
    return rows
