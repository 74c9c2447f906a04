"""Block payload codecs: the three ZS v0.10 codecs plus zsarchive's opt-in ``zstd`` extension."""

from __future__ import annotations

import threading
from typing import Any, Callable, cast

# lzma and zstandard are imported by the functions that use them: most files are deflate, and a
# one-record lookup should not pay for importing the other two libraries.
try:
    # zlib-ng: the same raw deflate streams, ~2x faster both ways, and it releases the GIL too.
    from zlib_ng import zlib_ng as zlib

    # Deflate levels keep zlib's meaning. zlib-ng's levels trade differently (its 6 was 7% larger
    # than zlib's 6 on repetitive text), so each maps to the zlib-ng level measured to compress
    # at least about as well on text, JSON and hex records; zlib-ng 7 still runs ~1.5x faster
    # than zlib 6.
    _DEFLATE_LEVELS = {0: 0, 1: 2, 2: 3, 3: 4, 4: 5, 5: 7, 6: 7, 7: 8, 8: 9, 9: 9}
except ImportError:  # pragma: no cover - a platform without zlib-ng wheels falls back to zlib
    import zlib  # type: ignore[no-redef]

    _DEFLATE_LEVELS = {n: n for n in range(10)}

from zsarchive.errors import ZSCorrupt, ZSError
from zsarchive.limits import ceiling, inflate, unzstd
from zsarchive.typedtuple import TypedTuple

BLOCK_CEILING = "ZSARCHIVE_MAX_BLOCK"

LZMA_CODEC = "lzma2;dsize=2^20"
_LZMA_LEVELS = ("0", "0e", "1", "1e")
_EXTREME_DICT = {"0e": 2**18, "1e": 2**20}  # the presets' dictionaries


class Codec(TypedTuple):
    """A codec as named in the header, with ready-to-call compress/decompress functions (a typed tuple:
    a frozen dataclass costs every start of the command line ~6x as much to define)."""

    name: str
    compress: Callable[[bytes], bytes]
    decompress: Callable[[bytes], bytes]
    standard: bool
    store: Callable[[list[Any]], list[Any]]
    """The payload, given as a list of buffers it is the concatenation of, in the codec's own framing
    but not compressed (for bytes that are compressed already, such as chunk data), as a list of
    buffers (views into the given ones: no copy): any reader of the codec decodes it, at the speed of
    a copy."""


def _deflate_compress(level: int) -> Callable[[bytes], bytes]:
    level = _DEFLATE_LEVELS[level]

    def compress(data: bytes) -> bytes:
        c = zlib.compressobj(level, zlib.DEFLATED, -15)
        return c.compress(data) + c.flush()

    return compress


def _deflate_decompress(data: bytes) -> bytes:
    stored = _deflate_stored_parts(data)
    if stored is not None:  # the bytes as they are: one join, where zlib copies through its window
        return b"".join(stored)
    return inflate(zlib.decompressobj(-15), data, ceiling(BLOCK_CEILING), BLOCK_CEILING)


def _lzma_filters(level: str) -> dict[str, Any]:
    """liblzma settings for an lzma level; every one decodes with the header's 1 MiB dictionary.

    "0" and "1" are liblzma's presets, as the reference uses them. The extreme levels keep their
    presets' normal (optimal-parsing) mode, bt4 match finder, dictionary and lc/lp/pb, but end
    match searches at 64 bytes or 32 tree steps: ~0.9x the preset's time, files within 2 % of its
    on every kind of data tests/zs/test_format_codecs.py generates.
    """
    import lzma

    if not level.endswith("e"):
        return {"id": lzma.FILTER_LZMA2, "preset": int(level)}
    return {
        "id": lzma.FILTER_LZMA2,
        "dict_size": _EXTREME_DICT[level],
        "lc": 3,
        "lp": 0,
        "pb": 2,
        "mode": lzma.MODE_NORMAL,
        "mf": lzma.MF_BT4,
        "nice_len": 64,
        "depth": 32,
    }


def _lzma_compress(level: str) -> Callable[[bytes], bytes]:
    import lzma

    filters = [_lzma_filters(level)]

    def compress(data: bytes) -> bytes:
        return lzma.compress(data, format=lzma.FORMAT_RAW, filters=filters)

    return compress


def _lzma_decompress(data: bytes) -> bytes:
    import lzma

    d = lzma.LZMADecompressor(format=lzma.FORMAT_RAW, filters=[{"id": lzma.FILTER_LZMA2, "dict_size": 2**20}])
    return inflate(d, data, ceiling(BLOCK_CEILING), BLOCK_CEILING)


def _zstd_compress(level: int) -> Callable[[bytes], bytes]:
    import zstandard

    # A ZstdCompressor must not be shared between threads: keep one per thread.
    local = threading.local()

    def compress(data: bytes) -> bytes:
        try:
            c = local.compressor
        except AttributeError:
            c = local.compressor = zstandard.ZstdCompressor(level=level, write_content_size=True)
        compressed: bytes = c.compress(data)
        return compressed

    return compress


def _zstd_decompress(data: bytes) -> bytes:
    # One whole frame and nothing after it, as for deflate and lzma.
    # our writer declares every frame's size; one that does not is fed in small steps, so that a
    # bomb is refused having made at most a few MiB past the ceiling
    return unzstd(data, ceiling(BLOCK_CEILING), BLOCK_CEILING, feed=128)


def _identity(data: bytes) -> bytes:
    return bytes(data)


def _runs(parts: list[Any], size: int) -> list[tuple[int, list[memoryview]]]:
    """The bytes of the buffers ``parts`` in runs of ``size`` (the last one shorter, and empty only
    when there are no bytes at all), each as ``(length, views into parts)``: no byte is copied."""
    runs: list[tuple[int, list[memoryview]]] = []
    run: list[Any] = []
    length = 0
    for part in parts:
        view = memoryview(part).cast("B")
        at = 0
        while at < len(view):
            take = min(size - length, len(view) - at)
            run.append(view[at : at + take])
            length += take
            at += take
            if length == size:
                runs.append((length, run))
                run, length = [], 0
    if length or not runs:
        runs.append((length, run))
    return runs


def _stored_identity(parts: list[Any]) -> list[Any]:
    return parts


DEFLATE_STORED_BLOCK = 65531
"""Most bytes per stored deflate block our writer makes. A payload under 32 KiB is one final block;
a longer one is blocks of this size (the last holds the rest) then an empty final block: for payloads
up to 65,531 bytes, the stream zlib-ng writes at level 0, byte for byte."""
_STORED_MIN = 4096  # a stream cut into more stored blocks than one per this many bytes (never ours) is zlib's to decode


def _deflate_store(parts: list[Any]) -> list[Any]:
    """A raw deflate stream of stored blocks (RFC 1951 BTYPE 00: a header byte, LEN and NLEN as u16
    little-endian, the bytes)."""
    runs = _runs(parts, DEFLATE_STORED_BLOCK)
    if sum(size for size, _ in runs) >= 1 << 15:
        runs.append((0, []))
    out: list[Any] = []
    for i, (size, run) in enumerate(runs):
        out.append(bytes((i == len(runs) - 1, size & 0xFF, size >> 8, ~size & 0xFF, (~size >> 8) & 0xFF)))
        out.extend(run)
    return out


def _deflate_stored_parts(data: bytes) -> list[Any] | None:
    """The bytes of a raw deflate stream made of stored blocks only, as views into ``data``; None for
    any other stream (compressed blocks, header padding bits set, LEN/NLEN that disagree, bytes
    missing or left over), which zlib then decodes or refuses."""
    view = memoryview(data).cast("B")
    n = len(view)
    parts: list[memoryview] = []
    most = n // _STORED_MIN + 2
    pos = 0
    while pos + 5 <= n:
        final = view[pos]
        size = view[pos + 1] | view[pos + 2] << 8
        if final > 1 or size ^ (view[pos + 3] | view[pos + 4] << 8) != 0xFFFF:
            return None
        pos += 5 + size
        if pos > n or len(parts) > most:
            return None
        parts.append(view[pos - size : pos])
        if final:
            return parts if pos == n else None
    return None


_LZMA2_RAW_CHUNK = 1 << 16


def _lzma_store(parts: list[Any]) -> list[Any]:
    """A raw LZMA2 stream of uncompressed chunks (control byte 1 for the first, which resets the
    dictionary, 2 after it; then the chunk's size - 1 as u16 big-endian), ended by a 0 byte."""
    out: list[Any] = []
    for i, (size, run) in enumerate(_runs(parts, _LZMA2_RAW_CHUNK)):
        if size:
            out.append(bytes((1 if i == 0 else 2,)) + (size - 1).to_bytes(2, "big"))
            out.extend(run)
    out.append(b"\x00")
    return out


_ZSTD_RAW_BLOCK = 1 << 17


def _zstd_store(parts: list[Any]) -> list[Any]:
    """One zstd frame (RFC 8878) of raw blocks: single-segment header with an 8-byte content size,
    then blocks of type Raw (a 3-byte header: last flag, type 0, size)."""
    runs = _runs(parts, _ZSTD_RAW_BLOCK)
    out: list[bytes | memoryview] = [b"\x28\xb5\x2f\xfd", b"\xe0", sum(size for size, _ in runs).to_bytes(8, "little")]
    for i, (size, run) in enumerate(runs):
        out.append(((size << 3) | (i == len(runs) - 1)).to_bytes(3, "little"))
        out.extend(run)
    return out


NAMES = ("none", "deflate", "lzma", "zstd")
"""The codec names the command line and the writer take (the reference's three, then zstd)."""
# Command-line / constructor names -> header names.
ALIASES = {"none": "none", "deflate": "deflate", "lzma": LZMA_CODEC, LZMA_CODEC: LZMA_CODEC, "zstd": "zstd"}
DEFAULT_LEVELS = {"none": None, "deflate": 6, LZMA_CODEC: "0e", "zstd": 3}
LEVELS_HELP = "deflate: 0-9 (default 6); lzma: 0, 0e, 1 or 1e (default 0e); zstd: an integer (default 3)."
"""The compression levels each codec takes, as the command line explains them."""
_STORERS = {"none": _stored_identity, "deflate": _deflate_store, LZMA_CODEC: _lzma_store, "zstd": _zstd_store}
_DECOMPRESSORS = {
    "none": _identity,
    "deflate": _deflate_decompress,
    LZMA_CODEC: _lzma_decompress,
    "zstd": _zstd_decompress,
}


def get_codec(name: str, level: int | str | None = None) -> Codec:
    """Return the codec for a command-line or header name, with compression at ``level``."""
    header_name = ALIASES.get(name)
    if header_name is None:
        raise ZSError(f"unknown codec {name!r}; choose one of none, deflate, lzma, zstd")
    if level is None:
        level = DEFAULT_LEVELS[header_name]
    compress: Callable[[bytes], bytes]
    if header_name == "none":
        compress = _identity
    elif header_name == "deflate":
        if not isinstance(level, int) and not str(level).isdigit() or not 0 <= int(str(level)) <= 9:
            raise ZSError(f"deflate compression level must be 0-9, not {level!r}")
        compress = _deflate_compress(int(str(level)))
    elif header_name == LZMA_CODEC:
        if str(level) not in _LZMA_LEVELS:
            raise ZSError(f"lzma compression level must be one of 0, 0e, 1, 1e (1 MiB dictionary), not {level!r}")
        compress = _lzma_compress(str(level))
    else:
        try:
            zlevel = int(level)  # type: ignore[arg-type]  # None or text that is no number: the error below
        except (TypeError, ValueError):
            raise ZSError(f"zstd compression level must be an integer, not {level!r}") from None
        compress = _zstd_compress(zlevel)
    return Codec(header_name, compress, _DECOMPRESSORS[header_name], header_name != "zstd", _STORERS[header_name])


def stored_parts_for(header_name: str) -> Callable[[bytes], list[Any] | None]:
    """For a codec name read from a file header: a function giving the bytes of a payload stored in
    the codec's uncompressed framing as views into it (None for a compressed one: decompress it)."""
    if header_name == "none":
        return lambda data: [data]
    if header_name == "deflate":
        return _deflate_stored_parts
    return lambda data: None


def decoder_for(header_name: str) -> Callable[[bytes], bytes]:
    """Return the decompress function for a codec name read from a file header."""
    try:
        return _DECOMPRESSORS[header_name]
    except KeyError:
        raise ZSError(f"unsupported codec {header_name!r} in file header") from None


def _decode_errors() -> tuple[type[BaseException], ...]:
    """Every codec's failures (evaluated by ``except`` only once something failed: by then the
    failing codec's library is imported, and importing the others costs nothing that matters)."""
    import lzma

    import zstandard

    zlib_error = cast(type[BaseException], zlib.error)  # zlib-ng's stub declares the class an instance
    return (zlib_error, lzma.LZMAError, zstandard.ZstdError, ValueError)


def decompress_checked(decompress: Callable[[bytes], bytes], data: bytes, where: str) -> bytes:
    """Decompress, turning any codec failure into ZSCorrupt naming ``where`` (running out of memory is
    the machine's limit, not the file's fault: a ZSError saying so)."""
    try:
        return decompress(data)
    except MemoryError:
        raise ZSError(f"{where}: not enough memory to decompress its payload") from None
    except _decode_errors() as exc:
        raise ZSCorrupt(f"{where}: payload does not decompress: {exc}") from None
