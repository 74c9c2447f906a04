"""``ZS``: a ZS file opened for reading, with the reference implementation's Python API.

Open = one ``read_head_tail`` (header + the root index, which writers put at the end). Point
lookups descend cached index blocks and bisect cached, parsed data blocks; range scans stream
data blocks through the shared block-read pipeline (zsarchive.zs.blocks, zsarchive.zs.pipeline).
Bytes come only through the Transport API, so local files, file objects and URLs behave alike.
"""

from __future__ import annotations

from bisect import bisect_left
from itertools import chain, islice
from typing import Callable, Iterator

from zsarchive.errors import ZSCorrupt, ZSError
from zsarchive.io import Transport, open_transport
from zsarchive.zs import blocks as zsblocks
from zsarchive.zs.blocks import SKIP, BlockSource, DataExtent, IndexBlock, ReaderStats
from zsarchive.zs.format import uleb128
from zsarchive.zs.format.block import decode_records
from zsarchive.zs.format.framing import LENGTH_PREFIXES, frame, record_heads, record_spans, terminate
from zsarchive.zs.pipeline import resolve_parallelism

INDEX_BATCH = 64
"""Most index blocks of one level a scan fetches in one batch (batches double from 1)."""
INDEX_BATCH_BYTES = 2**20
"""A batch of index blocks also ends once it holds this many bytes."""
SMALL_SPAN_BLOCKS = 2
"""Searches touching at most this many data blocks go through the data block cache."""
DEFAULT_DATA_BLOCK_CACHE = 128 * 2**20


class ZS:
    """A ZS file opened for reading: ``ZS(path)``, ``ZS(url=...)``, a binary file object or a Transport.

    Drop-in for the reference's ``zs.ZS``; ``parallelism`` counts decompression threads (0: all
    work in the calling thread); ``data_block_cache`` bounds the bytes of parsed data blocks kept.
    """

    def __init__(
        self,
        path=None,
        url=None,
        parallelism: int | str = "guess",
        index_block_cache: int = 32,
        data_block_cache: int = DEFAULT_DATA_BLOCK_CACHE,
    ) -> None:
        self._closed = True  # until fully open, close() has nothing to do
        if (path is None) == (url is None):
            raise ZSError("give exactly one of path= or url=")
        parallelism = resolve_parallelism(parallelism, minimum=0)
        if index_block_cache < 0 or data_block_cache < 0:
            raise ZSError("cache sizes must be >= 0")
        source = path if path is not None else url
        self._owns_transport = not isinstance(source, Transport)
        try:
            self._transport = open_transport(source)
        except TypeError as exc:
            raise ZSError(str(exc)) from None
        self.name = self._transport.name
        try:
            self._open(parallelism, index_block_cache, data_block_cache)
        except BaseException:
            if self._owns_transport:
                self._transport.close()
            raise
        self._closed = False

    def _open(self, parallelism: int, index_block_cache: int, data_block_cache: int) -> None:
        """Header and root index: one transport read for almost every file."""
        t = self._transport
        self.stats = ReaderStats()
        hdr, blocks_start, tail = zsblocks.read_header(t, zsblocks.TAIL_GUESS, self.stats)
        self._blocks = BlockSource(
            t, hdr.codec, blocks_start, parallelism, index_block_cache, data_block_cache, self.stats
        )
        root_offset, root_length = hdr.root_index_offset, hdr.root_index_length
        tail_start = t.size - len(tail)
        if root_offset >= tail_start:
            buf = tail[root_offset - tail_start : root_offset - tail_start + root_length]
            self.stats.add(block_reads=1)
        else:
            buf = self._blocks.read(root_offset, root_length, blocks=1)
        self._root = self._blocks.parse_index(buf, root_offset, None)
        self.metadata: dict = hdr.metadata
        self.codec: str = hdr.codec
        self.data_sha256: bytes = hdr.data_sha256
        self.root_index_offset: int = root_offset
        self.root_index_length: int = root_length
        self.total_file_length: int = t.size
        self.header_extensions: bytes = hdr.extensions

    @property
    def root_index_level(self) -> int:
        """Level of the root index block: a lookup reads this many blocks below the root."""
        return self._root.level

    @property
    def transport(self) -> Transport:
        """Where the bytes come from (its own counters, e.g. HTTP requests, live there)."""
        return self._transport

    # ---- navigation ----------------------------------------------------------------------------

    def _extents(self, start: bytes, stop: bytes | None) -> Iterator[DataExtent]:
        """Data blocks that may hold records in [start, stop), in file order.

        Descends to the first candidate (the block before the first key >= start: keys are lower
        bounds), then walks the index in order until a key >= stop. Each level's next index blocks
        are fetched in batches that grow as the walk goes on, so a long scan costs few requests
        even where index blocks sit between the data blocks, and a lookup reads no block ahead.

        Index entries must form a tree over data blocks in file order: an index block reached twice,
        or a data block at or before the previous one, is ZSCorrupt. This bounds every scan by the
        file's size (a few hundred bytes of index shared as a DAG could otherwise name 10^12 blocks).
        """
        seen = {self.root_index_offset}  # index blocks reached by this walk
        path: list[tuple[IndexBlock, int]] = []
        block = self._root
        while True:
            i = max(bisect_left(block.keys, start) - 1, 0)
            path.append((block, i))
            if block.level == 1:
                break
            self._visit(seen, block.offsets[i])
            block = self._blocks.index_blocks([(block.offsets[i], block.lengths[i])], block.level - 1)[0]
        entries = _entries(*path[0], stop)
        for block, i in path[1:]:
            if next(entries, None) is None:  # the descended child's key is >= stop: nothing in range
                return
            entries = chain(_entries(block, i, stop), self._children(entries, block.level, stop, seen))
        previous = -1
        for key, offset, length in entries:
            if offset <= previous:
                raise ZSCorrupt(
                    f"{self.name}: the index points at the data block at offset {offset} after "
                    f"the one at offset {previous} (data blocks must follow in file order, "
                    "each once)"
                )
            previous = offset
            yield DataExtent(offset, length, key)

    def _visit(self, seen: set[int], offset: int) -> None:
        """Mark the index block at ``offset`` reached; ZSCorrupt if it was reached before."""
        if offset in seen:
            raise ZSCorrupt(
                f"{self.name}: the index block at offset {offset} is reached twice (index blocks must form a tree)"
            )
        seen.add(offset)

    def block_bytes(self, start: bytes, stop: bytes | None = None) -> int:
        """Bytes of the data blocks (framing included) whose index key lies in [start, stop): what the
        file spends on the records from there, read from the index alone (no data block is read)."""
        self._check_open()
        return sum(ext.length for ext in self._extents(start, stop) if ext.key >= start)

    def _children(
        self, parents: Iterator[tuple[bytes, int, int]], level: int, stop: bytes | None, seen: set[int]
    ) -> Iterator[tuple[bytes, int, int]]:
        """Entries of the level-``level`` index blocks that ``parents`` point at, in order (each
        block once: ``seen`` holds the offsets of those already reached).

        Batches start at one block and double up to INDEX_BATCH blocks or INDEX_BATCH_BYTES; each
        batch is one ``read_ranges`` call, which remote transports coalesce into few requests.
        """
        size = 1
        while True:
            batch: list[tuple[bytes, int, int]] = []
            total = 0
            for entry in parents:
                self._visit(seen, entry[1])
                batch.append(entry)
                total += entry[2]
                if len(batch) >= size or total >= INDEX_BATCH_BYTES:
                    break
            if not batch:
                return
            for block in self._blocks.index_blocks([(offset, length) for _, offset, length in batch], level):
                yield from _entries(block, 0, stop)
            size = min(2 * size, INDEX_BATCH)

    # ---- queries -------------------------------------------------------------------------------

    def _span(self, start, stop, prefix) -> tuple[bytes, bytes | None]:
        """Fold start/stop/prefix into one half-open byte range [start, stop) (stop None: no end)."""
        self._check_open()
        start, stop, prefix = (_as_bytes(v, n) for v, n in ((start, "start"), (stop, "stop"), (prefix, "prefix")))
        start = start or b""
        if prefix:
            start = max(start, prefix)
            # Smallest string greater than every string with this prefix (none if it is all 0xff).
            stem = prefix.rstrip(b"\xff")
            prefix_stop = stem[:-1] + bytes((stem[-1] + 1,)) if stem else None
            if prefix_stop is not None:
                stop = prefix_stop if stop is None else min(stop, prefix_stop)
        return start, stop

    def search(
        self, start: bytes | None = None, stop: bytes | None = None, prefix: bytes | None = None
    ) -> Iterator[bytes]:
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
                block = self._blocks.data_block(ext)
                lo = block.bisect(start) if ext.key < start else 0
                hi = block.count if stop is None else block.bisect(stop)
                record = block.record
                for i in range(lo, hi):
                    yield record(i)
            return

        def job(payload: bytes, where: str, ext: DataExtent, last: bool):
            records = _trim(decode_records(payload, where), start, stop, ext.key < start, last)
            return records if records else SKIP

        for _, records in self._blocks.scan(chain(first, extents), job):
            yield from records

    def floor_span(self, before: bytes, stop: bytes, zero_copy: bool = False) -> list:
        """The last record < ``before`` (if the block a lookup of ``before`` lands on holds one) and
        every record in [before, stop), their blocks read side by side in one transport read where
        they lie side by side. ``zero_copy``: memoryviews into the map of an uncompressed local file."""
        self._check_open()
        if stop <= before:
            return []
        extents = list(self._extents(before, stop))
        if not extents:
            return []
        found: list = []
        for ext, payload in zip(extents, self._blocks.span_payloads(extents, zero_copy)):
            where = f"{self.name}: block at offset {ext.offset}"
            records = _split_view(payload, where) if isinstance(payload, memoryview) else decode_records(payload, where)
            found.extend(records)
        # memoryviews do not compare: compare a prefix as long as the bound, which decides alike
        n, m = len(before), len(stop)
        lo = bisect_left(found, before, key=lambda r: bytes(r[:n]))
        hi = bisect_left(found, stop, key=lambda r: bytes(r[:m]))
        return found[max(lo - 1, 0) : hi]

    def __iter__(self) -> Iterator[bytes]:
        """Every record, in order (same as ``search()``)."""
        return self.search()

    def block_map(
        self,
        fn: Callable,
        start: bytes | None = None,
        stop: bytes | None = None,
        prefix: bytes | None = None,
        args: tuple = (),
        kwargs: dict | None = None,
    ) -> Iterator:
        """Yield ``fn(records, *args, **kwargs)`` for each block's worth of matching records, in order.

        ``fn`` runs on the decode threads (in parallel), or in the caller's thread with parallelism=0.
        """
        start, stop = self._span(start, stop, prefix)
        kwargs = kwargs or {}

        def job(payload: bytes, where: str, ext: DataExtent, last: bool):
            records = _trim(decode_records(payload, where), start, stop, ext.key < start, last)
            return fn(records, *args, **kwargs) if records else SKIP

        if stop is not None and stop <= start:
            return iter(())
        return (result for _, result in self._blocks.scan(self._extents(start, stop), job))

    def block_spans(
        self, start: bytes | None = None, stop: bytes | None = None, prefix: bytes | None = None
    ) -> Iterator[tuple[bytes, memoryview, memoryview]]:
        """Each block's worth of matching records, in order, as ``(payload, starts, ends)``: record ``i`` is
        ``payload[starts[i]:ends[i]]`` (int64 sequences). No object per record: for scans of millions."""
        start, stop = self._span(start, stop, prefix)

        def job(payload: bytes, where: str, ext: DataExtent, last: bool):
            starts, ends = record_spans(payload, where)
            rows = range(len(starts))

            def record(i: int) -> bytes:  # made only as a bisection asks for it
                return payload[starts[i] : ends[i]]

            lo = bisect_left(rows, start, key=record) if ext.key < start else 0
            hi = bisect_left(rows, stop, lo, key=record) if last and stop is not None else len(starts)
            return (payload, starts[lo:hi], ends[lo:hi]) if hi > lo else SKIP

        if stop is not None and stop <= start:
            return iter(())
        return (result for _, result in self._blocks.scan(self._extents(start, stop), job))

    def block_exec(
        self,
        fn: Callable,
        start: bytes | None = None,
        stop: bytes | None = None,
        prefix: bytes | None = None,
        args: tuple = (),
        kwargs: dict | None = None,
    ) -> None:
        """Like ``block_map`` but discards the results."""
        for _ in self.block_map(fn, start, stop, prefix, args, kwargs):
            pass

    def dump(
        self,
        out_file,
        start: bytes | None = None,
        stop: bytes | None = None,
        prefix: bytes | None = None,
        terminator: bytes = b"\n",
        length_prefixed: str | None = None,
        progress: Callable[[int], None] | None = None,
    ) -> None:
        """Write matching records to a binary file, each followed by ``terminator`` or prefixed by
        its length (``length_prefixed`` = "uleb128" or "u64le"). ``progress(n)`` gets file bytes done.
        """
        start, stop = self._span(start, stop, prefix)
        if length_prefixed is not None and length_prefixed not in LENGTH_PREFIXES:
            raise ZSError(
                f"length_prefixed must be one of {', '.join(LENGTH_PREFIXES)} or None, not {length_prefixed!r}"
            )
        terminator = _bytes(terminator, "terminator")
        if stop is not None and stop <= start:
            return

        def job(payload: bytes, where: str, ext: DataExtent, last: bool):
            trim_start = ext.key < start
            trim_stop = last and stop is not None
            if not (trim_start or trim_stop):
                if length_prefixed is None:
                    return terminate(payload, terminator, where)
                if length_prefixed == "uleb128":
                    record_heads(payload, where)  # the payload is the output: check its framing
                    return payload
            records = _trim(decode_records(payload, where), start, stop, trim_start, trim_stop)
            return frame(records, terminator, length_prefixed) if records else SKIP

        write = out_file.write
        for ext, chunk in self._blocks.scan(self._extents(start, stop), job):
            write(chunk)
            if progress is not None:
                progress(ext.length)

    def validate(self):
        """Check every invariant of the ZS spec over the whole file; raise ZSCorrupt on the first failure."""
        self._check_open()
        from zsarchive.zs.validate import validate

        return validate(self._transport, parallelism=max(self._blocks.parallelism, 1))

    # ---- lifetime ------------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise ZSError(f"{getattr(self, 'name', 'ZS')}: operation on a closed ZS file")

    def close(self) -> None:
        """Release threads, caches and the file; running iterators stop (as in the reference)."""
        if self._closed:
            return
        self._closed = True
        self._blocks.close()
        if self._owns_transport:
            self._transport.close()

    def __enter__(self) -> ZS:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<zsarchive.ZS {self.name!r}{' (closed)' if self._closed else ''}>"


def _as_bytes(value, what: str) -> bytes | None:
    """``value`` as bytes, None staying None (a bound not given)."""
    return None if value is None else _bytes(value, what)


def _bytes(value, what: str) -> bytes:
    if isinstance(value, bytes):
        return value
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    raise ZSError(f"{what} must be bytes, not {type(value).__name__}")


def _split_view(payload: memoryview, where: str) -> list[memoryview]:
    """The records of a data payload as views into it (the framing of decode_records)."""
    records: list[memoryview] = []
    pos, n = 0, len(payload)
    while pos < n:
        length, start = uleb128.decode(payload, pos, f"{where}: record {len(records)} length")
        pos = start + length
        if pos > n:
            raise ZSCorrupt(f"{where}: record {len(records)} runs past the end of the {n}-byte payload")
        records.append(payload[start:pos])
    if not records:
        raise ZSCorrupt(f"{where}: data block payload holds no records")
    return records


def _entries(block: IndexBlock, i: int, stop: bytes | None) -> Iterator[tuple[bytes, int, int]]:
    """Entries ``i``, ``i + 1``, ... of an index block as (key, offset, length), up to a key >= stop."""
    for j in range(i, len(block.keys)):
        key = block.keys[j]
        if stop is not None and key >= stop:
            return
        yield key, block.offsets[j], block.lengths[j]


def _trim(records: list[bytes], start: bytes, stop: bytes | None, trim_start: bool, trim_stop: bool) -> list[bytes]:
    """Drop records below ``start`` (first block only) and at or above ``stop`` (last block only)."""
    if trim_start and records[0] < start:
        records = records[bisect_left(records, start) :]
    if trim_stop and stop is not None and records and records[-1] >= stop:
        records = records[: bisect_left(records, stop)]
    return records
