"""How much any input may make zsarchive decode, and decoders that stop there.

Archives and repositories come from anyone: a few kilobytes of compressed bytes can claim gigabytes.
Each ceiling below bounds what one piece of input may decode to; whoever trusts their input can raise
it with the environment variable of the same name (a byte count, or with a K, M or G suffix).
"""

from __future__ import annotations

import json
import os
import re
from typing import Any

import zstandard

from zsarchive.errors import ZSCorrupt, ZSError

CEILINGS = {
    "ZSARCHIVE_MAX_BLOCK": 256 << 20,
    "ZSARCHIVE_MAX_ICECHUNK": 4 << 30,
    "ZSARCHIVE_MAX_RATIO": 1000,
    "ZSARCHIVE_MAX_YAML": 16 << 20,
}
"""The defaults: a ZS data or index block, decoded; an Icechunk metadata file's payload, decoded; how
many times its compressed size an Icechunk payload may grow (above 64 MiB); a V1 ``config.yaml``."""

RATIO_FLOOR = 64 << 20
"""Icechunk payloads up to this size decode whatever their compression ratio."""

_SIZE = re.compile(r"^\s*(\d+)\s*([KMG]?)i?B?\s*$", re.I)
_STEP = 1024  # compressed bytes fed at a time: zstd turns 1 KiB into at most ~32 MiB


class TooLarge(ValueError):
    """Input that would decode beyond a ceiling (a ValueError: codec failures are reported alike)."""


class Malformed(ValueError):
    """A compressed stream that is cut short or followed by other bytes."""


def ceiling(name: str) -> int:
    """The ceiling ``name`` (a key of :data:`CEILINGS`), from the environment if it is set there."""
    text = os.environ.get(name)
    if text is None:
        return CEILINGS[name]
    match = _SIZE.match(text)
    if match is None:
        raise ZSError(f"{name}={text!r} is not a size (e.g. 512M or 8G)")
    return int(match.group(1)) << {"": 0, "K": 10, "M": 20, "G": 30}[match.group(2).upper()]


def too_large(limit: int, name: str) -> TooLarge:
    """The error for a payload that decodes beyond ``limit`` bytes, the ceiling ``name``."""
    hint = f", the ceiling {name} (raise it for input you trust)" if name in CEILINGS else ""
    return TooLarge(f"decodes to more than {limit} bytes{hint}")


def icechunk_limit(compressed: int) -> int:
    """What an Icechunk payload of ``compressed`` bytes may decode to."""
    return min(ceiling("ZSARCHIVE_MAX_ICECHUNK"),
               max(RATIO_FLOOR, compressed * ceiling("ZSARCHIVE_MAX_RATIO")))


def inflate(decompressor: Any, data: bytes, limit: int, name: str) -> bytes:
    """Decode a whole raw deflate or lzma stream (a ``zlib``/``lzma`` decompressor object) of at most
    ``limit`` bytes; the stream must end exactly at the end of ``data``."""
    out = decompressor.decompress(data, limit + 1)
    if len(out) > limit:
        raise too_large(limit, name)
    if not decompressor.eof or decompressor.unused_data:
        raise Malformed("stream is truncated or has trailing bytes")
    return out


LOCATION_LIMIT = 1 << 20
"""A virtual chunk location (a URL) decodes to at most this many bytes."""


def unzstd(data: bytes, limit: int, name: str, context: zstandard.ZstdDecompressor | None = None) -> bytes:
    """Decode one whole zstd frame of at most ``limit`` bytes; nothing may follow the frame. A frame that
    declares more is refused unread; one that declares nothing is fed a little at a time, so that it
    is refused before much more than the limit is made.
    ``context``: a decompressor with a dictionary, if the frame needs one."""
    declared = zstandard.frame_content_size(data)  # -1: the frame does not say
    if declared > limit:
        raise too_large(limit, name)
    # zstd refuses to decode past a declared size, so such a frame can go in one piece
    step = len(data) if declared >= 0 else _STEP
    d = (context or zstandard.ZstdDecompressor()).decompressobj()
    parts, total = [], 0
    view = memoryview(data)
    for start in range(0, len(view), step):
        piece = d.decompress(view[start:start + step])
        total += len(piece)
        if total > limit:
            raise too_large(limit, name)
        parts.append(piece)
        if d.eof:
            if d.unused_data or start + step < len(view):
                raise Malformed("zstd frame has trailing bytes")
            return b"".join(parts)
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
