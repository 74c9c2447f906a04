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
from concurrent.futures import Executor
from dataclasses import dataclass, field
from typing import Callable, Iterator, NamedTuple

from zsarchive.errors import ZSCorrupt
from zsarchive.io import Transport, open_transport
from zsarchive.zs import pipeline
from zsarchive.zs.blocks import read_header
from zsarchive.zs.format.block import (
    MAX_INDEX_LEVEL,
    MAX_LENGTH_FIELD,
    IndexEntry,
    check_crc,
    decode_index,
    decode_length,
    decode_records,
)
from zsarchive.zs.format.codecs import decoder_for, decompress_checked
from zsarchive.zs.format.header import ROOT_OFFSET_AT, SHA256_AT, Header

ProgressCallback = Callable[[int, int], None]

WINDOW = 1 << 22
"""Bytes fetched per transport read while walking the blocks of a file without an mmap view."""
WINDOWS_AHEAD = 2
"""Windows in flight past the one being walked: overlaps fetching and checking."""


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


def validate(source, *, parallelism: int | str = "guess", progress: ProgressCallback | None = None) -> ValidationReport:
    """Check every invariant of the ZS spec on ``source`` (path, file object or Transport).

    Raises ZSCorrupt naming the file, offset and problem at the first failure.
    """
    parallelism = pipeline.resolve_parallelism(parallelism)
    owned = not isinstance(source, Transport)
    transport = open_transport(source)
    try:
        header, blocks_start, _ = read_header(transport, 0)
        pools = pipeline.Pools(parallelism, "zs-validate")
        try:
            summary = _walk(transport, header, blocks_start, pools, parallelism, progress)
        finally:
            pools.close()
        _Tree(transport.name, header, summary).check()
        digest = summary.hasher.digest()
        if digest != header.data_sha256:
            raise ZSCorrupt(
                f"{transport.name}: offset {SHA256_AT}: data SHA-256 mismatch: header says "
                f"{header.data_sha256.hex()}, the data block payloads hash to {digest.hex()}"
            )
        return ValidationReport(
            name=transport.name,
            codec=header.codec,
            total_file_length=transport.size,
            root_index_level=summary.index[header.root_index_offset].level,
            data_blocks=len(summary.data_offsets),
            index_blocks=len(summary.index),
            extension_blocks=len(summary.extensions),
            records=summary.records,
            data_bytes=summary.data_bytes,
        )
    finally:
        if owned:
            transport.close()


# -- pass 2: every block, in file order ---------------------------------------------------------


@dataclass
class _Summary:
    """What the walk keeps of each block for the tree check: bounded by the block count."""

    hasher: "hashlib._Hash" = field(default_factory=hashlib.sha256)
    data_offsets: list[int] = field(default_factory=list)
    firsts: list[bytes] = field(default_factory=list)
    lasts: list[bytes] = field(default_factory=list)
    index: dict[int, _Index] = field(default_factory=dict)
    extensions: dict[int, int] = field(default_factory=dict)
    lengths: dict[int, int] = field(default_factory=dict)
    records: int = 0
    data_bytes: int = 0


def _walk(
    transport: Transport,
    header: Header,
    blocks_start: int,
    pools: pipeline.Pools,
    parallelism: int,
    progress: ProgressCallback | None,
) -> _Summary:
    """Frame every block from the end of the header to EOF (read ahead on a read thread); check
    and parse each on the decode threads (on this one for parallelism 1); summarise them in file
    order on this thread, hashing data payloads."""
    name = transport.name
    decompress = decoder_for(header.codec)
    cpu, io = pools.get()
    summary = _Summary()

    def decode(raw: _Raw) -> _Data | _Index | None:
        return _decode(name, decompress, raw)

    frames = _frames(transport, blocks_start, io)
    # 2 blocks in flight per decode thread keeps every one busy with memory bounded
    blocks = pipeline.ordered(frames, decode, cpu if parallelism > 1 else None, 2 * parallelism)
    # Both generators hold futures: close them here, never from a garbage-collector finalizer,
    # which may run inside another thread's start-up and deadlock on the join.
    try:
        for raw, block in blocks:
            _consume(name, summary, raw, block)
            if progress is not None:
                progress(raw.offset + raw.length, transport.size)
    finally:
        blocks.close()
        frames.close()
    return summary


def _frames(transport: Transport, start: int, io: Executor | None) -> Iterator[_Raw]:
    """Yield every block from ``start`` to EOF, framing checked, body unchecked."""
    name, size = transport.name, transport.size
    pos = start
    # A local file offers zero-copy views of its mmap: then one view covers every block.
    view = getattr(transport, "view", None)
    window = None
    if view is not None:
        whole = view(start, size - start)

        def have(offset: int, length: int) -> bytes | memoryview:
            return whole[offset - start : offset - start + length]
    else:
        window = pipeline.Window(transport.read, start, size, WINDOW, io, WINDOWS_AHEAD)
        have = window.get
    try:
        while pos < size:
            where = f"{name}: offset {pos}"
            body_length, field_length = decode_length(have(pos, min(MAX_LENGTH_FIELD, size - pos)), where)
            end = pos + field_length + body_length + 8
            if end > size:
                raise ZSCorrupt(
                    f"{where}: block of {end - pos} bytes (length field {body_length} + CRC) "
                    f"runs past the end of the {size}-byte file"
                )
            chunk = have(pos + field_length, body_length + 8)
            body = chunk[:body_length]
            yield _Raw(pos, end - pos, body[0], body, int.from_bytes(chunk[body_length:], "little"))
            pos = end
    finally:
        if window is not None:
            window.close()


def _decode(name: str, decompress: Callable[[bytes], bytes], raw: _Raw) -> _Data | _Index | None:
    """Worker: CRC, decompress and parse one block (None for an ignored extension block)."""
    check_crc(raw.body, raw.stored_crc, f"{name}: offset {raw.offset}")
    if raw.level > MAX_INDEX_LEVEL:
        return None  # the spec reserves levels >= 64 for extensions: readers ignore them
    kind = "data block" if raw.level == 0 else f"index block (level {raw.level})"
    where = f"{name}: offset {raw.offset}: {kind}"
    payload = decompress_checked(decompress, raw.body[1:], where)
    if raw.level == 0:
        records = decode_records(payload, where)
        if sorted(records) != records:
            i = next(i for i in range(1, len(records)) if records[i] < records[i - 1])
            raise ZSCorrupt(
                f"{name}: offset {raw.offset}: data block records out of order: record {i} "
                f"{records[i]!r} sorts before record {i - 1} {records[i - 1]!r}"
            )
        return _Data(raw.offset, raw.length, payload, len(records), records[0], records[-1])
    return _Index(raw.offset, raw.length, raw.level, decode_index(payload, where))


def _consume(name: str, summary: _Summary, raw: _Raw, block: _Data | _Index | None) -> None:
    """In file order: hash data, check order across blocks, keep summaries."""
    if block is None:
        summary.extensions[raw.offset] = raw.level
    elif isinstance(block, _Data):
        if summary.lasts and block.first < summary.lasts[-1]:
            raise ZSCorrupt(
                f"{name}: offset {block.offset}: data block's first record {block.first!r} sorts "
                f"before the last record {summary.lasts[-1]!r} of the previous data block "
                f"(offset {summary.data_offsets[-1]})"
            )
        summary.hasher.update(block.payload)
        summary.data_offsets.append(block.offset)
        summary.firsts.append(block.first)
        summary.lasts.append(block.last)
        summary.lengths[block.offset] = block.length
        summary.records += block.records
        summary.data_bytes += len(block.payload)
    else:
        summary.index[block.offset] = block
        summary.lengths[block.offset] = block.length


# -- pass 3: the tree, from the summaries alone ---------------------------------------------------


class _Tree:
    """References, levels, lengths, the root, orphans and the index-key invariant."""

    def __init__(self, name: str, header: Header, summary: _Summary) -> None:
        self.name = name
        self.header = header
        self.data_offsets = summary.data_offsets
        self.firsts, self.lasts = summary.firsts, summary.lasts
        self.index, self.extensions, self.lengths = summary.index, summary.extensions, summary.lengths

    def fail(self, offset: int, message: str) -> ZSCorrupt:
        return ZSCorrupt(f"{self.name}: offset {offset}: {message}")

    def level_of(self, offset: int) -> int:
        return self.index[offset].level if offset in self.index else 0

    def check(self) -> None:
        parent: dict[int, int] = {}
        for idx in self.index.values():
            for i, (key, offset, length) in enumerate(idx.entries):
                at = f"index block entry {i} (key {key!r})"
                if offset in self.extensions:
                    raise self.fail(
                        idx.offset,
                        f"{at} points at the extension block (level "
                        f"{self.extensions[offset]}) at offset {offset}; a level-"
                        f"{idx.level} index may reference only level {idx.level - 1}",
                    )
                if offset not in self.lengths:
                    raise self.fail(
                        idx.offset,
                        f"{at} points at offset {offset}, which is not the start of a block (dangling reference)",
                    )
                if self.level_of(offset) != idx.level - 1:
                    raise self.fail(
                        idx.offset,
                        f"{at} points at a level-{self.level_of(offset)} block at "
                        f"offset {offset}; a level-{idx.level} index may reference "
                        f"only level {idx.level - 1}",
                    )
                if length != self.lengths[offset]:
                    raise self.fail(
                        idx.offset,
                        f"{at} gives length {length} for the block at offset "
                        f"{offset}, which is {self.lengths[offset]} bytes",
                    )
                if offset in parent:
                    raise self.fail(
                        idx.offset,
                        f"{at} references the block at offset {offset}, already "
                        f"referenced by the index block at offset {parent[offset]}",
                    )
                parent[offset] = idx.offset
        self.check_root(parent)
        for offset in sorted(self.lengths):
            if offset not in parent and offset != self.header.root_index_offset:
                raise self.fail(
                    offset, f"level-{self.level_of(offset)} block is not referenced by any index block (orphan)"
                )
        self.check_keys()

    def check_root(self, parent: dict[int, int]) -> None:
        offset, length = self.header.root_index_offset, self.header.root_index_length
        if offset in self.extensions:
            raise self.fail(
                ROOT_OFFSET_AT,
                f"root index offset {offset} is an extension block (level "
                f"{self.extensions[offset]}); the root must be level 1..63",
            )
        if offset not in self.lengths:
            raise self.fail(ROOT_OFFSET_AT, f"root index offset {offset} is not the start of a block")
        if offset not in self.index:
            raise self.fail(
                ROOT_OFFSET_AT,
                f"root block at offset {offset} is a data block (level 0); "
                f"the root must be an index block (level 1..63)",
            )
        if length != self.lengths[offset]:
            raise self.fail(
                ROOT_OFFSET_AT,
                f"header gives root index length {length}, but the block at "
                f"offset {offset} is {self.lengths[offset]} bytes",
            )
        if offset in parent:
            raise self.fail(
                ROOT_OFFSET_AT,
                f"root block at offset {offset} is referenced by the index block at offset {parent[offset]}",
            )

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
                    raise self.fail(
                        idx.offset,
                        f"index entry {i} (offset {offset}) spans records that come "
                        f"before those of entry {i - 1} in the file",
                    )
                if key > self.firsts[n]:
                    raise self.fail(
                        idx.offset,
                        f"index entry {i} key {key!r} is larger than the first record "
                        f"{self.firsts[n]!r} under the block at offset {offset}",
                    )
                if n and key < self.lasts[n - 1]:
                    raise self.fail(
                        idx.offset,
                        f"index entry {i} key {key!r} is smaller than record "
                        f"{self.lasts[n - 1]!r} (data block at offset "
                        f"{self.data_offsets[n - 1]}), which comes before the block "
                        f"at offset {offset}",
                    )
            ordinal[idx.offset] = first_of_children[0]
