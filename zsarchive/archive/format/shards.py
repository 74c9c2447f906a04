"""Zarr v3 shards (``sharding_indexed``, ZEP 2): where a shard keeps its index, and what the index
says of each inner chunk. The exporter keeps each native shard's index in the archive (family
``I``), so a reader answers a shard-index request, and finds an inner chunk, without reading the shard.
"""

from __future__ import annotations

import json
import math
import sys
from array import array
from dataclasses import dataclass

from fastcrc import crc32 as _crc32

from zsarchive.errors import ZSCorrupt, ZSError

_crc32c = _crc32.iscsi
EMPTY = 2**64 - 1
"""Offset and length of an inner chunk the shard does not hold (the fill value)."""


@dataclass(frozen=True)
class ShardLayout:
    """How one array's shards are laid out: inner chunks per shard (C order), and the index's place
    (start or end of the shard), byte order and crc32c checksum."""

    chunks_per_shard: tuple[int, ...]
    at_end: bool
    big_endian: bool
    checksum: bool

    @property
    def inner(self) -> int:
        """Inner chunks per shard (the index has an entry for each, held or not)."""
        return math.prod(self.chunks_per_shard)

    @property
    def index_size(self) -> int:
        """Bytes of the encoded index: 16 per inner chunk, plus 4 of crc32c."""
        return 16 * self.inner + 4 * self.checksum

    def index_span(self, shard_length: int) -> tuple[int, int]:
        """``[start, stop)`` of the index within a shard of ``shard_length`` bytes."""
        if self.at_end:
            return shard_length - self.index_size, shard_length
        return 0, self.index_size

    def encode(self) -> str:
        """A compact text form (how export tasks pass a layout along with chunk ids)."""
        return json.dumps(
            [list(self.chunks_per_shard), self.at_end, self.big_endian, self.checksum], separators=(",", ":")
        )

    @classmethod
    def decode(cls, text: str) -> ShardLayout:
        """Inverse of :meth:`encode`."""
        shape, at_end, big, checksum = json.loads(text)
        return cls(tuple(shape), at_end, big, checksum)

    def inner_number(self, inner: tuple[int, ...]) -> int:
        """The index entry of the inner chunk at ``inner`` (its position within the shard)."""
        if len(inner) != len(self.chunks_per_shard) or not all(
            0 <= i < n for i, n in zip(inner, self.chunks_per_shard)
        ):
            raise ZSError(
                f"inner chunk {','.join(map(str, inner))} is outside the shard's "
                f"{'x'.join(map(str, self.chunks_per_shard))} inner chunks"
            )
        number = 0
        for i, n in zip(inner, self.chunks_per_shard):
            number = number * n + i
        return number

    def entries(self, raw: bytes, shard_length: int, where: str) -> list[tuple[int, int]]:
        """The index as (offset, length) per inner chunk, checked: its crc32c, and every held inner
        chunk inside the shard's bytes (ZSCorrupt naming ``where`` otherwise)."""
        if len(raw) != self.index_size:
            raise ZSCorrupt(f"{where}: shard index is {len(raw)} bytes, expected {self.index_size}")
        body = raw[: 16 * self.inner]
        if self.checksum:
            stored = int.from_bytes(raw[-4:], "little")
            if _crc32c(body) != stored:
                raise ZSCorrupt(
                    f"{where}: shard index crc32c mismatch (stored {stored:#010x}, computed {_crc32c(body):#010x})"
                )
        numbers = array("Q", body)
        if self.big_endian != (sys.byteorder == "big"):
            numbers.byteswap()
        table = list(zip(numbers[0::2], numbers[1::2]))
        for offset, length in table:
            if offset != EMPTY and (offset > shard_length or length > shard_length - offset):
                raise ZSCorrupt(f"{where}: shard index points past the shard's {shard_length} bytes")
        return table

    def cuts(self, table: list[tuple[int, int]], shard_length: int) -> list[int]:
        """Where a reader's own reads of a shard start and end, from its start: the index (of
        :meth:`entries` ``table``) and every inner chunk it holds (pieces of embedded bytes are cut there)."""
        start, stop = self.index_span(shard_length)
        held = [(o, n) for o, n in table if o != EMPTY]
        return [start, stop, *(o for o, _ in held), *(o + n for o, n in held)]


def shard_layout(zarr_json: bytes) -> ShardLayout | None:
    """The shard layout of an array from its ``zarr.json``, or None: not sharded, sharded with codecs
    after the sharding codec (the stored bytes are then not the shard), or with an index whose size
    cannot be known ahead (index codecs other than bytes [+ crc32c])."""
    try:
        meta = json.loads(zarr_json)
        codecs = meta["codecs"]
        sharding = codecs[-1]  # a codec after it would transform the shard's bytes: no index to find
        if not isinstance(sharding, dict) or sharding.get("name") != "sharding_indexed":
            return None
        config = sharding["configuration"]
        shard_shape = meta["chunk_grid"]["configuration"]["chunk_shape"]
        inner_shape = config["chunk_shape"]
        index_codecs = [c if isinstance(c, dict) else {"name": c} for c in config.get("index_codecs", ())]
        location = config.get("index_location", "end")
    except (ValueError, TypeError, KeyError, IndexError, AttributeError, RecursionError):
        return None
    names = [c.get("name") for c in index_codecs]
    if names not in (["bytes"], ["bytes", "crc32c"]) or location not in ("start", "end"):
        return None
    endian = (index_codecs[0].get("configuration") or {}).get("endian", "little")
    if not (
        isinstance(shard_shape, list)
        and isinstance(inner_shape, list)
        and len(shard_shape) == len(inner_shape)
        and all(isinstance(n, int) and n > 0 for n in shard_shape + inner_shape)
        and all(s % i == 0 for s, i in zip(shard_shape, inner_shape))
        and endian in ("little", "big")
    ):
        return None
    per_shard = tuple(s // i for s, i in zip(shard_shape, inner_shape))
    if math.prod(per_shard) > 2**24:
        return None  # an index of more than 256 MiB is not one a reader should take in whole
    return ShardLayout(per_shard, location == "end", endian == "big", names[-1] == "crc32c")
