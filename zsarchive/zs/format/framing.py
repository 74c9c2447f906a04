"""Record framing on the read side: where each record of a data payload starts, and re-framing
records for output (terminated, uleb128- or u64le-length-prefixed), as ``zs dump`` writes them.

These are the per-record hot loops of a dump or a lookup, so they are written for speed: the
common case (every record shorter than 128 bytes, one-byte terminator) avoids creating one
object per record.
"""

from __future__ import annotations

import struct
from array import array
from typing import Sequence

from zsarchive.errors import ZSCorrupt
from zsarchive.zs.format import uleb128
from zsarchive.zs.format import block
from zsarchive.zs.format.block import decode_records

LENGTH_PREFIXES = ("uleb128", "u64le")
_U64 = struct.Struct("<Q")


def record_heads(payload: bytes, where: str) -> tuple[array[int], bool]:
    """Return the offsets of every record's length field, plus ``len(payload)`` as a sentinel,
    and whether every length field is one byte long.

    Record ``i`` then ends at ``heads[i + 1]``; this array is all a lookup needs to bisect a block.
    """
    heads: list[int] = []
    append = heads.append
    pos = 0
    n = len(payload)
    simple = payload.isascii()
    if simple:
        # No byte >= 0x80 anywhere, so every length field is one byte: the branch-free loop.
        while pos < n:
            append(pos)
            pos += payload[pos] + 1
    else:
        simple = True
        while pos < n:
            append(pos)
            length = payload[pos]
            if length < 0x80:
                pos += length + 1
            else:
                simple = False
                length, start = uleb128.decode(payload, pos, f"{where}: record {len(heads) - 1} length")
                pos = start + length
    if pos > n:
        raise ZSCorrupt(f"{where}: record {len(heads) - 1} runs past the end of the {n}-byte payload")
    if not heads:
        raise ZSCorrupt(f"{where}: data block payload holds no records")
    append(n)
    packed = array("Q")
    packed.fromlist(heads)  # 8 bytes per record in the cache instead of ~36 for a list of ints
    return packed, simple


def record_spans(payload: bytes, where: str) -> tuple[memoryview, memoryview]:
    """Where each record of a data payload starts and ends (record ``i`` is ``payload[starts[i]:ends[i]]``),
    as int64 sequences, without an object per record; ZSCorrupt on bad framing."""
    if block.c_framing is not None and (found := block.c_framing.spans(payload)) is not None:
        return memoryview(found[0]).cast("q"), memoryview(found[1]).cast("q")
    heads, simple = record_heads(payload, where)
    ends = array("q", heads[1:])
    if simple:
        starts = array("q", (head + 1 for head in heads[:-1]))
    else:
        starts = array("q", (uleb128.decode(payload, head, where)[1] for head in heads[:-1]))
    return memoryview(starts), memoryview(ends)


def terminate(payload: bytes, terminator: bytes, where: str) -> bytes:
    """Re-frame a whole data payload as records each followed by ``terminator``."""
    if block.c_framing is not None and (framed := block.c_framing.terminate(payload, terminator)) is not None:
        return framed
    n = len(payload)
    if len(terminator) == 1 and n:
        # Output = payload shifted left by one byte, with each later length byte replaced by the
        # terminator: no per-record object. Falls back on a multi-byte length or bad framing.
        out = bytearray(payload)
        del out[0]
        out.append(terminator[0])
        term = terminator[0]
        pos = 0
        try:
            if payload.isascii():  # every length field is one byte
                while pos < n:
                    pos += payload[pos] + 1
                    out[pos - 1] = term
                return bytes(out)
            while pos < n:
                length = payload[pos]
                if length >= 0x80:
                    break
                pos += length + 1
                out[pos - 1] = term
            else:
                return bytes(out)
        except IndexError:
            pass  # the last record runs past the end: decode_records names it
    records = decode_records(payload, where)
    records.append(b"")
    return terminator.join(records)


def frame(records: Sequence[bytes], terminator: bytes = b"\n", length_prefixed: str | None = None) -> bytes:
    """Frame records for output: each followed by ``terminator``, or prefixed by its length."""
    if length_prefixed is None:
        return terminator.join([*records, b""])
    if length_prefixed == "uleb128":
        enc = uleb128.encode
        return b"".join([enc(len(r)) + r for r in records])
    if length_prefixed == "u64le":
        pack = _U64.pack
        return b"".join([pack(len(r)) + r for r in records])
    raise ValueError(f"length_prefixed must be one of {', '.join(LENGTH_PREFIXES)} or None, not {length_prefixed!r}")
