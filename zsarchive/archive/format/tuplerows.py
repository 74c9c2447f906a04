"""Many tuple encodings built alike a batch at a time (:func:`encode_rows`), with numpy: the hot path of an
export, which writes millions of chunk ref records. The layout is :mod:`tuples <zsarchive.archive.format.tuples>`'s."""

from __future__ import annotations

import io
import itertools
from typing import Any, Sequence, TYPE_CHECKING

from zsarchive.archive.format.tuples import INT_ZERO

if TYPE_CHECKING:
    import numpy as np


def encode_rows(parts: Sequence[bytes | np.ndarray | tuple[Sequence[bytes], np.ndarray]], n: int) -> list[bytes]:
    """``n`` byte strings built alike, a batch at a time: string i is the concatenation over ``parts``
    of a ``bytes`` part itself, the integer element encoding of entry i of an array part (integers
    >= 0), or ``pieces[choice[i]]`` of a ``(pieces, choice)`` part. The hot path of export."""
    import numpy as np  # here, not at the top: readers import this module and start faster without numpy

    columns: list[
        tuple[Any, ...]
    ] = []  # per part: (bytes,) | (values, magnitude sizes) | (pieces table, sizes, choice)
    widths: list[Any] = []  # per part: its width, an int or one per string
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
                matrix[:, at : at + len(column[0])] = column[0]
                at += len(column[0])
            elif len(column) == 2:
                values, size = column
                k = int(size[first])
                matrix[:, at] = INT_ZERO + k
                if k:  # the big-endian magnitude: the last k bytes of the value as 8 big-endian bytes
                    matrix[:, at + 1 : at + 1 + k] = (
                        values[rows].astype(">u8").view(np.uint8).reshape(-1, 8)[:, 8 - k :]
                    )
                at += 1 + k
            else:
                table, sizes, choice = column
                k = int(sizes[choice[first]])
                matrix[:, at : at + k] = table[choice[rows], :k]
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


def _layouts(widths: list[Any], n: int) -> tuple[Any, ...] | None:
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


def _masked_rows(columns: list[tuple[Any, ...]], widths: list[Any], n: int) -> list[bytes]:
    """:func:`encode_rows` for batches of many layouts: each part gets a column range as wide as its
    longest value in an (n, width) byte matrix and a mask of the bytes used; the masked bytes, row by
    row, are the strings one after another."""
    import numpy as np

    matrix = np.zeros((n, sum(w if isinstance(w, int) else int(w.max(initial=0)) for w in widths)), np.uint8)
    mask = np.zeros(matrix.shape, bool)
    at = 0
    for column, w in zip(columns, widths):
        if len(column) == 1:
            matrix[:, at : at + w] = column[0]
            mask[:, at : at + w] = True
            at += w
            continue
        wide = int(w.max(initial=0))
        if len(column) == 2:
            values, size = column
            matrix[:, at] = INT_ZERO + size
            shifts = np.maximum(size[:, None] - 1 - np.arange(wide - 1), 0).astype(np.uint64) * np.uint64(8)
            matrix[:, at + 1 : at + wide] = (values[:, None] >> shifts) & np.uint64(0xFF)
        else:
            table, _sizes, choice = column
            matrix[:, at : at + wide] = table[choice, :wide]
        mask[:, at : at + wide] = np.arange(wide) < w[:, None]
        at += wide
    # Reading consecutive lengths from one buffer is the cheapest way to cut it into bytes objects.
    return list(map(io.BytesIO(matrix[mask].tobytes()).read, mask.sum(axis=1).tolist()))
