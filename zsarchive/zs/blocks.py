"""The blocks of one open ZS file: its header, index and data blocks fetched and checked, the caches
that keep them, the counters that measure them, and scans of many data blocks through the shared
pipeline (zsarchive.zs.pipeline).
"""

from __future__ import annotations

import threading
from bisect import bisect_left
from typing import Any, Callable, Iterable, Iterator

from zsarchive.errors import ZSCorrupt, ZSError
from zsarchive.io import Transport
from zsarchive.typedtuple import TypedTuple
from zsarchive.zs import pipeline
from zsarchive.zs.cache import LRUCache
from zsarchive.zs.format import header as zsheader
from zsarchive.zs.format import uleb128
from zsarchive.zs.format.block import MAX_INDEX_LEVEL, MIN_BLOCK_LENGTH, decode_index, split_block
from zsarchive.zs.format.codecs import decoder_for, decompress_checked, stored_parts_for
from zsarchive.zs.format.framing import record_heads

HEAD_GUESS = 64 * 1024
"""Bytes fetched from the start at open: more than almost any header, so one request suffices."""
TAIL_GUESS = 64 * 1024
"""Bytes fetched from the end at open: holds the root index of files up to many GB."""

SKIP = object()
"""A scan job's answer for "this block holds nothing wanted": nothing is yielded for it."""


class ReaderStats:
    """Counters of one reader (thread-safe). Tests and benchmarks assert on them."""

    def __init__(self) -> None:
        self.block_reads = 0  # blocks fetched from the transport (including the root)
        self.transport_reads = 0  # calls of transport.read / read_head_tail
        self.bytes_read = 0
        self.decompressions = 0
        self.index_cache_hits = 0
        self.data_cache_hits = 0
        self._lock = threading.Lock()

    def add(self, **counts: int) -> None:
        """Add to several counters at once."""
        with self._lock:
            for name, value in counts.items():
                setattr(self, name, getattr(self, name) + value)

    def snapshot(self) -> dict[str, int]:
        """The counters as a plain dict (subtract two snapshots to measure one operation)."""
        with self._lock:
            return {k: v for k, v in vars(self).items() if not k.startswith("_")}


def _adjacent(extents: list[DataExtent]) -> Iterator[list[DataExtent]]:
    """``extents`` in runs whose blocks follow each other with no byte between them."""
    run: list[DataExtent] = []
    for ext in extents:
        if run and run[-1].offset + run[-1].length != ext.offset:
            yield run
            run = []
        run.append(ext)
    if run:
        yield run


def read_header(
    transport: Transport, tail_guess: int, stats: ReaderStats | None = None
) -> tuple[zsheader.Header, int, bytes]:
    """Open a file: ``(header, where the blocks start, the file's last bytes)``.

    One ``read_head_tail`` serves almost every file (a second read only for a header longer than
    HEAD_GUESS); the tail holds the root index wherever writers put it last.
    """
    head, tail = transport.read_head_tail(HEAD_GUESS, tail_guess)
    reads, nbytes = 1, len(head) + len(tail)
    size = transport.size
    end = zsheader.header_end(head[: zsheader.PREFIX_LENGTH], size, transport.name)
    if end > len(head):
        head = transport.read(0, end)
        reads, nbytes = 2, nbytes + end
    if stats is not None:
        stats.add(transport_reads=reads, bytes_read=nbytes)
    hdr, end = zsheader.parse(head, size, transport.name)
    return hdr, end, tail


class IndexBlock(TypedTuple):
    """A parsed index block: its entries as three parallel lists (bisectable keys)."""

    level: int
    keys: list[bytes]
    offsets: list[int]
    lengths: list[int]


class DataExtent(TypedTuple):
    """A data block's place in the file and its index key."""

    offset: int
    length: int
    key: bytes  # <= every record in the block


class DataBlock:
    """A decompressed data payload plus its record boundaries: bisectable without splitting."""

    __slots__ = ("payload", "heads", "simple", "count")

    def __init__(self, payload: bytes, where: str) -> None:
        self.payload = payload
        self.heads, self.simple = record_heads(payload, where)
        self.count = len(self.heads) - 1

    def record(self, i: int) -> bytes:
        """Record ``i`` of the block."""
        start = self.heads[i]
        end = self.heads[i + 1]
        if self.simple:
            return self.payload[start + 1 : end]
        _, start = uleb128.decode(self.payload, start)
        return self.payload[start:end]

    def bisect(self, key: bytes) -> int:
        """Index of the first record >= key."""
        return bisect_left(range(self.count), key, key=self.record)

    def weight(self) -> int:
        """Approximate memory held, for the byte-bounded cache."""
        return len(self.payload) + 8 * len(self.heads) + 200


class BlockSource:
    """Index and data blocks of one open file, fetched through its transport, checked, cached.

    ``parallelism`` decode threads serve scans (0: all work in the calling thread).
    """

    def __init__(
        self,
        transport: Transport,
        codec: str,
        blocks_start: int,
        parallelism: int,
        index_block_cache: int,
        data_block_cache: int,
        stats: ReaderStats,
    ) -> None:
        self.transport = transport
        self.name = transport.name
        self.stats = stats
        self.blocks_start = blocks_start
        self.parallelism = parallelism
        self._decompress = decoder_for(codec)
        self._stored_parts = stored_parts_for(codec)
        self.index_cache = LRUCache(index_block_cache)
        self.data_cache = LRUCache(data_block_cache)
        self._pools = pipeline.Pools(parallelism)

    @property
    def closed(self) -> bool:
        """True once close() ran: scans end quietly, reads fail with a clear error."""
        return self._pools.closed

    def close(self) -> None:
        """Stop the threads (running scans end) and drop the caches."""
        self._pools.close()
        self.data_cache.clear()
        self.index_cache.clear()

    # ---- fetching and checking -----------------------------------------------------------------

    def read(self, offset: int, length: int, blocks: int = 0) -> bytes:
        """Bytes of the file, counted; a read cut off by close() is a clear ZSError."""
        try:
            data = self.transport.read(offset, length)
        except ValueError:
            if self.closed:  # another thread closed us mid-read (a closed mmap raises ValueError)
                raise ZSError(f"{self.name}: the ZS file was closed during a read") from None
            raise
        self.stats.add(transport_reads=1, bytes_read=length, block_reads=blocks)
        return data

    def payload(self, buf, offset: int, level: int, kind: str) -> bytes:
        """Check one framed block (CRC, expected level) and return its decompressed payload."""
        where = f"{self.name}: block at offset {offset}"
        found, zpayload = split_block(buf, where)
        if found != level:
            raise ZSCorrupt(f"{where}: expected {kind} (level {level}), found a block of level {found}")
        payload = decompress_checked(self._decompress, zpayload, where)
        self.stats.add(decompressions=1)
        return payload

    def payload_view(self, buf: memoryview, offset: int) -> memoryview:
        """Check one framed data block (CRC, level 0) and return its payload as a view: into ``buf``
        where it is stored uncompressed in one piece (codec ``none``, one stored deflate block), else
        into its decoded bytes."""
        where = f"{self.name}: block at offset {offset}"
        found, zpayload = split_block(buf, where)
        if found != 0:
            raise ZSCorrupt(f"{where}: expected a data block (level 0), found a block of level {found}")
        parts = self._stored_parts(zpayload)
        if parts is not None and len(parts) == 1:
            return parts[0]
        self.stats.add(decompressions=1)
        return memoryview(
            b"".join(parts) if parts is not None else decompress_checked(self._decompress, zpayload, where)
        )

    def parse_index(self, buf, offset: int, level: int | None) -> IndexBlock:
        """An index block of ``level`` (None: the root, any index level) from its framed bytes."""
        where = f"{self.name}: block at offset {offset}"
        if level is None:
            level = split_block(buf, where)[0]
            if not 1 <= level <= MAX_INDEX_LEVEL:
                raise ZSCorrupt(
                    f"{where}: the root must be an index block (level 1-{MAX_INDEX_LEVEL}), found level {level}"
                )
        entries = decode_index(self.payload(buf, offset, level, "an index block"), where)
        keys = [e.key for e in entries]
        offsets = [e.offset for e in entries]
        lengths = [e.length for e in entries]
        lo, hi = self.blocks_start, self.transport.size
        for i, (o, n) in enumerate(zip(offsets, lengths)):
            if o < lo or n < MIN_BLOCK_LENGTH or o + n > hi:
                raise ZSCorrupt(
                    f"{where}: index entry {i} points at offset {o} length {n}, outside the blocks area [{lo}, {hi})"
                )
        return IndexBlock(level, keys, offsets, lengths)

    def index_blocks(self, extents: list[tuple[int, int]], level: int) -> list[IndexBlock]:
        """The index blocks at ``extents`` (all of ``level``): cached ones, the rest in one batch."""
        blocks: list[IndexBlock | None] = [self.index_cache.get((o, n, level)) for o, n in extents]
        hits = sum(block is not None for block in blocks)
        if hits:
            self.stats.add(index_cache_hits=hits)
        missing = [i for i, block in enumerate(blocks) if block is None]
        if missing:
            wanted = [extents[i] for i in missing]
            try:
                bufs = self.transport.read_ranges(wanted)
            except ValueError:
                if self.closed:  # closed by another thread mid-read, as in read()
                    raise ZSError(f"{self.name}: the ZS file was closed during a read") from None
                raise
            self.stats.add(transport_reads=1, bytes_read=sum(n for _, n in wanted), block_reads=len(wanted))
            for i, buf in zip(missing, bufs):
                offset, length = extents[i]
                block = self.parse_index(buf, offset, level)
                self.index_cache.put((offset, length, level), block)
                blocks[i] = block
        return blocks  # type: ignore[return-value]

    def data_block(self, extent: DataExtent) -> DataBlock:
        """One parsed data block, through the byte-bounded cache (lookups)."""
        key = (extent.offset, extent.length)
        block = self.data_cache.get(key)
        if block is not None:
            self.stats.add(data_cache_hits=1)
            return block
        payload = self.payload(self.read(extent.offset, extent.length, blocks=1), extent.offset, 0, "a data block")
        block = DataBlock(payload, f"{self.name}: block at offset {extent.offset}")
        self.data_cache.put(key, block, block.weight())
        return block

    def span_payloads(self, extents: list[DataExtent], zero_copy: bool) -> list:
        """The payloads of ``extents`` (data blocks), each run of adjacent blocks fetched in one
        transport read and none cached, each block's CRC checked. ``zero_copy``: where the transport maps
        the file, memoryviews (:meth:`payload_view`: into the map for uncompressed blocks, no copy);
        else bytes."""
        mapped = zero_copy and hasattr(self.transport, "view")
        payloads = []
        for run in _adjacent(extents):
            start, end = run[0].offset, run[-1].offset + run[-1].length
            if mapped:
                buf = self.transport.view(start, end - start)
                self.stats.add(transport_reads=1, bytes_read=end - start, block_reads=len(run))
                payloads.extend(
                    self.payload_view(buf[e.offset - start : e.offset - start + e.length], e.offset) for e in run
                )
            else:
                buf = memoryview(self.read(start, end - start, blocks=len(run)))
                payloads.extend(
                    self.payload(buf[e.offset - start : e.offset - start + e.length], e.offset, 0, "a data block")
                    for e in run
                )
        return payloads

    # ---- scans ---------------------------------------------------------------------------------

    def scan(
        self, extents: Iterable[DataExtent], job: Callable[[bytes, str, DataExtent, bool], Any]
    ) -> Iterator[tuple[DataExtent, Any]]:
        """Yield ``(extent, job(payload, where, extent, is_last))`` per data block, in file order,
        leaving out SKIP answers; no cache (a scan would only evict what lookups need).

        Runs of nearby blocks are read ahead on the read threads; blocks decompress on the decode
        threads with a bounded number in flight.
        """
        from concurrent.futures import CancelledError  # here: lookups never load the pools' module

        if self.parallelism == 0 or pipeline.in_worker():
            cpu = io = None  # a scan started inside a job must not wait on the pools it runs in
        else:
            try:
                cpu, io = self._pools.get()
            except CancelledError:
                return
        reads = pipeline.ordered(pipeline.runs(extents), self._read_run, io, 1)
        blocks = (
            (buf, run[0].offset, ext, final and i == len(run) - 1)
            for (run, final), buf in reads
            for i, ext in enumerate(run)
        )

        def decode(item: tuple) -> Any:
            buf, base, ext, last = item
            lo = ext.offset - base
            payload = self.payload(memoryview(buf)[lo : lo + ext.length], ext.offset, 0, "a data block")
            return job(payload, f"{self.name}: block at offset {ext.offset}", ext, last)

        try:
            for item, result in pipeline.ordered(blocks, decode, cpu, 2 * self.parallelism + 2):
                if self.closed:
                    return
                if result is not SKIP:
                    yield item[2], result
        except (CancelledError, RuntimeError):
            if not self.closed:  # close() cancels our futures: end quietly, as the reference does
                raise

    def _read_run(self, item: tuple[list[DataExtent], bool]) -> bytes:
        run = item[0]
        start = run[0].offset
        return self.read(start, run[-1].offset + run[-1].length - start, blocks=len(run))
