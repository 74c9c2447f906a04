"""A zarr shard's index read as ZEP 2 describes it, with no zsarchive code: the answer our shard
handling is held to."""

from __future__ import annotations

import numpy as np


def shard_index(
    shard: bytes, chunks_per_shard: tuple[int, ...], at_end: bool, crc: bool
) -> tuple[list[tuple[int, int]], bytes]:
    """The ``(offset, length)`` entries of ``shard``'s index (``2**64 - 1`` twice: an empty inner
    chunk) and the index's raw bytes, its crc32c included when ``crc``."""
    n = int(np.prod(chunks_per_shard))
    size = 16 * n + 4 * crc
    raw = shard[-size:] if at_end else shard[:size]
    return [tuple(pair) for pair in np.frombuffer(raw[: 16 * n], "<u8").reshape(n, 2).tolist()], raw
