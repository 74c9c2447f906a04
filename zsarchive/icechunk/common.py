"""Decoding pieces shared by several file types: ids, metadata lists, the decode error wrapper."""

from __future__ import annotations

import contextlib
import struct
from typing import Any, Iterator

from zsarchive.errors import ZSCorrupt
from zsarchive.icechunk import ids
from zsarchive.icechunk.flatbuf import FlatBufferError, byte_vector, check_sorted, require, struct_bytes, text
from zsarchive.icechunk.values import from_flexbuffer, from_msgpack


@contextlib.contextmanager
def decoding(name: str) -> Iterator[None]:
    """Turn any FlatBuffers-level failure while decoding file ``name`` into one ZSCorrupt naming it."""
    try:
        yield
    except FlatBufferError as exc:
        raise ZSCorrupt(f"{name}: {exc}") from None
    except (IndexError, struct.error, ValueError, TypeError, OverflowError) as exc:
        # Reaching here means a check is missing above; still report it as corruption of this file.
        raise ZSCorrupt(f"{name}: malformed FlatBuffer ({type(exc).__name__}: {exc})") from None


MAX_MICROS = 253402300800 * 10**6 - 1
"""The last microsecond of year 9999 UTC: the last instant a time can be written in RFC 3339."""


def timestamp(micros: int, what: str) -> int:
    """A time field (microseconds since the Unix epoch) that can be shown as a date: past year 9999
    is corrupt, not a time any writer made."""
    if not 0 <= micros <= MAX_MICROS:
        raise FlatBufferError(f"{what} {micros} is not a time (microseconds since 1970 up to year 9999)")
    return micros


def id12(obj, what: str) -> str:
    """A required ObjectId12 struct field as Crockford base32."""
    return ids.encode(struct_bytes(require(obj, what), 12))


def id8(obj, what: str) -> str:
    """A required ObjectId8 struct field as Crockford base32."""
    return ids.encode(struct_bytes(require(obj, what), 8))


def optional_id12(obj) -> str | None:
    """An optional ObjectId12 struct field as Crockford base32, or None."""
    return None if obj is None else ids.encode(struct_bytes(obj, 12))


def metadata_items(owner, spec_version: int, what: str, must_sort: bool) -> dict[str, Any]:
    """A ``[MetadataItem]`` field (accessors ``Metadata``/``MetadataLength``) as a dict of JSON values."""
    names: list[bytes] = []
    out: dict[str, Any] = {}
    for j in range(owner.MetadataLength()):
        item = owner.Metadata(j)
        raw_name = require(item.Name(), f"{what}[{j}].name")
        name = text(raw_name, f"{what}[{j}].name")
        value = require(byte_vector(item, 6), f"{what}[{j}].value")
        where = f"{what}[{name!r}]"
        out[name] = from_msgpack(value, where) if spec_version == 1 else from_flexbuffer(value, where)
        names.append(raw_name)
    if must_sort:
        check_sorted(names, f"{what} names")
    return out


# -- encoding: pieces shared by the encoders of several file types ------------------------------


def offsets_vector(b, offsets: list[int]) -> int:
    """A vector of the tables or strings at ``offsets`` (already in builder ``b``)."""
    b.StartVector(4, len(offsets), 4)
    for off in reversed(offsets):
        b.PrependUOffsetTRelative(off)
    return b.EndVector()


def uint32_vector(b, values) -> int:
    """A ``[uint32]`` vector (chunk coordinates), empty for a 0-d array's."""
    import numpy as np

    if not len(values):
        b.StartVector(4, 0, 4)
        return b.EndVector()
    return b.CreateNumpyVector(np.ascontiguousarray(values, dtype="<u4"))


def ids_vector(b, id_texts: list[str], nbytes: int) -> int:
    """A vector of ObjectId12 or ObjectId8 structs from their base32 texts, in the order given."""
    b.StartVector(nbytes, len(id_texts), 1)
    for id_text in reversed(id_texts):
        b.head = b.head - nbytes
        b.Bytes[b.head : b.head + nbytes] = ids.decode(id_text, nbytes)
    return b.EndVector()


def id_struct(b, text: str, nbytes: int) -> int:
    """An ObjectId12 or ObjectId8 struct inline (call right before adding it as a table field)."""
    b.Prep(1, nbytes)
    b.head = b.head - nbytes
    b.Bytes[b.head : b.head + nbytes] = ids.decode(text, nbytes)
    return b.Offset()


def metadata_vector(b, metadata: dict[str, Any], spec_version: int) -> int:
    """A ``[MetadataItem]`` vector, sorted by name bytes, values as FlexBuffers (V2) or MessagePack (V1)."""
    from zsarchive.icechunk.generated import MetadataItem as MI
    from zsarchive.icechunk.values import to_flexbuffer, to_msgpack

    encode = to_msgpack if spec_version == 1 else to_flexbuffer
    items = []
    for name in sorted(metadata, key=lambda n: n.encode("utf-8")):
        name_off = b.CreateString(name)
        value_off = b.CreateByteVector(encode(metadata[name]))
        MI.Start(b)
        MI.AddName(b, name_off)
        MI.AddValue(b, value_off)
        items.append(MI.End(b))
    return offsets_vector(b, items)


def vtable_bytes(fields: tuple[int, ...], table_size: int) -> bytes:
    """A FlatBuffers vtable: its size, the table's size, then each field's offset in the table (0: absent)."""
    return struct.pack(f"<{2 + len(fields)}H", 4 + 2 * len(fields), table_size, *fields)


class ForwardWriter:
    """A FlatBuffer written front to back: parents before children, so every offset points forward, as
    FlatBuffers requires; for files of millions of tables, where the generic builder costs ~30 calls each."""

    def __init__(self) -> None:
        self.buf = bytearray()

    def align(self, n: int) -> int:
        self.buf += bytes(-len(self.buf) % n)
        return len(self.buf)

    def reserve(self, n: int) -> int:
        at = len(self.buf)
        self.buf += bytes(n)
        return at

    def point(self, field: int, target: int) -> None:
        """Store at ``field`` the forward offset to ``target``."""
        struct.pack_into("<I", self.buf, field, target - field)

    def table(self, vtable: int, size: int, align: int = 4) -> int:
        at = self.align(align)
        self.buf += bytes(size)
        struct.pack_into("<i", self.buf, at, at - vtable)
        return at

    def vector(self, count: int, item: int, align: int = 4) -> int:
        """A vector of ``count`` items of ``item`` bytes: returns where its length is."""
        self.buf += bytes(-(len(self.buf) + 4) % max(align, 4))
        at = self.reserve(4 + count * item)
        struct.pack_into("<I", self.buf, at, count)
        return at

    def blob(self, data: bytes, terminate: bool = False, count: int | None = None) -> int:
        """A byte vector or string (``terminate``), or a vector of ``count`` items whose bytes are ``data``."""
        at = self.align(4)
        self.buf += struct.pack("<I", len(data) if count is None else count) + data + (b"\x00" if terminate else b"")
        return at
