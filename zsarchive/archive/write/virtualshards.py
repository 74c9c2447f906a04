"""Shard indexes of virtual shards: an export reads the index of each virtual chunk ref of a sharded
array from its object (under an authorized prefix, on condition of the ref's checksum) and keeps it
as an ``I`` record keyed by the ref's location, range and checksum, so that a reader finds an inner
chunk of a virtual shard with one read of that inner chunk's bytes."""

from __future__ import annotations

import concurrent.futures
from dataclasses import dataclass
from typing import Iterable, Iterator

import numpy as np

from zsarchive.archive.format import tuples
from zsarchive.archive.format import schema
from zsarchive.archive.write.chunkfiles import MARK, VirtualShardEntry
from zsarchive.archive.read.chunkdata import ChunkReader
from zsarchive.archive.format.shards import ShardLayout
from zsarchive.archive.format.views import VirtualRangeKey
from zsarchive.errors import ZSError
from zsarchive.icechunk.manifest.refs import RefBatch
from zsarchive.icechunk.model import RefKind


_READS_IN_FLIGHT = 16
_BYTES_IN_FLIGHT = 64 << 20  # an index may be 256 MiB (ShardLayout's ceiling): never 16 of those at once


def entries(batch: RefBatch) -> list[bytes]:
    """Entries naming the virtual refs of ``batch`` (an export's task hands them on with its records)."""
    rows = np.flatnonzero([kind is RefKind.VIRTUAL for kind in batch.kind]).tolist()
    offsets, lengths = batch.offset.tolist(), batch.length.tolist()
    return [
        MARK
        + tuples.encode(
            VirtualRangeKey(
                batch.location[j], offsets[j], lengths[j], batch.checksum_etag[j], batch.checksum_last_modified[j]
            ).encode()
        )
        for j in rows
    ]


@dataclass
class Skipped:
    """Virtual shards whose index an export did not keep: how many, and the first one's reason."""

    count: int = 0
    first: str = ""

    def add(self, why: str) -> None:
        self.count += 1
        self.first = self.first or why


def index_records(reader: ChunkReader, stream: Iterable[bytes], skipped: Skipped) -> Iterator[bytes]:
    """The ``I`` records of the virtual shards ``stream`` names (sorted, unique entries of virtual ranges;
    a shard's ends in ``" " + layout``), read ``_READS_IN_FLIGHT`` at a time and at most ``_BYTES_IN_FLIGHT`` of indexes
    at a time (an index larger than that alone). A shard that cannot be read, has no
    checksum, or whose index does not check out gets no record (a reader then reads its index from the
    object, as zarr does) and counts in ``skipped``."""
    with concurrent.futures.ThreadPoolExecutor(_READS_IN_FLIGHT) as pool:
        shards = (
            (entry.key, entry.layout) for entry in map(VirtualShardEntry.parse, stream) if entry.layout is not None
        )
        for batch in read_batches(shards):
            for key, layout, outcome in pool.map(lambda item: (*item, _read_index(reader, *item)), batch):
                if isinstance(outcome, bytes):
                    yield schema.record(schema.SHARD_INDEX, key, (layout.at_end, outcome))
                else:
                    skipped.add(outcome.reason)


def read_batches(
    parsed: Iterable[tuple[tuple, ShardLayout]], budget: int = _BYTES_IN_FLIGHT
) -> Iterator[list[tuple[tuple, ShardLayout]]]:
    """``parsed`` entries in batches read together: at most ``4 × _READS_IN_FLIGHT`` entries whose
    indexes add up to at most ``budget`` bytes, or one entry alone."""
    batch: list[tuple[tuple, ShardLayout]] = []
    size = 0
    for item in parsed:
        if batch and (size + item[1].index_size > budget or len(batch) == 4 * _READS_IN_FLIGHT):
            yield batch
            batch, size = [], 0
        batch.append(item)
        size += item[1].index_size
    if batch:
        yield batch


@dataclass
class _NotKept:
    reason: str


def _read_index(reader: ChunkReader, key: tuple, layout: ShardLayout) -> bytes | _NotKept:
    location, offset, length, etag, last_modified = key
    where = f"virtual shard {location} [{offset}, {offset + length})"
    if not etag and not last_modified:
        return _NotKept(f"{where}: its ref has no checksum to pin the object the index would come from")
    if layout.index_size > length:
        return _NotKept(f"{where}: shorter than its index")
    start, stop = layout.index_span(length)
    try:
        raw = reader.read_virtual(location, offset + start, stop - start, etag, last_modified, where)
        layout.entries(raw, length, where)
    except ZSError as exc:
        return _NotKept(str(exc))
    return raw
