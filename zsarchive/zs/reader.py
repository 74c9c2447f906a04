"""``ZS``: a ZS file opened for reading, with the reference implementation's Python API.

Open = one ``read_head_tail`` (header + the root index, which writers put at the end). Point
lookups descend cached index blocks and bisect cached, parsed data blocks; range scans read runs
of adjacent data blocks in single transport reads and decompress them in parallel threads.
Bytes come only through the Transport API, so local files, file objects and URLs behave alike.
"""

from __future__ import annotations

import os
import threading
from bisect import bisect_left
from collections import deque
from concurrent.futures import CancelledError, Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from itertools import chain, islice
from typing import Any, Callable, Iterable, Iterator, NamedTuple

from zsarchive.zs.cache import LRUCache
from zsarchive.errors import ZSCorrupt, ZSError
from zsarchive.zs.format import header as zsheader
from zsarchive.zs.format import uleb128
from zsarchive.zs.format.block import MAX_INDEX_LEVEL, decode_index, decode_records, split_block
from zsarchive.zs.format.codecs import decoder_for, decompress_checked
from zsarchive.zs.format.framing import LENGTH_PREFIXES, frame, record_heads, terminate
from zsarchive.io import Transport, open_transport

HEAD_GUESS = 64 * 1024
"""Bytes fetched from the start at open: more than almost any header, so one request suffices."""
TAIL_GUESS = 64 * 1024
"""Bytes fetched from the end at open: holds the root index of files up to many GB."""
RUN_BYTES = 4 * 2**20
"""Largest single transport read of adjacent data blocks during a scan."""
FIRST_RUN_BYTES = 256 * 1024
"""The first read of a scan is small (quick first record); later runs double up to RUN_BYTES."""
GAP_BYTES = 64 * 1024
"""Index blocks between data blocks up to this size are read through rather than split a run."""
INDEX_BATCH = 64
"""Most index blocks of one level a scan fetches in one batch (batches double from 1)."""
INDEX_BATCH_BYTES = 2**20
"""A batch of index blocks also ends once it holds this many bytes."""
SMALL_SPAN_BLOCKS = 2
"""Searches touching at most this many data blocks go through the data block cache."""
MIN_BLOCK_LENGTH = 10  # uleb128 length (1) + level (1) + CRC (8)
DEFAULT_DATA_BLOCK_CACHE = 128 * 2**20

_SKIP = object()  # a job's "this block holds nothing in range"
_worker = threading.local()  # marks reader pool threads: a scan started on one runs serially (no deadlock)


@dataclass
class ReaderStats:
    """Counters of one reader (thread-safe). Tests and benchmarks assert on them."""

    block_reads: int = 0  # blocks fetched from the transport (including the root)
    transport_reads: int = 0  # calls of transport.read / read_head_tail
    bytes_read: int = 0
    decompressions: int = 0
    index_cache_hits: int = 0
    data_cache_hits: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def add(self, **counts: int) -> None:
        """Add to several counters at once."""
        with self._lock:
            for name, value in counts.items():
                setattr(self, name, getattr(self, name) + value)

    def snapshot(self) -> dict[str, int]:
        """The counters as a plain dict (subtract two snapshots to measure one operation)."""
        with self._lock:
            return {k: v for k, v in vars(self).items() if not k.startswith("_")}


class _IndexBlock(NamedTuple):
    level: int
    keys: list[bytes]
    offsets: list[int]
    lengths: list[int]


class _Extent(NamedTuple):
    offset: int
    length: int
    key: bytes  # the index key of this data block: <= every record in it


class _DataBlock:
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
            return self.payload[start + 1:end]
        _, start = uleb128.decode(self.payload, start)
        return self.payload[start:end]

    def bisect(self, key: bytes) -> int:
        """Index of the first record >= key."""
        return bisect_left(range(self.count), key, key=self.record)

    def weight(self) -> int:
        """Approximate memory held, for the byte-bounded cache."""
        return len(self.payload) + 8 * len(self.heads) + 200


class ZS:
    """A ZS file opened for reading: ``ZS(path)``, ``ZS(url=...)``, a binary file object or a Transport.

    Drop-in for the reference's ``zs.ZS``; ``parallelism`` counts decompression threads (0: all
    work in the calling thread); ``data_block_cache`` bounds the bytes of parsed data blocks kept.
    """

    def __init__(self, path=None, url=None, parallelism: int | str = "guess",
                 index_block_cache: int = 32, data_block_cache: int = DEFAULT_DATA_BLOCK_CACHE) -> None:
        self._closed = True  # until fully open, close() has nothing to do
        self._pool_lock = threading.Lock()
        if (path is None) == (url is None):
            raise ZSError("give exactly one of path= or url=")
        if parallelism == "guess":
            parallelism = min(len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
                              else os.cpu_count() or 1, 8)
        if not isinstance(parallelism, int) or parallelism < 0:
            raise ZSError(f"parallelism must be an integer >= 0 or 'guess', not {parallelism!r}")
        if index_block_cache < 0 or data_block_cache < 0:
            raise ZSError("cache sizes must be >= 0")
        source = path if path is not None else url
        self._owns_transport = not isinstance(source, Transport)
        try:
            self._transport = open_transport(source)
        except TypeError as exc:
            raise ZSError(str(exc)) from None
        self.name = self._transport.name
        self.stats = ReaderStats()
        self._parallelism = parallelism
        self._index_cache = LRUCache(index_block_cache)
        self._data_cache = LRUCache(data_block_cache)
        self._cpu_pool: ThreadPoolExecutor | None = None
        self._io_pool: ThreadPoolExecutor | None = None
        try:
            self._open()
        except BaseException:
            if self._owns_transport:
                self._transport.close()
            raise
        self._closed = False

    # ---- opening -------------------------------------------------------------------------------

    def _open(self) -> None:
        t = self._transport
        name = self.name
        head, tail = t.read_head_tail(HEAD_GUESS, TAIL_GUESS)
        self.stats.add(transport_reads=1, bytes_read=len(head) + len(tail))
        size = t.size
        header_length = zsheader.header_length_of(head[:zsheader.PREFIX_LENGTH], name)
        blocks_at = zsheader.blocks_start(header_length)
        if blocks_at > size:
            raise ZSCorrupt(f"{name}: offset 8: header length {header_length} runs past the end of the "
                            f"{size}-byte file")
        if blocks_at > len(head):
            head = self._read(0, blocks_at)
        hdr = zsheader.decode(head[zsheader.PREFIX_LENGTH:zsheader.PREFIX_LENGTH + header_length],
                              head[zsheader.PREFIX_LENGTH + header_length:blocks_at], name)
        if hdr.total_file_length != size:
            raise ZSCorrupt(f"{name}: offset 32: header says the file is {hdr.total_file_length} bytes, "
                            f"but it is {size} bytes (truncated or appended to)")
        try:
            self._decompress = decoder_for(hdr.codec)
        except ZSError:
            raise ZSCorrupt(f"{name}: offset {zsheader.CODEC_OFFSET}: unknown codec {hdr.codec!r} "
                            "(known: none, deflate, lzma2;dsize=2^20, zstd)") from None
        root_offset, root_length = hdr.root_index_offset, hdr.root_index_length
        if root_offset < blocks_at or root_length < MIN_BLOCK_LENGTH or root_offset + root_length > size:
            raise ZSCorrupt(f"{name}: offset 16: root index block at {root_offset} of length {root_length} "
                            f"does not lie inside the blocks area [{blocks_at}, {size})")
        tail_start = size - len(tail)
        if root_offset >= tail_start:
            buf = tail[root_offset - tail_start:root_offset - tail_start + root_length]
            self.stats.add(block_reads=1)
        else:
            buf = self._read(root_offset, root_length, blocks=1)
        self._blocks_start = blocks_at
        self._root = self._parse_index(buf, root_offset, None)
        self.metadata: dict = hdr.metadata
        self.codec: str = hdr.codec
        self.data_sha256: bytes = hdr.data_sha256
        self.root_index_offset: int = root_offset
        self.root_index_length: int = root_length
        self.total_file_length: int = size
        self.header_extensions: bytes = hdr.extensions

    @property
    def root_index_level(self) -> int:
        """Level of the root index block: a lookup reads this many blocks below the root."""
        return self._root.level

    @property
    def transport(self) -> Transport:
        """Where the bytes come from (its own counters, e.g. HTTP requests, live there)."""
        return self._transport

    # ---- blocks --------------------------------------------------------------------------------

    def _read(self, offset: int, length: int, blocks: int = 0) -> bytes:
        try:
            data = self._transport.read(offset, length)
        except ValueError:
            if self._closed:  # another thread closed us mid-read (a closed mmap raises ValueError)
                raise ZSError(f"{self.name}: the ZS file was closed during a read") from None
            raise
        self.stats.add(transport_reads=1, bytes_read=length, block_reads=blocks)
        return data

    def _payload(self, buf, offset: int, level: int, kind: str) -> bytes:
        """Check one framed block (CRC, expected level) and return its decompressed payload."""
        where = f"{self.name}: block at offset {offset}"
        found, zpayload = split_block(buf, where)
        if found != level:
            raise ZSCorrupt(f"{where}: expected {kind} (level {level}), found a block of level {found}")
        payload = decompress_checked(self._decompress, zpayload, where)
        self.stats.add(decompressions=1)
        return payload

    def _parse_index(self, buf, offset: int, level: int | None) -> _IndexBlock:
        where = f"{self.name}: block at offset {offset}"
        if level is None:  # the root: any index level
            found = split_block(buf, where)[0]
            if not 1 <= found <= MAX_INDEX_LEVEL:
                raise ZSCorrupt(f"{where}: the root must be an index block (level 1-{MAX_INDEX_LEVEL}), "
                                f"found level {found}")
            level = found
        payload = self._payload(buf, offset, level, "an index block")
        entries = decode_index(payload, where)
        keys = [e.key for e in entries]
        offsets = [e.offset for e in entries]
        lengths = [e.length for e in entries]
        for i in range(1, len(keys)):
            if keys[i - 1] > keys[i]:
                raise ZSCorrupt(f"{where}: index keys out of order at entry {i}: "
                                f"{keys[i - 1][:40]!r} > {keys[i][:40]!r}")
        lo, hi = self._blocks_start, self._transport.size
        for i, (o, n) in enumerate(zip(offsets, lengths)):
            if o < lo or n < MIN_BLOCK_LENGTH or o + n > hi:
                raise ZSCorrupt(f"{where}: index entry {i} points at offset {o} length {n}, outside the "
                                f"blocks area [{lo}, {hi})")
        return _IndexBlock(level, keys, offsets, lengths)

    def _data_block(self, extent: _Extent) -> _DataBlock:
        key = (extent.offset, extent.length)
        block = self._data_cache.get(key)
        if block is not None:
            self.stats.add(data_cache_hits=1)
            return block
        payload = self._payload(self._read(extent.offset, extent.length, blocks=1), extent.offset, 0,
                                "a data block")
        block = _DataBlock(payload, f"{self.name}: block at offset {extent.offset}")
        self._data_cache.put(key, block, block.weight())
        return block

    # ---- navigation ----------------------------------------------------------------------------

    def _extents(self, start: bytes, stop: bytes | None) -> Iterator[_Extent]:
        """Data blocks that may hold records in [start, stop), in file order.

        Descends to the first candidate (the block before the first key >= start: keys are lower
        bounds), then walks the index in order until a key >= stop. Each level's next index blocks
        are fetched in batches that grow as the walk goes on, so a long scan costs few requests
        even where index blocks sit between the data blocks, and a lookup reads no block ahead.
        """
        path: list[tuple[_IndexBlock, int]] = []
        block = self._root
        while True:
            i = max(bisect_left(block.keys, start) - 1, 0)
            path.append((block, i))
            if block.level == 1:
                break
            block = self._index_blocks([(block.offsets[i], block.lengths[i])], block.level - 1)[0]
        entries = _entries(*path[0], stop)
        for block, i in path[1:]:
            if next(entries, None) is None:  # the descended child's key is >= stop: nothing in range
                return
            entries = chain(_entries(block, i, stop), self._children(entries, block.level, stop))
        for key, offset, length in entries:
            yield _Extent(offset, length, key)

    def _children(self, parents: Iterator[tuple[bytes, int, int]], level: int,
                  stop: bytes | None) -> Iterator[tuple[bytes, int, int]]:
        """Entries of the level-``level`` index blocks that ``parents`` point at, in order.

        Batches start at one block and double up to INDEX_BATCH blocks or INDEX_BATCH_BYTES; each
        batch is one ``read_ranges`` call, which remote transports coalesce into few requests.
        """
        size = 1
        while True:
            batch: list[tuple[bytes, int, int]] = []
            total = 0
            for entry in parents:
                batch.append(entry)
                total += entry[2]
                if len(batch) >= size or total >= INDEX_BATCH_BYTES:
                    break
            if not batch:
                return
            for block in self._index_blocks([(offset, length) for _, offset, length in batch], level):
                yield from _entries(block, 0, stop)
            size = min(2 * size, INDEX_BATCH)

    def _index_blocks(self, extents: list[tuple[int, int]], level: int) -> list[_IndexBlock]:
        """The index blocks at ``extents`` (all of ``level``): cached ones, the rest in one batch."""
        blocks: list[_IndexBlock | None] = [self._index_cache.get((o, n, level)) for o, n in extents]
        hits = sum(block is not None for block in blocks)
        if hits:
            self.stats.add(index_cache_hits=hits)
        missing = [i for i, block in enumerate(blocks) if block is None]
        if missing:
            wanted = [extents[i] for i in missing]
            try:
                bufs = self._transport.read_ranges(wanted)
            except ValueError:
                if self._closed:  # closed by another thread mid-read, as in _read
                    raise ZSError(f"{self.name}: the ZS file was closed during a read") from None
                raise
            self.stats.add(transport_reads=1, bytes_read=sum(n for _, n in wanted), block_reads=len(wanted))
            for i, buf in zip(missing, bufs):
                offset, length = extents[i]
                block = self._parse_index(buf, offset, level)
                self._index_cache.put((offset, length, level), block)
                blocks[i] = block
        return blocks  # type: ignore[return-value]

    @staticmethod
    def _runs(extents: Iterable[_Extent]) -> Iterator[tuple[list[_Extent], bool]]:
        """Group extents into runs of nearby blocks (one transport read each); flag the final run."""
        run: list[_Extent] = []
        run_start = 0
        limit = FIRST_RUN_BYTES
        for ext in extents:
            if run:
                end = run[-1].offset + run[-1].length
                if not end <= ext.offset <= end + GAP_BYTES or ext.offset + ext.length - run_start > limit:
                    yield run, False
                    run, limit = [], min(2 * limit, RUN_BYTES)
            if not run:
                run_start = ext.offset
            run.append(ext)
        if run:
            yield run, True

    # ---- the scan pipeline ---------------------------------------------------------------------

    def _pools(self) -> tuple[ThreadPoolExecutor, ThreadPoolExecutor]:
        with self._pool_lock:
            if self._closed:
                raise CancelledError
            if self._cpu_pool is None:
                def mark() -> None:
                    _worker.active = True

                self._cpu_pool = ThreadPoolExecutor(self._parallelism, "zs-decode", initializer=mark)
                self._io_pool = ThreadPoolExecutor(2, "zs-read", initializer=mark)
            return self._cpu_pool, self._io_pool

    def _read_run(self, run: list[_Extent]) -> bytes:
        start = run[0].offset
        return self._read(start, run[-1].offset + run[-1].length - start, blocks=len(run))

    def _run_job(self, buf, base: int, ext: _Extent, last: bool, job: Callable) -> Any:
        if isinstance(buf, Future):
            buf = buf.result()
        lo = ext.offset - base
        payload = self._payload(memoryview(buf)[lo:lo + ext.length], ext.offset, 0, "a data block")
        return job(payload, f"{self.name}: block at offset {ext.offset}", ext, last)

    def _pipeline(self, extents: Iterable[_Extent], job: Callable) -> Iterator[tuple[_Extent, Any]]:
        """Yield ``(extent, job(payload, where, extent, is_last))`` per data block, in file order.

        Runs are read one or two ahead on an I/O thread; blocks decompress on the decode threads
        with a bounded number in flight, so memory stays flat however long the scan.
        """
        runs = self._runs(extents)
        if self._parallelism == 0 or getattr(_worker, "active", False):
            for run, final in runs:
                if self._closed:
                    return
                buf = self._read_run(run)
                for i, ext in enumerate(run):
                    result = self._run_job(buf, run[0].offset, ext, final and i == len(run) - 1, job)
                    if result is not _SKIP:
                        yield ext, result
            return
        try:
            cpu, io = self._pools()
        except CancelledError:
            return
        max_in_flight = 2 * self._parallelism + 2
        pending: deque[tuple[_Extent, Future]] = deque()

        def read_ahead():
            item = next(runs, None)
            return None if item is None else (*item, io.submit(self._read_run, item[0]))

        try:
            current = read_ahead()
            while current is not None:
                run, final, future = current
                current = read_ahead()
                for i, ext in enumerate(run):
                    pending.append((ext, cpu.submit(self._run_job, future, run[0].offset, ext,
                                                    final and i == len(run) - 1, job)))
                    while len(pending) > max_in_flight:
                        ext0, fut = pending.popleft()
                        result = fut.result()
                        if result is not _SKIP:
                            yield ext0, result
            while pending:
                ext0, fut = pending.popleft()
                result = fut.result()
                if result is not _SKIP:
                    yield ext0, result
        except (CancelledError, RuntimeError):
            if not self._closed:  # close() cancels our futures: end quietly, as the reference does
                raise
        finally:
            for _, fut in pending:
                fut.cancel()

    # ---- queries -------------------------------------------------------------------------------

    def _span(self, start, stop, prefix) -> tuple[bytes, bytes | None]:
        """Fold start/stop/prefix into one half-open byte range [start, stop) (stop None: no end)."""
        self._check_open()
        start, stop, prefix = (_as_bytes(v, n) for v, n in ((start, "start"), (stop, "stop"),
                                                             (prefix, "prefix")))
        start = start or b""
        if prefix:
            start = max(start, prefix)
            # Smallest string greater than every string with this prefix (none if it is all 0xff).
            stem = prefix.rstrip(b"\xff")
            prefix_stop = stem[:-1] + bytes((stem[-1] + 1,)) if stem else None
            if prefix_stop is not None:
                stop = prefix_stop if stop is None else min(stop, prefix_stop)
        return start, stop

    def search(self, start: bytes | None = None, stop: bytes | None = None,
               prefix: bytes | None = None) -> Iterator[bytes]:
        """Iterate, in sorted order, over records with ``start <= r < stop`` that start with ``prefix``."""
        start, stop = self._span(start, stop, prefix)
        return self._search(start, stop)

    def _search(self, start: bytes, stop: bytes | None) -> Iterator[bytes]:
        if stop is not None and stop <= start:
            return
        extents = self._extents(start, stop)
        first = list(islice(extents, SMALL_SPAN_BLOCKS + 1))
        if len(first) <= SMALL_SPAN_BLOCKS:
            # A lookup-sized query: cached, parsed blocks make a repeat a pure bisect.
            for ext in first:
                if self._closed:
                    return
                block = self._data_block(ext)
                lo = block.bisect(start) if ext.key < start else 0
                hi = block.count if stop is None else block.bisect(stop)
                record = block.record
                for i in range(lo, hi):
                    yield record(i)
            return

        def job(payload: bytes, where: str, ext: _Extent, last: bool):
            records = _trim(decode_records(payload, where), start, stop, ext.key < start, last)
            return records if records else _SKIP

        for _, records in self._pipeline(chain(first, extents), job):
            yield from records

    def __iter__(self) -> Iterator[bytes]:
        """Every record, in order (same as ``search()``)."""
        return self.search()

    def block_map(self, fn: Callable, start: bytes | None = None, stop: bytes | None = None,
                  prefix: bytes | None = None, args: tuple = (), kwargs: dict | None = None) -> Iterator:
        """Yield ``fn(records, *args, **kwargs)`` for each block's worth of matching records, in order.

        ``fn`` runs on the decode threads (in parallel), or in the caller's thread with parallelism=0.
        """
        start, stop = self._span(start, stop, prefix)
        kwargs = kwargs or {}

        def job(payload: bytes, where: str, ext: _Extent, last: bool):
            records = _trim(decode_records(payload, where), start, stop, ext.key < start, last)
            return fn(records, *args, **kwargs) if records else _SKIP

        if stop is not None and stop <= start:
            return iter(())
        return (result for _, result in self._pipeline(self._extents(start, stop), job))

    def block_exec(self, fn: Callable, start: bytes | None = None, stop: bytes | None = None,
                   prefix: bytes | None = None, args: tuple = (), kwargs: dict | None = None) -> None:
        """Like ``block_map`` but discards the results."""
        for _ in self.block_map(fn, start, stop, prefix, args, kwargs):
            pass

    def dump(self, out_file, start: bytes | None = None, stop: bytes | None = None,
             prefix: bytes | None = None, terminator: bytes = b"\n", length_prefixed: str | None = None,
             progress: Callable[[int], None] | None = None) -> None:
        """Write matching records to a binary file, each followed by ``terminator`` or prefixed by
        its length (``length_prefixed`` = "uleb128" or "u64le"). ``progress(n)`` gets file bytes done.
        """
        start, stop = self._span(start, stop, prefix)
        if length_prefixed is not None and length_prefixed not in LENGTH_PREFIXES:
            raise ZSError(f"length_prefixed must be one of {', '.join(LENGTH_PREFIXES)} or None, "
                          f"not {length_prefixed!r}")
        terminator = _as_bytes(terminator, "terminator")
        if stop is not None and stop <= start:
            return

        def job(payload: bytes, where: str, ext: _Extent, last: bool):
            trim_start = ext.key < start
            trim_stop = last and stop is not None
            if not (trim_start or trim_stop):
                if length_prefixed is None:
                    return terminate(payload, terminator, where)
                if length_prefixed == "uleb128":
                    record_heads(payload, where)  # the payload is the output: check its framing
                    return payload
            records = _trim(decode_records(payload, where), start, stop, trim_start, trim_stop)
            return frame(records, terminator, length_prefixed) if records else _SKIP

        write = out_file.write
        for ext, chunk in self._pipeline(self._extents(start, stop), job):
            write(chunk)
            if progress is not None:
                progress(ext.length)

    def validate(self):
        """Check every invariant of the ZS spec over the whole file; raise ZSCorrupt on the first failure."""
        self._check_open()
        from zsarchive.zs.validate import validate

        return validate(self._transport, parallelism=max(self._parallelism, 1))

    # ---- lifetime ------------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise ZSError(f"{getattr(self, 'name', 'ZS')}: operation on a closed ZS file")

    def close(self) -> None:
        """Release threads, caches and the file; running iterators stop (as in the reference)."""
        with self._pool_lock:
            if self._closed:
                return
            self._closed = True
            pools = [p for p in (self._cpu_pool, self._io_pool) if p is not None]
        in_worker = getattr(_worker, "active", False)
        for pool in pools:
            pool.shutdown(wait=not in_worker, cancel_futures=True)
        self._data_cache.clear()
        self._index_cache.clear()
        if self._owns_transport:
            self._transport.close()

    def __enter__(self) -> ZS:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<zsarchive.ZS {self.name!r}{' (closed)' if self._closed else ''}>"


def _as_bytes(value, what: str) -> bytes | None:
    if value is None or isinstance(value, bytes):
        return value
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    raise ZSError(f"{what} must be bytes, not {type(value).__name__}")


def _entries(block: _IndexBlock, i: int, stop: bytes | None) -> Iterator[tuple[bytes, int, int]]:
    """Entries ``i``, ``i + 1``, ... of an index block as (key, offset, length), up to a key >= stop."""
    for j in range(i, len(block.keys)):
        key = block.keys[j]
        if stop is not None and key >= stop:
            return
        yield key, block.offsets[j], block.lengths[j]


def _trim(records: list[bytes], start: bytes, stop: bytes | None, trim_start: bool, trim_stop: bool) -> list[bytes]:
    """Drop records below ``start`` (first block only) and at or above ``stop`` (last block only)."""
    if trim_start and records[0] < start:
        records = records[bisect_left(records, start):]
    if trim_stop and stop is not None and records and records[-1] >= stop:
        records = records[:bisect_left(records, stop)]
    return records
