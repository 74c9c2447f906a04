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
