"""The same run of tuple elements decoded from many encodings in one buffer, a batch at a time
(:class:`Columns`): in C when the optional extension is built, else with numpy. Restore and history read
millions of chunk ref records this way. The layout is :mod:`tuples <zsarchive.archive.format.tuples>`'s."""

from __future__ import annotations

from typing import Any, TYPE_CHECKING

from zsarchive.archive.format.tuples import END, INT_ZERO, NONE, STRING, TUPLE

try:
    from zsarchive.archive.format import _columns as c_columns
except ImportError:  # installed without a C compiler: numpy decodes the columns, slower
    c_columns = None  # type: ignore[assignment]

if TYPE_CHECKING:
    import numpy as np


class Columns:
    """The same run of elements decoded from many encodings in one buffer, a batch at a time: at C speed
    when the optional extension is built, else with numpy (the same answers)."""

    def __init__(self, buf: bytes) -> None:
        self.buf = buf
        self._zeros: np.ndarray | None = None

    def decode(self, starts: np.ndarray, ends: np.ndarray, layout: str) -> tuple[list[Any], np.ndarray] | None:
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
                out.append(arrays[at] if width == 1 else tuple(arrays[at : at + width]))
            at += width
        return out, pos

    def _decode_numpy(self, starts: np.ndarray, ends: np.ndarray, layout: str) -> tuple[list[Any], np.ndarray] | None:
        import numpy as np

        data = np.frombuffer(self.buf, np.uint8)
        size = len(data)
        if self._zeros is None:  # where text elements may end: one scan of the buffer for every run
            self._zeros = np.flatnonzero(data == END)
        zeros = self._zeros
        pos = np.asarray(starts, np.int64).copy()
        out: list[Any] = []
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
        texts = c_columns.intern(
            self.buf, np.ascontiguousarray(begin, np.int64), np.ascontiguousarray(stop, np.int64), codes
        )
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
                inside: np.ndarray = words[begin + k]
                return inside
            left = np.clip(size - k, 0, 8).astype(np.uint64)
            keep = np.where(left == 8, np.uint64(2**64 - 1), (np.uint64(1) << (left * np.uint64(8))) - np.uint64(1))
            masked: np.ndarray = words[np.minimum(begin + k, len(words) - 1)] & keep
            return masked

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
        return codes.reshape(-1), [
            buf[b:e].decode("utf-8") for b, e in zip(begin[first].tolist(), stop[first].tolist())
        ]


def decode_columns(
    buf: bytes, starts: np.ndarray, ends: np.ndarray, layout: str
) -> tuple[list[Any], np.ndarray] | None:
    """One run of :class:`Columns` decoded from the encodings ``buf[starts[i]:ends[i]]``."""
    return Columns(buf).decode(starts, ends, layout)
