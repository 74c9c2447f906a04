"""The chunk ref timeline's records (family ``C``, record version 2: format 2 on) a batch at a time: the
byte pieces an export builds millions of them from (with :func:`~zsarchive.archive.format.tuplerows.encode_rows`)
and the column layouts a restore and the per-chunk history read them back with
(:class:`~zsarchive.archive.format.tuplecolumns.Columns`). :class:`~zsarchive.archive.format.views.ChunkRefKey`
and :class:`~zsarchive.archive.format.views.ChunkRefValue` read and write one record; both ways give the same
bytes."""

from __future__ import annotations

from typing import Any, TYPE_CHECKING

from zsarchive.archive.format import schema, tuples
from zsarchive.archive.format.tuplecolumns import Columns

if TYPE_CHECKING:
    import numpy as np

TIMELINE_VERSION = 2
"""The record version of a timeline record (format 1's chunk ref records, keyed by manifest, are version 1)."""
NO_CHECKSUMS = tuples.encode_value((None, None))
"""The end of a virtual ref's value that has neither an etag nor a last-modified time."""
_VERSION_BYTE = bytes((TIMELINE_VERSION,))
_VALUE_LAYOUTS = {schema.VIRTUAL: "isiiSI", schema.NATIVE: "isii"}
"""The value elements of the ref kinds decoded in bulk (kind, text, offset, length[, etag, last modified])."""


def key_head(node_id: str) -> bytes:
    """The bytes every timeline record of array ``node_id`` starts with, up to its coordinates' elements."""
    return schema.CHUNK_REF + tuples.encode_text(node_id) + bytes((tuples.TUPLE,))


def key_tail(snapshot_id: str) -> bytes:
    """The bytes after a record's coordinates' elements up to its key's end: the coordinates' tuple closed
    and the id of the snapshot that made the change."""
    return bytes((tuples.END,)) + tuples.encode_text(snapshot_id)


def value_head(tail: bytes, kind: int) -> bytes:
    """The bytes after a record's coordinates' elements through its value's kind code (``tail``: the
    :func:`key_tail` of the record's snapshot)."""
    return tail + bytes((tuples.END,)) + _VERSION_BYTE + tuples.encode_int(kind)


def key_layout(ndim: int, closed: bool = False) -> str:
    """The :class:`Columns` layout of a timeline key after its node id: the ``ndim`` coordinates, the
    snapshot id and, ``closed``, the key's END."""
    return "(" + "i" * ndim + ")s" + (")" if closed else "")


def value_columns(decoder: Columns, pos: np.ndarray, ends: np.ndarray) -> list[Any] | None:
    """The value columns of the timeline records whose values start at ``pos`` (their version byte) and end
    at ``ends`` — kind, text span, offset, length and, of virtual refs, etag and last-modified time — when
    every value is version 2 and of one kind decoded in bulk (native or virtual); None otherwise (decode
    those a record at a time)."""
    import numpy as np

    data = np.frombuffer(decoder.buf, np.uint8)
    if (pos + 2 > ends).any() or (data[pos] != TIMELINE_VERSION).any():
        return None
    kinds = data[pos + 2] if (pos + 3 <= ends).all() else None  # the kind's magnitude byte
    layout = None if kinds is None else _VALUE_LAYOUTS.get(int(kinds[0]))
    if kinds is None or layout is None or (data[pos + 1] != tuples.INT_ZERO + 1).any() or (kinds != kinds[0]).any():
        return None
    decoded = decoder.decode(pos + 1, ends, layout)
    if decoded is None or (decoded[1] != ends).any():
        return None
    return decoded[0]
