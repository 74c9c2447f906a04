"""How much any input may make zsarchive decode, and decoders that stop there.

Archives and repositories come from anyone: a few kilobytes of compressed bytes can claim gigabytes.
Each ceiling below bounds what one piece of input may decode to; whoever trusts their input can raise
it with the environment variable of the same name (a byte count, or with a K, M or G suffix).
"""

from __future__ import annotations

import io
import json
import os
import re
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import zstandard

from zsarchive.errors import ZSCorrupt, ZSError

CEILINGS = {
    "ZSARCHIVE_MAX_BLOCK": 64 << 20,
    "ZSARCHIVE_MAX_ICECHUNK": 4 << 30,
    "ZSARCHIVE_MAX_RATIO": 1000,
    "ZSARCHIVE_MAX_YAML": 16 << 20,
}
"""The defaults: a ZS data or index block, decoded; an Icechunk metadata file's payload, decoded; how
many times its compressed size an Icechunk payload may grow (above 64 MiB); a V1 ``config.yaml``."""

RATIO_FLOOR = 64 << 20
"""Icechunk payloads up to this size decode whatever their compression ratio."""

_SIZE = re.compile(r"^\s*(\d+)\s*([KMGT]?)i?B?\s*$", re.I)
_STEP = 1024  # compressed bytes fed at a time: zstd turns 1 KiB into at most ~32 MiB


class TooLarge(ValueError):
    """Input that would decode beyond a ceiling (a ValueError: codec failures are reported alike)."""


class Malformed(ValueError):
    """A compressed stream that is cut short or followed by other bytes."""


def size_of(text: str) -> int | None:
    """A byte count as people write one (``512M``, ``8G``, ``2T``, ``1000``), None for other text."""
    match = _SIZE.match(text)
    if match is None:
        return None
    return int(match.group(1)) << {"": 0, "K": 10, "M": 20, "G": 30, "T": 40}[match.group(2).upper()]


def ceiling(name: str) -> int:
    """The ceiling ``name`` (a key of :data:`CEILINGS`), from the environment if it is set there."""
    text = os.environ.get(name)
    if text is None:
        return CEILINGS[name]
    size = size_of(text)
    if size is None:
        raise ZSError(f"{name}={text!r} is not a size (e.g. 512M or 8G)")
    return size


def too_large(limit: int, name: str) -> TooLarge:
    """The error for a payload that decodes beyond ``limit`` bytes, the ceiling ``name``."""
    hint = f", the ceiling {name} (raise it for input you trust)" if name in CEILINGS else ""
    return TooLarge(f"decodes to more than {limit} bytes{hint}")


def icechunk_limit(compressed: int) -> int:
    """What an Icechunk payload of ``compressed`` bytes may decode to."""
    return min(ceiling("ZSARCHIVE_MAX_ICECHUNK"), max(RATIO_FLOOR, compressed * ceiling("ZSARCHIVE_MAX_RATIO")))


def inflate(decompressor: Any, data: bytes, limit: int, name: str) -> bytes:
    """Decode a whole raw deflate or lzma stream (a ``zlib``/``lzma`` decompressor object) of at most
    ``limit`` bytes; the stream must end exactly at the end of ``data``. It decodes STEP bytes at a
    time into one buffer: a stream past the limit is refused having made at most ``limit + STEP``."""
    out = _Gathered(limit, name)
    pending = data
    while True:
        piece = decompressor.decompress(pending, STEP)
        out.add(piece)
        if decompressor.eof:
            break
        # zlib keeps input it has not used yet; lzma keeps it inside and asks for more when done
        pending = getattr(decompressor, "unconsumed_tail", b"")
        if not piece and not pending and getattr(decompressor, "needs_input", True):
            raise Malformed("stream is truncated or has trailing bytes")
    if decompressor.unused_data:
        raise Malformed("stream is truncated or has trailing bytes")
    return out.value()


STEP = 1 << 20
"""Decoded bytes made at a time by a stream decoder: what it may make past its ceiling."""


class _Gathered:
    """Decoded pieces appended to one growing buffer whose bytes are handed over, not copied, at the
    end (``BytesIO.getvalue`` shares its buffer): a payload is held once, never as pieces and a join."""

    def __init__(self, limit: int, name: str) -> None:
        self._buffer = io.BytesIO()
        self._total = 0
        self._limit = limit
        self._name = name

    def add(self, piece: bytes) -> None:
        """Append ``piece``; TooLarge once the total passes the limit."""
        self._total += len(piece)
        if self._total > self._limit:
            raise too_large(self._limit, self._name)
        self._buffer.write(piece)

    def value(self) -> bytes:
        """Everything appended, as bytes (the buffer's own, no copy)."""
        value = self._buffer.getvalue()
        self._buffer = None  # type: ignore[assignment]  # the bytes now belong to the caller alone
        return value


LOCATION_LIMIT = 1 << 20
"""A virtual chunk location (a URL) decodes to at most this many bytes."""


def unzstd(
    data: bytes, limit: int, name: str, context: zstandard.ZstdDecompressor | None = None, feed: int = _STEP
) -> bytes:
    """Decode one whole zstd frame of at most ``limit`` bytes; nothing may follow the frame. A frame that
    declares more is refused unread; one that declares nothing is fed a little at a time, so that it
    is refused before much more than the limit is made.
    ``context``: a decompressor with a dictionary, if the frame needs one; ``feed``: compressed bytes
    given at a time to a frame that declares no size (each byte may make up to ~32 KiB)."""
    import zstandard  # here: only zstd payloads need it, and most reads decode none

    declared = zstandard.frame_content_size(data)  # -1: the frame does not say
    if declared > limit:
        raise too_large(limit, name)
    context = context or zstandard.ZstdDecompressor()
    if declared >= 0:
        # zstd refuses to decode past a declared size, so such a frame goes in one call (faster than a
        # stream, and it lets other threads run meanwhile); the stream below names what is wrong with one
        # that does not decode
        try:
            return context.decompress(data, allow_extra_data=False)
        except zstandard.ZstdError:
            pass
    step = len(data) if declared >= 0 else feed
    d = context.decompressobj()
    out = _Gathered(limit, name)
    view = memoryview(data)
    for start in range(0, len(view), step):
        piece = d.decompress(view[start : start + step])
        if declared >= 0 and d.eof and start == 0:
            if d.unused_data or step < len(view):
                raise Malformed("zstd frame has trailing bytes")
            return piece  # the frame in one piece, decoded to its declared size: nothing to gather
        out.add(piece)
        if d.eof:
            if d.unused_data or start + step < len(view):
                raise Malformed("zstd frame has trailing bytes")
            return out.value()
    raise Malformed("zstd frame is truncated")


def load_json(raw: bytes | str, where: str) -> Any:
    """Parse a JSON document from input; ZSCorrupt naming ``where`` if it is not JSON or nests so deeply
    that parsing it would exhaust the stack."""
    try:
        return json.loads(raw)
    except RecursionError:
        raise ZSCorrupt(f"{where}: JSON nested too deeply") from None
    except ValueError as exc:  # JSONDecodeError and UnicodeDecodeError
        raise ZSCorrupt(f"{where}: not valid JSON ({exc})") from None
