"""Bounds-checked FlatBuffers access: every offset followed is checked against the buffer.

The generated accessors (``generated/``) run on ``CheckedTable``; a bad offset raises
``FlatBufferError`` (no file name yet), which the file decoders turn into ``ZSCorrupt``.
"""

from __future__ import annotations

import contextvars
import struct
from typing import overload

from flatbuffers import table

_U32 = struct.Struct("<I")
_I32 = struct.Struct("<i")
_U16 = struct.Struct("<H")
_BUDGET_FACTOR, _BUDGET_SLACK = 4, 1 << 20


class FlatBufferError(Exception):
    """An offset or length in a FlatBuffer points outside it (message: where and what)."""


_BUDGET: contextvars.ContextVar[list[int] | None] = contextvars.ContextVar("flatbuffer_budget", default=None)
"""Elements and string bytes the decoding of the current buffer may still read (set by :func:`root`)."""


def _spend(count: int) -> None:
    """Charge ``count`` vector elements or string bytes to the current buffer's budget.

    Without shared parts a FlatBuffer holds at most one element or byte per byte of its size, so
    reading many times that means its offsets form a DAG that makes a small file cost a huge walk."""
    budget = _BUDGET.get()
    if budget is None:
        return
    budget[0] -= count
    if budget[0] < 0:
        raise FlatBufferError(
            f"its tables share vectors or strings so often that reading it would take over "
            f"{budget[1]:,} element reads for a {budget[2]:,}-byte buffer"
        )


def vtable_slots(buf, vtable: int, count: int, where: str) -> tuple[int, list[int]]:
    """(table size, offsets of the first ``count`` fields, 0 where absent) from the vtable at ``vtable``,
    which is checked to lie inside the buffer (``where`` names the table in errors)."""
    if vtable < 0 or vtable + 4 > len(buf):
        raise FlatBufferError(f"{where}: vtable at {vtable} outside the buffer")
    vt_size, table_size = _U16.unpack_from(buf, vtable)[0], _U16.unpack_from(buf, vtable + 2)[0]
    if vt_size < 4 or vt_size & 1 or vtable + vt_size > len(buf):
        raise FlatBufferError(f"{where}: vtable at {vtable} has an impossible size {vt_size}")
    present = min(count, (vt_size - 4) // 2)
    return table_size, [*struct.unpack_from(f"<{present}H", buf, vtable + 4), *[0] * (count - present)]


class CheckedTable(table.Table):
    """``flatbuffers.table.Table`` whose every read is bounds-checked."""

    __slots__ = ()

    def __init__(self, buf, pos):
        if not 0 <= pos <= len(buf) - 4:
            raise FlatBufferError(f"table at {pos} outside the {len(buf)}-byte buffer")
        self.Bytes = buf
        self.Pos = pos

    def Get(self, flags, off):
        size = flags.bytewidth
        if off < 0 or off + size > len(self.Bytes):
            raise FlatBufferError(f"offset {off} (+{size}) outside the {len(self.Bytes)}-byte buffer")
        return flags.py_type(flags.packer_type.unpack_from(self.Bytes, off)[0])

    def _u32(self, off: int) -> int:
        if off < 0 or off + 4 > len(self.Bytes):
            raise FlatBufferError(f"offset {off} outside the {len(self.Bytes)}-byte buffer")
        return _U32.unpack_from(self.Bytes, off)[0]

    def Offset(self, vtableOffset):
        buf = self.Bytes
        pos = self.Pos
        if pos < 0 or pos + 4 > len(buf):
            raise FlatBufferError(f"table at {pos} outside the {len(buf)}-byte buffer")
        vtable = pos - _I32.unpack_from(buf, pos)[0]
        if vtable < 0 or vtable + 4 > len(buf):
            raise FlatBufferError(f"vtable of the table at {pos} is at {vtable}, outside the buffer")
        vt_size = _U16.unpack_from(buf, vtable)[0]
        if vt_size < 4 or vt_size & 1 or vtable + vt_size > len(buf):
            raise FlatBufferError(f"vtable at {vtable} has an impossible size {vt_size}")
        if vtableOffset >= vt_size:
            return 0
        field_off = _U16.unpack_from(buf, vtable + vtableOffset)[0]
        table_size = _U16.unpack_from(buf, vtable + 2)[0]
        if field_off and (field_off >= table_size or pos + table_size > len(buf)):
            raise FlatBufferError(f"field slot {vtableOffset} of the table at {pos} points outside it")
        return field_off

    def Indirect(self, off):
        return off + self._u32(off)

    def String(self, off):
        start = off + self._u32(off)
        length = self._u32(start)
        if start + 4 + length > len(self.Bytes):
            raise FlatBufferError(f"string at {start} of length {length} runs past the buffer end")
        _spend(length)
        return bytes(self.Bytes[start + 4 : start + 4 + length])

    def VectorLen(self, off):
        start = self.Pos + off
        start += self._u32(start)
        length = self._u32(start)
        # Every element is at least one byte: a longer vector cannot fit.
        if start + 4 + length > len(self.Bytes):
            raise FlatBufferError(f"vector at {start} of length {length} runs past the buffer end")
        _spend(length)
        return length

    def Vector(self, off):
        start = self.Pos + off
        return start + self._u32(start) + 4

    def Union(self, t2, off):
        start = self.Pos + off
        t2.Pos = start + self._u32(start)
        t2.Bytes = self.Bytes


def root(cls, buf: bytes):
    """The root table of ``buf`` as an instance of the generated class ``cls``; reads through it are
    charged to a budget of a few times the buffer's size (icechunk shares only some short strings)."""
    if len(buf) < 8:
        raise FlatBufferError(f"a {len(buf)}-byte buffer is too short to hold a FlatBuffer")
    allowed = _BUDGET_FACTOR * len(buf) + _BUDGET_SLACK
    _BUDGET.set([allowed, allowed, len(buf)])
    obj = cls()
    obj.Init(buf, _U32.unpack_from(buf, 0)[0])
    return obj


def table_of(cls, union_table: table.Table):
    """A union member (the plain Table a generated union accessor returns) as ``cls``."""
    obj = cls()
    obj.Init(union_table.Bytes, union_table.Pos)
    return obj


def struct_bytes(obj, size: int) -> bytes:
    """The raw bytes of a fixed-size struct (e.g. an ObjectId12) the generated code points at."""
    tab = obj._tab
    pos = tab.Pos
    if pos < 0 or pos + size > len(tab.Bytes):
        raise FlatBufferError(f"{size}-byte struct at {pos} outside the {len(tab.Bytes)}-byte buffer")
    return bytes(tab.Bytes[pos : pos + size])


def _vector(obj, slot: int, item_size: int, what: str):
    """``(buffer, start, length)`` of the vector field in vtable slot ``slot``; None when absent."""
    tab = obj._tab
    off = tab.Offset(slot)
    if not off:
        return None
    length = tab.VectorLen(off)
    start = tab.Vector(off)
    if start + item_size * length > len(tab.Bytes):
        raise FlatBufferError(f"{what} vector at {start} of length {length} runs past the buffer end")
    return tab.Bytes, start, length


def byte_vector(obj, slot: int) -> bytes | None:
    """The ``[uint8]`` field in vtable slot ``slot`` (4, 6, 8 ...) as bytes; None when absent."""
    found = _vector(obj, slot, 1, "uint8")
    if found is None:
        return None
    buf, start, length = found
    return bytes(buf[start : start + length])


@overload
def text(raw: bytes, what: str) -> str: ...
@overload
def text(raw: None, what: str) -> None: ...
def text(raw: bytes | None, what: str) -> str | None:
    """A FlatBuffers string field decoded as UTF-8 (None stays None)."""
    if raw is None:
        return None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise FlatBufferError(f"{what} is not valid UTF-8 ({exc.reason} at byte {exc.start})") from None


def require(value, what: str):
    """``value`` unless it is None (an absent required field)."""
    if value is None:
        raise FlatBufferError(f"required field {what} is missing")
    return value


def check_sorted(keys: list, what: str) -> None:
    """Raise unless ``keys`` is strictly ascending (a spec "MUST be sorted" rule, duplicates included)."""
    for i in range(1, len(keys)):
        if not keys[i - 1] < keys[i]:
            raise FlatBufferError(
                f"{what} MUST be sorted, but entry {i} ({keys[i]!r}) "
                f"does not come after entry {i - 1} ({keys[i - 1]!r})"
            )


def u32_vector(obj, slot: int) -> tuple[int, ...] | None:
    """The ``[uint32]`` field in vtable slot ``slot`` in one ``struct`` call; None when absent."""
    found = _vector(obj, slot, 4, "uint32")
    if found is None:
        return None
    buf, start, length = found
    return struct.unpack_from(f"<{length}I", buf, start)
