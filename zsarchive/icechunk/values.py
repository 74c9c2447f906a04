"""User metadata values: FlexBuffers (spec V2) and MessagePack (spec V1) to JSON-compatible Python."""

from __future__ import annotations

from typing import Any

import msgpack
from flatbuffers import flexbuffers

from zsarchive.icechunk.flatbuf import FlatBufferError


def _jsonable(value: Any, what: str) -> Any:
    """Check a decoded value only holds JSON types (bytes, for instance, would not survive an export)."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)):
        return [_jsonable(v, what) for v in value]
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            if not isinstance(k, str):
                raise FlatBufferError(f"{what}: map key {k!r} is not a string")
            out[k] = _jsonable(v, what)
        return out
    raise FlatBufferError(f"{what}: {type(value).__name__} is not a JSON-compatible value")


def from_flexbuffer(raw: bytes, what: str) -> Any:
    """Decode one FlexBuffers value (``what`` names it in errors)."""
    try:
        value = flexbuffers.Loads(raw)
    except Exception as exc:  # the flexbuffers module raises anything from IndexError to KeyError
        raise FlatBufferError(f"{what}: not a valid FlexBuffers value ({type(exc).__name__}: {exc})") from None
    return _jsonable(value, what)


def from_msgpack(raw: bytes, what: str) -> Any:
    """Decode one MessagePack value (``what`` names it in errors)."""
    try:
        value = msgpack.unpackb(raw, raw=False, strict_map_key=False)
    except (ValueError, msgpack.UnpackException) as exc:
        raise FlatBufferError(f"{what}: not a valid MessagePack value ({exc})") from None
    return _jsonable(value, what)
