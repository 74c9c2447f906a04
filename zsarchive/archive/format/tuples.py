"""Order-preserving, self-delimiting encoding of tuples (record keys and record values).

Each element starts with a one-byte type code and carries its own end, so a reader
splits a concatenation of elements without a schema, and the bytewise order of two
encodings equals the logical order of the tuples they encode (types compare by code,
then by value; a tuple sorts before every longer tuple it starts). The layout is
specified, byte by byte, in docs/archive-format.rst ("Tuple encoding").
"""

from __future__ import annotations

import io
import itertools
from typing import TYPE_CHECKING, Sequence

from zsarchive.errors import ZSCorrupt
from zsarchive.zs.format import uleb128

try:
    from zsarchive.archive.format import _columns as c_columns
except ImportError:  # installed without a C compiler: numpy decodes the columns, slower
    c_columns = None

END = 0x00
BYTES = 0x01
STRING = 0x02
NONE = 0x03
BLOB = 0x04  # length-prefixed bytes: compact but NOT order-preserving, values only
TUPLE = 0x05
INT_ZERO = 0x14
INT_NEG_BIG = 0x0B  # negative, more than 8 magnitude bytes
INT_POS_BIG = 0x1D  # positive, more than 8 magnitude bytes
FALSE = 0x26
TRUE = 0x27

_ESCAPED = b"\x00\xff"


_POS_HEAD = [bytes((INT_ZERO + n,)) for n in range(9)]


def _int(value: int) -> bytes:
    if value > 0:
        size = (value.bit_length() + 7) >> 3
        if size <= 8:
            return _POS_HEAD[size] + value.to_bytes(size, "big")
        if size > 255:
            raise ValueError(f"integer too large to encode ({size} bytes)")
        return bytes((INT_POS_BIG, size)) + value.to_bytes(size, "big")
    if value == 0:
        return b"\x14"
    magnitude = -value
    size = (magnitude.bit_length() + 7) >> 3
    # Negative: ones' complement of the magnitude, so larger magnitudes sort first.
    body = ((1 << (8 * size)) - 1 - magnitude).to_bytes(size, "big")
    if size <= 8:
        return bytes((INT_ZERO - size,)) + body
    if size > 255:
        raise ValueError(f"integer too large to encode ({size} bytes)")
    return bytes((INT_NEG_BIG, 255 - size)) + body


# Chunk coordinates are mostly small: 0, then one and two magnitude bytes (as _int encodes them, built
# without a call per value: every command imports this module)
_SMALL = [b"\x14", *map(b"\x15".__add__, map(bytes, zip(range(1, 256)))),
          *((value | 0x160000).to_bytes(3, "big") for value in range(256, 1 << 12))]


def encode_int(value: int) -> bytes:
    """The encoding of one integer element."""
    if 0 <= value < 4096:
        return _SMALL[value]
    if 4096 <= value < 16777216:  # 2 or 3 magnitude bytes: type code and magnitude in one int
        return (value | 0x160000).to_bytes(3, "big") if value < 65536 else (value | 0x17000000).to_bytes(4, "big")
    return _int(value)


def encode_text(value: str) -> bytes:
    """The encoding of one text element."""
    return b"\x02" + value.encode("utf-8").replace(b"\x00", _ESCAPED) + b"\x00"


if TYPE_CHECKING:
    import numpy as np


def encode_rows(parts: Sequence[bytes | np.ndarray | tuple[Sequence[bytes], np.ndarray]], n: int) -> list[bytes]:
    """``n`` byte strings built alike, a batch at a time: string i is the concatenation over ``parts``
    of a ``bytes`` part itself, the integer element encoding of entry i of an array part (integers
    >= 0), or ``pieces[choice[i]]`` of a ``(pieces, choice)`` part. The hot path of export."""
    import numpy as np  # here, not at the top: readers import this module and start faster without numpy

    columns: list[tuple] = []  # per part: (bytes,) | (values, magnitude sizes) | (pieces table, sizes, choice)
    widths: list = []  # per part: its width, an int or one per string
    for part in parts:
        if isinstance(part, bytes):
            columns.append((np.frombuffer(part, np.uint8),))
            widths.append(len(part))
        elif isinstance(part, tuple):
            pieces, choice = part
            choice = np.asarray(choice)
            sizes = np.fromiter(map(len, pieces), np.int64, len(pieces))
            table = np.zeros((len(pieces), int(sizes.max()) if len(pieces) else 0), np.uint8)
            table[np.arange(table.shape[1]) < sizes[:, None]] = np.frombuffer(b"".join(pieces), np.uint8)
            columns.append((table, sizes, choice))
            widths.append(sizes[choice])
        else:
            values = np.asarray(part)
            if values.dtype.kind not in "ui" or (values.dtype.kind == "i" and n and values.min() < 0):
                raise ValueError("encode_rows takes arrays of integers >= 0")
            values = values.astype(np.uint64)
            size = np.searchsorted(_MAGNITUDES, values, side="right")  # 0 for 0, else ceil(bit length / 8)
            columns.append((values, size))
            widths.append(1 + size)
    groups = _layouts(widths, n)
    if groups is None:
        return _masked_rows(columns, widths, n)
    order, bounds = groups
    out: list[bytes] = []
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        # Strings of one layout (every part as wide as in the others) are the rows of one byte matrix.
        rows = slice(None) if order is None else order[lo:hi]
        first = lo if order is None else int(order[lo])
        width = sum(int(w) if isinstance(w, int) else int(w[first]) for w in widths)
        matrix = np.empty((hi - lo, width), np.uint8)
        at = 0
        for column in columns:
            if len(column) == 1:
                matrix[:, at:at + len(column[0])] = column[0]
                at += len(column[0])
            elif len(column) == 2:
                values, size = column
                k = int(size[first])
                matrix[:, at] = INT_ZERO + k
                if k:  # the big-endian magnitude: the last k bytes of the value as 8 big-endian bytes
                    matrix[:, at + 1:at + 1 + k] = values[rows].astype(">u8").view(np.uint8).reshape(-1, 8)[:, 8 - k:]
                at += 1 + k
            else:
                table, sizes, choice = column
                k = int(sizes[choice[first]])
                matrix[:, at:at + k] = table[choice[rows], :k]
                at += k
        out += map(io.BytesIO(matrix.tobytes()).read, itertools.repeat(width, hi - lo))
    if order is None:
        return out
    back = np.empty(n, np.int64)
    back[order] = np.arange(n)
    return list(map(out.__getitem__, back.tolist()))


_MAGNITUDES = [1 << (8 * k) for k in range(8)]
"""The smallest integer of each magnitude size from 1 to 8 bytes."""
_MAX_LAYOUTS = 64  # more string layouts than this in a batch (and than 1 per 256 strings): one masked matrix


def _layouts(widths: list, n: int) -> tuple | None:
    """The strings grouped by layout (the widths of every part): (positions in layout order, or None when
    there is one layout; each layout's bounds in them), or None when the layouts are too many."""
    import numpy as np

    code = np.zeros(n, np.int64)
    span = 1
    for w in widths:
        if isinstance(w, int) or not n:
            continue
        top = int(w.max()) + 1
        span *= top
        if span >= 1 << 62:
            return None
        code = code * top + w
    if not n or (code == code[0]).all():
        return None if not n else (None, [0, n])
    order = np.argsort(code, kind="stable")
    code = code[order]
    starts = np.flatnonzero(code[1:] != code[:-1]) + 1
    if len(starts) >= _MAX_LAYOUTS and len(starts) * 256 > n:
        return None
    return order, [0, *starts.tolist(), n]


def _masked_rows(columns: list[tuple], widths: list, n: int) -> list[bytes]:
    """:func:`encode_rows` for batches of many layouts: each part gets a column range as wide as its
    longest value in an (n, width) byte matrix and a mask of the bytes used; the masked bytes, row by
    row, are the strings one after another."""
    import numpy as np

    matrix = np.zeros((n, sum(w if isinstance(w, int) else int(w.max(initial=0)) for w in widths)), np.uint8)
    mask = np.zeros(matrix.shape, bool)
    at = 0
    for column, w in zip(columns, widths):
        if len(column) == 1:
            matrix[:, at:at + w] = column[0]
            mask[:, at:at + w] = True
            at += w
            continue
        wide = int(w.max(initial=0))
        if len(column) == 2:
            values, size = column
            matrix[:, at] = INT_ZERO + size
            shifts = np.maximum(size[:, None] - 1 - np.arange(wide - 1), 0).astype(np.uint64) * np.uint64(8)
            matrix[:, at + 1:at + wide] = (values[:, None] >> shifts) & np.uint64(0xFF)
        else:
            table, _sizes, choice = column
            matrix[:, at:at + wide] = table[choice, :wide]
        mask[:, at:at + wide] = np.arange(wide) < w[:, None]
        at += wide
    # Reading consecutive lengths from one buffer is the cheapest way to cut it into bytes objects.
    return list(map(io.BytesIO(matrix[mask].tobytes()).read, mask.sum(axis=1).tolist()))


def _append(out: bytearray, item, blobs: bool) -> None:
    kind = type(item)
    if kind is int:
        out += encode_int(item)
    elif kind is str:
        out.append(STRING)
        out += item.encode("utf-8").replace(b"\x00", _ESCAPED)
        out.append(END)
    elif kind is bytes or kind is bytearray or kind is memoryview:
        if blobs:
            out.append(BLOB)
            out += uleb128.encode(len(item))
            out += item
        else:
            out.append(BYTES)
            out += bytes(item).replace(b"\x00", _ESCAPED)
            out.append(END)
    elif kind is tuple or kind is list:
        out.append(TUPLE)
        for sub in item:
            _append(out, sub, blobs)
        out.append(END)
    elif item is None:
        out.append(NONE)
    elif kind is bool:
        out.append(TRUE if item else FALSE)
    else:
        raise TypeError(f"cannot encode {kind.__name__} in a tuple key")


def encode(items: tuple | list) -> bytes:
    """Encode the elements of ``items`` one after another (no terminator: a key prefix)."""
    out = bytearray()
    for item in items:
        _append(out, item, False)
    return bytes(out)


def encode_value(items: tuple | list) -> bytes:
    """Like :func:`encode`, but byte strings become length-prefixed blobs (values only)."""
    out = bytearray()
    for item in items:
        _append(out, item, True)
    return bytes(out)


def _escaped(buf, pos: int, what: str) -> tuple[bytes, int]:
    """Read an escaped byte string starting at ``pos``; return it and the position after its END."""
    find = buf.find
    end = find(b"\x00", pos)
    if end < 0:
        raise ZSCorrupt(f"{what}: unterminated string at position {pos}")
    if end + 1 >= len(buf) or buf[end + 1] != 0xFF:
        return bytes(buf[pos:end]), end + 1
    parts = []
    start = pos
    while True:
        if end < 0:
            raise ZSCorrupt(f"{what}: unterminated string at position {pos}")
        if end + 1 < len(buf) and buf[end + 1] == 0xFF:
            parts.append(buf[start:end + 1])
            start = end + 2
            end = find(b"\x00", start)
            continue
        parts.append(buf[start:end])
        return b"".join(parts), end + 1


def _longer(what: str, pos: int) -> ZSCorrupt:
    """An integer encoded in more bytes than it needs: one number would have two spellings, one key two
    records that no sorted order brings together."""
    return ZSCorrupt(f"{what}: integer at position {pos - 1} is not in its shortest encoding")


def decode(buf, pos: int = 0, end: int | None = None, what: str = "key",
           _nested: bool = False) -> tuple[tuple, int]:
    """Decode elements from ``buf[pos:]`` until an END byte (consumed) or ``end``.

    Returns ``(tuple, next_pos)``. Bytes that do not form a valid encoding (an integer in more bytes than
    it needs among them: every value has one encoding) raise ZSCorrupt naming ``what`` and the position.
    """
    if end is None:
        end = len(buf)
    out: list = []
    # One loop over every type code, not a function per type: this runs once per element of every
    # record a query touches, and a call per element costs more than the decoding itself.
    try:
        while pos < end:
            code = buf[pos]
            pos += 1
            if code == END:
                return tuple(out), pos
            if INT_NEG_BIG < code < INT_POS_BIG:
                size = code - INT_ZERO
                if size > 0:
                    if buf[pos] == 0:
                        raise _longer(what, pos)
                    out.append(int.from_bytes(buf[pos:pos + size], "big"))
                elif size < 0:
                    size = -size
                    if buf[pos] == 0xFF:
                        raise _longer(what, pos)
                    out.append(int.from_bytes(buf[pos:pos + size], "big") - (1 << (8 * size)) + 1)
                else:
                    out.append(0)
                pos += size
            elif code == STRING:
                raw, pos = _escaped(buf, pos, what)
                out.append(raw.decode("utf-8"))
            elif code == BYTES:
                raw, pos = _escaped(buf, pos, what)
                out.append(raw)
            elif code == TUPLE:
                sub, pos = decode(buf, pos, end, what, True)
                out.append(sub)
            elif code == BLOB:
                size, pos = uleb128.decode(buf, pos, what)
                out.append(bytes(buf[pos:pos + size]))
                pos += size
            elif code == NONE:
                out.append(None)
            elif code == TRUE:
                out.append(True)
            elif code == FALSE:
                out.append(False)
            elif code == INT_POS_BIG:
                size = buf[pos]
                if size <= 8 or buf[pos + 1] == 0:
                    raise _longer(what, pos)
                out.append(int.from_bytes(buf[pos + 1:pos + 1 + size], "big"))
                pos += 1 + size
            elif code == INT_NEG_BIG:
                size = 255 - buf[pos]
                if size <= 8 or buf[pos + 1] == 0xFF:
                    raise _longer(what, pos)
                out.append(int.from_bytes(buf[pos + 1:pos + 1 + size], "big") - (1 << (8 * size)) + 1)
                pos += 1 + size
            else:
                raise ZSCorrupt(f"{what}: unknown type code 0x{code:02x} at position {pos - 1}")
            if pos > end:
                raise ZSCorrupt(f"{what}: element runs past the end ({end}) of its bytes")
    except (IndexError, UnicodeDecodeError) as exc:
        raise ZSCorrupt(f"{what}: malformed encoding near position {pos}: {exc}") from None
    if _nested:
        raise ZSCorrupt(f"{what}: nested tuple not terminated before position {end}")
    return tuple(out), pos



def element_end(buf: bytes, pos: int) -> int:
    """The position just after the element starting at ``pos`` (its END byte for a tuple), found
    without building it; ZSCorrupt if it does not end within ``buf``."""
    depth, n = 0, len(buf)
    while pos < n:
        code = buf[pos]
        pos += 1
        if INT_NEG_BIG < code < INT_POS_BIG:
            pos += abs(code - INT_ZERO)
        elif code == STRING or code == BYTES:
            end = buf.find(b"\x00", pos)
            while 0 <= end < n - 1 and buf[end + 1] == 0xFF:  # an escaped NUL, not the terminator
                end = buf.find(b"\x00", end + 2)
            if end < 0:
                break
            pos = end + 1
        elif code == TUPLE:
            depth += 1
            continue
        elif code == END and depth:
            depth -= 1
        elif code == INT_POS_BIG and pos < n:
            pos += 1 + buf[pos]
        elif code == INT_NEG_BIG and pos < n:
            pos += 1 + 255 - buf[pos]
        elif code not in (NONE, TRUE, FALSE):
            raise ZSCorrupt(f"key {bytes(buf[:40])!r}: unknown type code 0x{code:02x} at position {pos - 1}")
        if depth == 0 and pos <= n:
            return pos
    raise ZSCorrupt(f"key {bytes(buf[:40])!r}: element at position {pos} is not terminated")


def key_end(buf: bytes, pos: int = 1) -> int:
    """The position just after the END byte that closes the key starting at ``pos`` (a record's key
    starts at 1, after its family tag)."""
    while pos < len(buf) and buf[pos] != END:
        pos = element_end(buf, pos)
    if pos >= len(buf):
        raise ZSCorrupt(f"key {bytes(buf[:40])!r}: not terminated")
    return pos + 1


class Columns:
    """The same run of elements decoded from many encodings in one buffer, a batch at a time: at C speed
    when the optional extension is built, else with numpy (the same answers)."""

    def __init__(self, buf: bytes) -> None:
        self.buf = buf
        self._zeros: np.ndarray | None = None

    def decode(self, starts: np.ndarray, ends: np.ndarray, layout: str) -> tuple[list, np.ndarray] | None:
        """The columns of the run ``layout`` names in each encoding ``buf[starts[i]:ends[i]]``, and the
        positions after it; None when some encoding differs (decode those with :func:`decode`).
        ``layout``, one letter per element: ``i`` an integer >= 0 of at most 8 bytes (a uint64 array),
        ``s`` a text without an escaped NUL (arrays of its bytes' start and end), ``I``/``S`` the same or
        None (the arrays and a mask of those not None; a None text spans no bytes), ``(`` a tuple's start and ``)`` its END."""
        import numpy as np

        if not len(self.buf) or not len(starts):
            return None
        if c_columns is None:
            return self._decode_numpy(starts, ends, layout)
        starts = np.ascontiguousarray(starts, np.int64)
        ends = np.ascontiguousarray(ends, np.int64)
        n = len(starts)
        made = {"i": (np.uint64,), "I": (np.uint64, bool), "s": (np.int64, np.int64), "S": (np.int64, np.int64, bool)}
        arrays = [np.empty(n, dtype) for letter in layout for dtype in made.get(letter, ())]
        pos = np.empty(n, np.int64)
        if not c_columns.decode(self.buf, starts, ends, layout, [*arrays, pos]):
            return None
        out, at = [], 0
        for letter in layout:
            width = len(made.get(letter, ()))
            if width:
                out.append(arrays[at] if width == 1 else tuple(arrays[at:at + width]))
            at += width
        return out, pos

    def _decode_numpy(self, starts: np.ndarray, ends: np.ndarray, layout: str) -> tuple[list, np.ndarray] | None:
        import numpy as np

        data = np.frombuffer(self.buf, np.uint8)
        size = len(data)
        if self._zeros is None:  # where text elements may end: one scan of the buffer for every run
            self._zeros = np.flatnonzero(data == END)
        zeros = self._zeros
        pos = np.asarray(starts, np.int64).copy()
        out: list = []
        for letter in layout:
            if (pos >= ends).any():
                return None
            code = data[pos]
            if letter in "()":
                if (code != (TUPLE if letter == "(" else END)).any():
                    return None
                pos += 1
                continue
            optional = letter.isupper()
            present = code != NONE if optional else np.ones(len(pos), bool)
            if letter in "iI":
                width = np.where(present, code.astype(np.int64) - INT_ZERO, 0)
                if ((width < 0) | (width > 8) | (present & (code < INT_ZERO))).any() or (pos + 1 + width > ends).any():
                    return None
                if ((width > 0) & (data[np.minimum(pos + 1, size - 1)] == 0)).any():
                    return None  # not the shortest encoding: the record-by-record decoder names it
                values = np.zeros(len(pos), np.uint64)
                for k in range(int(width.max())):  # big-endian magnitude bytes
                    byte = data[np.minimum(pos + 1 + k, size - 1)].astype(np.uint64)
                    values = np.where(k < width, (values << np.uint64(8)) | byte, values)
                pos += 1 + width
                out.append((values, present) if optional else values)
            else:
                if (present & (code != STRING)).any():
                    return None
                at = np.searchsorted(zeros, pos + 1)
                if (present & (at >= len(zeros))).any():
                    return None
                stop = np.where(present, zeros[np.minimum(at, len(zeros) - 1)], pos + 1)  # None: empty
                after = data[np.minimum(stop + 1, size - 1)]
                if (present & ((stop >= ends) | ((after == 0xFF) & (stop + 1 < size)))).any():
                    return None  # runs past its encoding, or an escaped NUL
                begin = pos + 1
                pos = np.where(present, stop + 1, pos + 1)
                out.append((begin, stop, present) if optional else (begin, stop))
        return out, pos

    def texts(self, begin: np.ndarray, stop: np.ndarray) -> tuple[np.ndarray, list[str]]:
        """Each span's code and the distinct texts ``buf[begin[i]:stop[i]]`` (many rows name few snapshots
        and files); UnicodeDecodeError for a text that is not UTF-8."""
        import numpy as np

        if c_columns is None:
            return self._texts_numpy(begin, stop)
        codes = np.empty(len(begin), np.int64)
        texts = c_columns.intern(self.buf, np.ascontiguousarray(begin, np.int64),
                                 np.ascontiguousarray(stop, np.int64), codes)
        return codes, texts

    def _texts_numpy(self, begin: np.ndarray, stop: np.ndarray) -> tuple[np.ndarray, list[str]]:
        # rows grouped by a hash of their bytes, each checked against its group's first row, 8 bytes at a time;
        # every position's next 8 bytes as one little-endian word (the buffer padded so none runs past it)
        import numpy as np

        buf = self.buf
        padded = np.frombuffer(buf + bytes(8), np.uint8)
        words = np.ndarray((len(padded) - 7,), "<u8", buffer=padded, strides=(1,))
        size = stop - begin
        shortest = int(size.min()) if len(size) else 0

        def column(k: int) -> np.ndarray:  # bytes k..k+7 of every text, zero past its end
            if k + 8 <= shortest:  # inside every text: no mask (snapshot ids, most of a location)
                return words[begin + k]
            left = np.clip(size - k, 0, 8).astype(np.uint64)
            keep = np.where(left == 8, np.uint64(2**64 - 1), (np.uint64(1) << (left * np.uint64(8))) - np.uint64(1))
            return words[np.minimum(begin + k, len(words) - 1)] & keep

        columns = [column(k) for k in range(0, int(size.max()) if len(size) else 0, 8)]  # kept for the check
        digest = size.astype(np.uint64)
        for words_k in columns:
            digest = (digest ^ words_k) * np.uint64(1099511628211)
        _, first, codes = np.unique(digest, return_index=True, return_inverse=True)
        twin = first[codes.reshape(-1)]
        same = size == size[twin]
        for words_k in columns:
            same &= words_k == words_k[twin]
        if not same.all():  # a hash collision: group them exactly
            index: dict[bytes, int] = {}
            raw = map(buf.__getitem__, map(slice, begin.tolist(), stop.tolist()))
            codes = np.fromiter((index.setdefault(r, len(index)) for r in raw), np.int64, len(begin))
            return codes, [r.decode("utf-8") for r in index]
        return codes.reshape(-1), [buf[b:e].decode("utf-8") for b, e in zip(begin[first].tolist(),
                                                                              stop[first].tolist())]


def decode_columns(buf: bytes, starts: np.ndarray, ends: np.ndarray, layout: str) -> tuple[list, np.ndarray] | None:
    """One run of :class:`Columns` decoded from the encodings ``buf[starts[i]:ends[i]]``."""
    return Columns(buf).decode(starts, ends, layout)
