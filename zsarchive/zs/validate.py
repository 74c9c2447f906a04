"""Exhaustive check of a ZS v0.10 file against every invariant of the spec.

Three passes, each raising ZSCorrupt at the first failure it meets:
1. the header (magic, CRC, codec, metadata, total length, root extent);
2. one sequential walk over every block from the end of the header to EOF, with
   CRCs, decompression and payload parsing spread over a thread pool (zlib, lzma
   and zstd release the GIL) while the main thread hashes data payloads in order;
3. the tree, from per-block summaries only: references, levels, lengths, the
   root, orphans and the index-key invariant.
Memory holds the summaries (first and last record of each data block, the
entries of each index block) plus a bounded number of blocks in flight.
"""

from __future__ import annotations

import hashlib
import os
from collections import deque
from contextlib import closing
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Callable, Iterator, NamedTuple

from zsarchive.errors import ZSCorrupt, ZSError
from zsarchive.zs.format import header as zsheader
from zsarchive.zs.format import uleb128
from zsarchive.zs.format.block import MAX_INDEX_LEVEL, IndexEntry, decode_index, decode_records
from zsarchive.zs.format.codecs import decoder_for, decompress_checked
from zsarchive.zs.format.crc64 import crc64
from zsarchive.io import Transport, open_transport

ProgressCallback = Callable[[int, int], None]

# Header field offsets, for messages (magic 8 + header length 8, then the fixed fields).
_ROOT_OFFSET_AT = 16
_TOTAL_LENGTH_AT = 32
_SHA256_AT = 40
_HEAD_GUESS = 1 << 16  # first read: the whole header of any ordinary file
_WINDOW = 1 << 22  # bytes fetched per transport read while walking blocks
_WINDOWS_AHEAD = 2  # windows in flight past the one being walked: overlaps fetching and checking
_MAX_ULEB_BYTES = 10  # a u64 needs at most 10 uleb128 bytes; longer fields are corrupt anyway


@dataclass(frozen=True)
class ValidationReport:
    """What a successful validation saw."""

    name: str
    codec: str
    total_file_length: int
    root_index_level: int
    data_blocks: int
    index_blocks: int
    extension_blocks: int
    records: int
    data_bytes: int


class _Raw(NamedTuple):
    offset: int
    length: int  # whole block: length field, level, payload, CRC
    level: int
    body: bytes | memoryview  # level byte + compressed payload
    stored_crc: int


class _Data(NamedTuple):
    offset: int
    length: int
    payload: bytes
    records: int
    first: bytes
    last: bytes


class _Index(NamedTuple):
    offset: int
    length: int
    level: int
    entries: list[IndexEntry]


def validate(source, *, parallelism: int | None = None,
             progress: ProgressCallback | None = None) -> ValidationReport:
    """Check every invariant of the ZS spec on ``source`` (path, file object or Transport).

    Raises ZSCorrupt naming the file, offset and problem at the first failure.
    """
    owned = not isinstance(source, Transport)
    transport = open_transport(source)
    try:
        return _Validator(transport, parallelism, progress).run()
    finally:
        if owned:
            transport.close()


class _ReadAhead:
    """Bytes [start, end) of a transport in order, fetched in windows on a thread ahead of the
    caller: at most ``depth`` windows wait past the one being read, so memory stays bounded."""

    def __init__(self, read: Callable[[int, int], bytes], start: int, end: int, window: int,
                 depth: int) -> None:
        self._read, self._end, self._window, self._depth = read, end, window, depth
        self._next = start  # start of the next window to ask for
        self._buf, self._buf_at = b"", start
        self._pending: deque[Future] = deque()
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="zs-validate-read")
        self._top_up()

    def _top_up(self) -> None:
        while len(self._pending) < self._depth and self._next < self._end:
            length = min(self._window, self._end - self._next)
            self._pending.append(self._pool.submit(self._read, self._next, length))
            self._next += length

    def get(self, offset: int, length: int) -> bytes:
        """Bytes [offset, offset + length); ``offset`` never goes below an earlier call's."""
        if offset + length > self._buf_at + len(self._buf):
            parts = [self._buf[offset - self._buf_at:]]
            have = self._buf_at + len(self._buf) - offset
            while have < length:
                window = self._pending.popleft().result()
                self._top_up()
                parts.append(window)
                have += len(window)
            self._buf, self._buf_at = b"".join(parts), offset
        return self._buf[offset - self._buf_at:offset - self._buf_at + length]

    def close(self) -> None:
        """Stop fetching; windows not yet asked for are cancelled."""
        self._pool.shutdown(wait=False, cancel_futures=True)


class _Validator:
    """One validation run over one transport."""

    def __init__(self, transport: Transport, parallelism: int | None,
                 progress: ProgressCallback | None) -> None:
        self.t = transport
        self.name = transport.name
        self.parallelism = max(1, parallelism or os.cpu_count() or 1)
        self.progress = progress

    def fail(self, offset: int, message: str) -> ZSCorrupt:
        return ZSCorrupt(f"{self.name}: offset {offset}: {message}")

    def run(self) -> ValidationReport:
        self.check_header()
        self.walk_blocks()
        self.check_tree()
        digest = self.hasher.digest()
        if digest != self.header.data_sha256:
            raise self.fail(_SHA256_AT, f"data SHA-256 mismatch: header says {self.header.data_sha256.hex()}, "
                                        f"the data block payloads hash to {digest.hex()}")
        return ValidationReport(
            name=self.name, codec=self.header.codec, total_file_length=self.size,
            root_index_level=self.index[self.header.root_index_offset].level,
            data_blocks=len(self.data_offsets), index_blocks=len(self.index),
            extension_blocks=len(self.extensions), records=self.records, data_bytes=self.data_bytes)

    # -- pass 1: header -------------------------------------------------------------------------

    def check_header(self) -> None:
        # The first call on a network transport: it also learns the size.
        head, _ = self.t.read_head_tail(_HEAD_GUESS, 0)
        self.size = self.t.size
        header_length = zsheader.header_length_of(head[:zsheader.PREFIX_LENGTH], self.name)
        self.blocks_start = zsheader.blocks_start(header_length)
        if self.blocks_start > self.size:
            raise self.fail(8, f"header length {header_length} runs past the end of the {self.size}-byte file")
        if self.blocks_start > len(head):
            head = self.t.read(0, self.blocks_start)
        end = zsheader.PREFIX_LENGTH + header_length
        h = zsheader.decode(head[zsheader.PREFIX_LENGTH:end], head[end:end + 8], self.name)
        try:
            self.decompress = decoder_for(h.codec)
        except ZSError:
            raise self.fail(zsheader.CODEC_OFFSET, f"unknown codec {h.codec!r}") from None
        if h.total_file_length != self.size:
            raise self.fail(_TOTAL_LENGTH_AT, f"header says the file is {h.total_file_length} bytes, "
                                              f"but it is {self.size} bytes")
        if not (self.blocks_start <= h.root_index_offset
                and h.root_index_offset + h.root_index_length <= self.size):
            raise self.fail(_ROOT_OFFSET_AT, f"root index block ({h.root_index_length} bytes at offset "
                                             f"{h.root_index_offset}) lies outside the block region "
                                             f"{self.blocks_start}..{self.size}")
        self.header = h

    # -- pass 2: every block, in file order -----------------------------------------------------

    def frames(self) -> Iterator[_Raw]:
        """Yield every block from the end of the header to EOF, framing checked, body unchecked."""
        pos = self.blocks_start
        size = self.size
        # A local file offers zero-copy views of its mmap: then one view covers every block.
        view = getattr(self.t, "view", None)
        if view is not None:
            base = pos
            whole = view(base, size - base)
            ahead = None

            def have(offset: int, length: int) -> bytes | memoryview:
                return whole[offset - base:offset - base + length]
        else:
            ahead = _ReadAhead(self.t.read, pos, size, _WINDOW, _WINDOWS_AHEAD)
            have = ahead.get
        try:
            while pos < size:
                field = have(pos, min(_MAX_ULEB_BYTES, size - pos))
                if all(byte & 0x80 for byte in field):
                    problem = ("runs past the end of the file" if len(field) < _MAX_ULEB_BYTES
                               else f"is longer than {_MAX_ULEB_BYTES} bytes")
                    raise self.fail(pos, f"block length field {problem}")
                try:
                    body_length, field_length = uleb128.decode(field, 0, "length field")
                except ZSCorrupt:
                    raise self.fail(pos, "block length field is not in shortest uleb128 form") from None
                if body_length == 0:
                    raise self.fail(pos, "block length is 0 (a block holds at least its level byte)")
                end = pos + field_length + body_length + 8
                if end > size:
                    raise self.fail(pos, f"block of {end - pos} bytes (length field {body_length} + CRC) "
                                         f"runs past the end of the {size}-byte file")
                chunk = have(pos + field_length, body_length + 8)
                body = chunk[:body_length]
                stored = int.from_bytes(chunk[body_length:], "little")
                yield _Raw(pos, end - pos, body[0], body, stored)
                pos = end
        finally:
            if ahead is not None:
                ahead.close()

    def walk_blocks(self) -> None:
        self.hasher = hashlib.sha256()
        self.data_offsets: list[int] = []
        self.firsts: list[bytes] = []
        self.lasts: list[bytes] = []
        self.index: dict[int, _Index] = {}
        self.extensions: dict[int, int] = {}
        self.lengths: dict[int, int] = {}
        self.records = 0
        self.data_bytes = 0
        ahead = 2 * self.parallelism  # blocks in flight: bounds memory, keeps every worker busy
        # frames() owns a read-ahead thread: close it here, never from a garbage-collector
        # finalizer, which may run inside another thread's start-up and deadlock on the join
        if self.parallelism == 1:
            with closing(self.frames()) as frames:
                for raw in frames:
                    self.consume(raw, self.decode(raw))
            return
        with ThreadPoolExecutor(self.parallelism, thread_name_prefix="zs-validate") as pool:
            pending: deque[tuple[_Raw, Future]] = deque()

            def consume_oldest() -> None:
                raw, fut = pending.popleft()
                self.consume(raw, fut.result())

            frames = self.frames()
            try:
                while True:
                    try:
                        raw = next(frames)
                    except StopIteration:
                        break
                    except ZSCorrupt:
                        # A framing error further on must not hide a failure in an earlier block.
                        while pending:
                            consume_oldest()
                        raise
                    pending.append((raw, pool.submit(self.decode, raw)))
                    if len(pending) > ahead:
                        consume_oldest()
                while pending:
                    consume_oldest()
            finally:
                for _, fut in pending:
                    fut.cancel()
                frames.close()

    def decode(self, raw: _Raw) -> _Data | _Index | None:
        """Worker: CRC, decompress and parse one block (None for an ignored extension block)."""
        actual = crc64(raw.body)
        if actual != raw.stored_crc:
            raise self.fail(raw.offset, f"block CRC mismatch (stored {raw.stored_crc:#018x}, "
                                        f"computed {actual:#018x})")
        if raw.level > MAX_INDEX_LEVEL:
            return None  # the spec reserves levels >= 64 for extensions: readers ignore them
        kind = "data block" if raw.level == 0 else f"index block (level {raw.level})"
        where = f"{self.name}: offset {raw.offset}: {kind}"
        payload = decompress_checked(self.decompress, raw.body[1:], where)
        if raw.level == 0:
            records = decode_records(payload, where)
            if sorted(records) != records:
                i = next(i for i in range(1, len(records)) if records[i] < records[i - 1])
                raise self.fail(raw.offset, f"data block records out of order: record {i} {records[i]!r} "
                                            f"sorts before record {i - 1} {records[i - 1]!r}")
            return _Data(raw.offset, raw.length, payload, len(records), records[0], records[-1])
        entries = decode_index(payload, where)
        for i in range(1, len(entries)):
            if entries[i].key < entries[i - 1].key:
                raise self.fail(raw.offset, f"index keys out of order: entry {i} key {entries[i].key!r} "
                                            f"sorts before entry {i - 1} key {entries[i - 1].key!r}")
        return _Index(raw.offset, raw.length, raw.level, entries)

    def consume(self, raw: _Raw, block: _Data | _Index | None) -> None:
        """Main thread, in file order: hash data, check order across blocks, keep summaries."""
        if block is None:
            self.extensions[raw.offset] = raw.level
        elif isinstance(block, _Data):
            if self.lasts and block.first < self.lasts[-1]:
                raise self.fail(block.offset, f"data block's first record {block.first!r} sorts before the "
                                              f"last record {self.lasts[-1]!r} of the previous data block "
                                              f"(offset {self.data_offsets[-1]})")
            self.hasher.update(block.payload)
            self.data_offsets.append(block.offset)
            self.firsts.append(block.first)
            self.lasts.append(block.last)
            self.lengths[block.offset] = block.length
            self.records += block.records
            self.data_bytes += len(block.payload)
        else:
            self.index[block.offset] = block
            self.lengths[block.offset] = block.length
        if self.progress is not None:
            self.progress(raw.offset + raw.length, self.size)

    # -- pass 3: the tree -----------------------------------------------------------------------

    def level_of(self, offset: int) -> int:
        return self.index[offset].level if offset in self.index else 0

    def check_tree(self) -> None:
        parent: dict[int, int] = {}
        for idx in self.index.values():
            for i, (key, offset, length) in enumerate(idx.entries):
                at = f"index block entry {i} (key {key!r})"
                if offset in self.extensions:
                    raise self.fail(idx.offset, f"{at} points at the extension block (level "
                                                f"{self.extensions[offset]}) at offset {offset}; a level-"
                                                f"{idx.level} index may reference only level {idx.level - 1}")
                if offset not in self.lengths:
                    raise self.fail(idx.offset, f"{at} points at offset {offset}, which is not the start of "
                                                f"a block (dangling reference)")
                if self.level_of(offset) != idx.level - 1:
                    raise self.fail(idx.offset, f"{at} points at a level-{self.level_of(offset)} block at "
                                                f"offset {offset}; a level-{idx.level} index may reference "
                                                f"only level {idx.level - 1}")
                if length != self.lengths[offset]:
                    raise self.fail(idx.offset, f"{at} gives length {length} for the block at offset "
                                                f"{offset}, which is {self.lengths[offset]} bytes")
                if offset in parent:
                    raise self.fail(idx.offset, f"{at} references the block at offset {offset}, already "
                                                f"referenced by the index block at offset {parent[offset]}")
                parent[offset] = idx.offset
        self.check_root(parent)
        for offset in sorted(self.lengths):
            if offset not in parent and offset != self.header.root_index_offset:
                raise self.fail(offset, f"level-{self.level_of(offset)} block is not referenced by any "
                                        f"index block (orphan)")
        self.check_keys()

    def check_root(self, parent: dict[int, int]) -> None:
        offset, length = self.header.root_index_offset, self.header.root_index_length
        if offset in self.extensions:
            raise self.fail(_ROOT_OFFSET_AT, f"root index offset {offset} is an extension block (level "
                                             f"{self.extensions[offset]}); the root must be level 1..63")
        if offset not in self.lengths:
            raise self.fail(_ROOT_OFFSET_AT, f"root index offset {offset} is not the start of a block")
        if offset not in self.index:
            raise self.fail(_ROOT_OFFSET_AT, f"root block at offset {offset} is a data block (level 0); "
                                             f"the root must be an index block (level 1..63)")
        if length != self.lengths[offset]:
            raise self.fail(_ROOT_OFFSET_AT, f"header gives root index length {length}, but the block at "
                                             f"offset {offset} is {self.lengths[offset]} bytes")
        if offset in parent:
            raise self.fail(_ROOT_OFFSET_AT, f"root block at offset {offset} is referenced by the index "
                                             f"block at offset {parent[offset]}")

    def check_keys(self) -> None:
        """Key invariant: key <= first record the child spans, >= every record before that one."""
        ordinal = {offset: n for n, offset in enumerate(self.data_offsets)}
        # Levels are consistent by now, so walking index blocks by level fills every child first.
        for idx in sorted(self.index.values(), key=lambda b: b.level):
            first_of_children = [ordinal[e.offset] for e in idx.entries]
            for i, (key, offset, _) in enumerate(idx.entries):
                n = first_of_children[i]
                # A reader streams forward from the block its bisect finds, so spans must follow file order.
                if i and n <= first_of_children[i - 1]:
                    raise self.fail(idx.offset, f"index entry {i} (offset {offset}) spans records that come "
                                                f"before those of entry {i - 1} in the file")
                if key > self.firsts[n]:
                    raise self.fail(idx.offset, f"index entry {i} key {key!r} is larger than the first record "
                                                f"{self.firsts[n]!r} under the block at offset {offset}")
                if n and key < self.lasts[n - 1]:
                    raise self.fail(idx.offset, f"index entry {i} key {key!r} is smaller than record "
                                                f"{self.lasts[n - 1]!r} (data block at offset "
                                                f"{self.data_offsets[n - 1]}), which comes before the block "
                                                f"at offset {offset}")
            ordinal[idx.offset] = first_of_children[0]
