"""ZSWriter: sorted records -> compressed data blocks -> index levels -> a committed ZS file.

Blocks are split, checked, encoded and compressed on a thread pool (zlib, lzma and zstd release
the GIL) with a bounded number of blocks in flight, while the calling thread reads the input and
writes finished blocks strictly in input order, handing each to the index builder
(zsarchive.zs.index_builder); input streams are cut into records by zsarchive.zs.record_stream.
"""

from __future__ import annotations

import bisect
import getpass
import hashlib
import itertools
import json
import operator
import os
import socket
from collections import deque
from collections.abc import Mapping
from contextlib import contextmanager
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import datetime, timezone
from typing import Callable, Iterable, Iterator, NamedTuple

from zsarchive.errors import ZSError
from zsarchive.io.outfile import check_new_target, start_writeback, write_all
from zsarchive.version import VERSION
from zsarchive.zs.format.block import block_parts, encode_block, encode_records, record_parts
from zsarchive.zs.format.codecs import get_codec
from zsarchive.zs.format.framing import LENGTH_PREFIXES
from zsarchive.zs.format.header import MAGIC, PARTIAL_MAGIC, Header
from zsarchive.zs.index_builder import IndexBuilder, shortest_separator
from zsarchive.zs.pipeline import resolve_parallelism
from zsarchive.zs.record_stream import BinaryInput, length_prefixed_records, show_record, terminated_chunks

DEFAULT_BRANCHING_FACTOR = 1024
DEFAULT_APPROX_BLOCK_SIZE = 393216


def default_build_info() -> dict:
    """The ``build-info`` metadata the reference adds: user, host, UTC time and library version."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # no passwd entry and no $USER, e.g. in some containers
        user = "unknown"
    return {
        "user": user,
        "host": socket.getfqdn(),
        "time": datetime.now(timezone.utc).replace(tzinfo=None).isoformat() + "Z",
        "version": f"zsarchive {VERSION}",
    }


class BuiltBlock(NamedTuple):
    """A data block ready to write: its records' bounds, raw payload (for the hash) and framed bytes,
    each of the last two bytes or a list of buffers it is the concatenation of (:func:`build_stored_block`).
    Plain data when bytes: another process may build it (:func:`build_data_block`) for
    :meth:`ZSWriter.add_built_block`."""

    count: int  # type: ignore[assignment]  # a field shadowing tuple.count, which nothing calls
    first: bytes | bytearray
    last: bytes | bytearray
    payload: bytes | list
    framed: bytes | list
    key_length: int | None = None  # index key: first[:key_length] (None: the shortest separator)


class _Unsorted(Exception):
    """Raised in a worker: records[index - 1] > records[index] within one block."""

    def __init__(self, index: int, before, after):
        super().__init__(index)
        self.index, self.before, self.after = index, before, after


class _NotBytes(Exception):
    """Raised in a worker: records[index] is not a bytes-like object."""

    def __init__(self, index: int, record):
        super().__init__(index)
        self.index, self.record = index, record


def _check_sorted(records: list) -> None:
    if all(map(operator.le, records, itertools.islice(records, 1, None))):
        return
    for i in range(1, len(records)):
        if records[i - 1] > records[i]:
            raise _Unsorted(i, records[i - 1], records[i])


def build_data_block(records: list, key_length: int | None, compress: Callable[[bytes], bytes]) -> BuiltBlock:
    """``records`` (sorted) as one data block compressed by ``compress``; ``key_length`` as for
    :meth:`ZSWriter.add_data_block`."""
    try:
        _check_sorted(records)
        payload = encode_records(records)
    except TypeError:
        # Only a non-bytes record makes comparing or joining fail; name the first one.
        for i, r in enumerate(records):
            if not isinstance(r, (bytes, bytearray)):
                raise _NotBytes(i, r) from None
        raise
    return BuiltBlock(
        len(records), bytes(records[0]), bytes(records[-1]), payload, encode_block(0, compress(payload)), key_length
    )


def build_stored_block(records: list, key_length: int | None, store: Callable[[list], list]) -> BuiltBlock:
    """``records`` (sorted) as one data block in a codec's stored framing (``store``: :attr:`Codec.store
    <zsarchive.zs.format.codecs.Codec.store>`), payload and framed bytes as lists of buffers viewing the
    records: the block is hashed and written from the records themselves, no byte copied."""
    for i, r in enumerate(records):
        if not isinstance(r, (bytes, bytearray)):
            raise _NotBytes(i, r)
    _check_sorted(records)
    payload = record_parts(records)
    # the first and last records themselves: bytes() of a bytearray record would copy all of it
    return BuiltBlock(len(records), records[0], records[-1], payload, block_parts(0, store(payload)), key_length)


def _build_chunk_block(chunk: bytes, terminator: bytes, compress: Callable[[bytes], bytes]) -> BuiltBlock:
    """A block from terminated input: ``chunk`` holds whole records, each followed by the terminator."""
    return build_data_block(chunk[: -len(terminator)].split(terminator), None, compress)


class BlockCutter:
    """Cuts a stream of sorted records into data blocks, the writer's one rule: a block ends at the
    first record that brings it to ``approx`` bytes, and a record of ``approx`` bytes or more is a
    block of its own. Whoever cuts with the same ``approx`` gets the same blocks."""

    def __init__(self, approx: int):
        self.approx = approx
        self._pending: list = []
        self._size = 0

    def cut(self, records: Iterable, approx: int | None = None) -> Iterator[list]:
        """The blocks ``records`` complete, in order; what is left waits for more or :meth:`flush`."""
        approx = approx or self.approx
        if isinstance(records, list):
            try:
                lengths = list(map(len, records))
            except TypeError:
                lengths = None
            if lengths and max(lengths) < approx:
                return self._cut_list(records, lengths, approx)
        return self._cut_each(records, approx)

    def flush(self) -> list:
        """The records of the incomplete block (possibly none), which ends here."""
        out, self._pending, self._size = self._pending, [], 0
        return out

    def _cut_each(self, records: Iterable, approx: int) -> Iterator[list]:
        r = None
        try:
            for r in records:
                n = len(r)
                if n >= approx:
                    if self._pending:
                        yield self.flush()
                    yield [r]
                    continue
                self._pending.append(r)
                self._size += n
                if self._size >= approx:
                    yield self.flush()
        except TypeError:
            if isinstance(r, (bytes, bytearray)):
                raise
            raise ZSError(f"records must be bytes, not {type(r).__name__}: {show_record(r)}") from None

    def _cut_list(self, records: list, lengths: list[int], approx: int) -> Iterator[list]:
        # Whole blocks by bisection over the running sizes: no Python work per record.
        sizes = list(itertools.accumulate(lengths))
        start, before = 0, -self._size  # sizes[] value where the current block began
        while (end := bisect.bisect_left(sizes, before + approx, start)) < len(sizes):
            block, self._pending = self._pending + records[start : end + 1], []
            yield block
            start, before = end + 1, sizes[end]
        self._pending.extend(records[start:])
        self._size = sizes[-1] - before


class ZSWriter:
    """Write a new ZS file from records given in sorted (bytewise) order; duplicates are allowed.

    Call :meth:`finish` to commit; until then (and after any error) the file carries the ZStoBe
    magic that every reader rejects. Leaving a ``with`` block only closes, it never finishes.
    ``name``: how error messages name the file (default ``path``; e.g. the target of a partial file);
    ``overwrite``: replace a file at ``path`` (by default an existing file is refused).
    """

    def __init__(
        self,
        path: str | os.PathLike,
        metadata: dict,
        branching_factor: int = DEFAULT_BRANCHING_FACTOR,
        *,
        approx_block_size: int = DEFAULT_APPROX_BLOCK_SIZE,
        codec: str = "lzma",
        compress_level: int | str | None = None,
        parallelism: int | str = "guess",
        include_default_metadata: bool = True,
        name: str | None = None,
        overwrite: bool = False,
    ):
        if not isinstance(metadata, Mapping):
            raise ZSError(f"metadata must be a JSON object (a dict), not {type(metadata).__name__}")
        if not isinstance(branching_factor, int) or branching_factor < 2:
            raise ZSError(f"branching_factor must be an integer >= 2, not {branching_factor!r}")
        if not isinstance(approx_block_size, int) or approx_block_size < 1:
            raise ZSError(f"approx_block_size must be a positive integer, not {approx_block_size!r}")
        parallelism = resolve_parallelism(parallelism)
        self._codec = get_codec(codec, compress_level)
        try:
            # A deep copy: the header is encoded again at the end and must come out the same.
            self.metadata = json.loads(json.dumps(dict(metadata)))
        except (TypeError, ValueError) as exc:
            raise ZSError(f"metadata is not JSON-serialisable: {exc}") from None
        if include_default_metadata:
            self.metadata.setdefault("build-info", default_build_info())
        self.codec = self._codec.name
        self.branching_factor = branching_factor
        self.approx_block_size = approx_block_size
        self.parallelism = parallelism
        self._path = os.fspath(path)
        self._name = self._path if name is None else name  # messages name the file a user asked for
        # The header is rewritten in place at the end, so its length must not change: the
        # root offset placeholder is 2**63 - 1 only for readability, every field is fixed-size.
        self._header = Header(2**63 - 1, 0, 0, b"\0" * 32, self.codec, self.metadata)
        encoded_header = self._header.encode()
        self._header_length = len(encoded_header)
        # Everything close() stops exists before the file does: Ctrl-C or SIGTERM may come between any two
        # statements, and the half-made writer is then closed as it is collected.
        self._pool = ThreadPoolExecutor(max_workers=parallelism, thread_name_prefix="zs-writer")
        self._in_flight: deque[Future] = deque()
        self._max_in_flight = 2 * parallelism
        self._hasher = hashlib.sha256()
        # One thread hashes the payloads, in order, beside the writing (hashlib lets go of the GIL).
        self._hashing = ThreadPoolExecutor(max_workers=1, thread_name_prefix="zs-hash")
        self._hashed: deque[Future] = deque()
        check_new_target(self._path, overwrite)
        flags = os.O_RDWR | os.O_CREAT | (os.O_TRUNC if overwrite else os.O_EXCL) | getattr(os, "O_CLOEXEC", 0)
        try:
            fd = os.open(self._path, flags, 0o666)
        except OSError as exc:
            raise ZSError(f"{self._name}: cannot create: {exc.strerror}") from None
        self._fd = fd  # written through the descriptor: a block's buffers go out in one writev
        self.closed = False
        self._records_written = 0  # records of blocks already written (for error messages)
        self._written_back = 0  # the file's bytes up to here are on their way to the disk
        self._last_record: bytes | bytearray | None = None
        self._index = IndexBuilder(branching_factor, self._codec.compress, self._append)
        self._cutter = BlockCutter(approx_block_size)
        with self._fatal():
            # Partial magic and a header with an all-zero CRC: nothing here can pass as a ZS file.
            write_all(fd, [PARTIAL_MAGIC + encoded_header[:-8] + b"\0" * 8])
            self._pos = len(PARTIAL_MAGIC) + len(encoded_header)

    # -- public API ---------------------------------------------------------------------------

    def add_record(self, record: bytes) -> None:
        """Add one record (>= every record added before it)."""
        self.add_records((record,))

    def add_records(self, records: Iterable[bytes]) -> None:
        """Add records in sorted order; they are grouped into blocks of ~approx_block_size bytes."""
        self._check_open()
        with self._fatal():
            self._add_records(records, self.approx_block_size)

    def add_record_lists(self, lists: Iterable[list[bytes]]) -> None:
        """Like :meth:`add_records` for records that come in lists: the same blocks, cut a list at a
        time (no Python work per record)."""
        self._check_open()
        with self._fatal():
            for records in lists:
                self._add_records(records, self.approx_block_size)

    def add_data_block(self, records: list[bytes], *, stored: bool = False, key_length: int | None = None) -> None:
        """Write ``records`` (sorted, after everything added so far) as exactly one data block;
        ``stored``: its payload in the codec's framing uncompressed (bytes compressed already);
        ``key_length``: its index key is its first record's first ``key_length`` bytes, not the
        shortest separator, so that a lookup of any key from there lands on this very block."""
        self._check_open()
        with self._fatal():
            records = list(records)
            self._flush_pending()
            if records:
                if stored:
                    # Nothing to compress: building it costs one CRC, less than handing it to a worker does.
                    self._queue_built(build_stored_block, records, key_length, self._codec.store)
                else:
                    self._submit(build_data_block, records, key_length)

    def add_built_block(self, block: BuiltBlock) -> None:
        """Write a data block built elsewhere (by :func:`build_data_block` with this file's codec),
        after everything added so far."""
        self._check_open()
        with self._fatal():
            self._flush_pending()
            self._queue_built(lambda: block)

    def add_file_contents(
        self,
        file: BinaryInput,
        approx_block_size: int | None = None,
        terminator: bytes = b"\n",
        length_prefixed: str | None = None,
    ) -> None:
        """Add every record of a binary file, then close it (as the reference does).

        Records end with ``terminator`` (the last one too), or, with ``length_prefixed`` of
        ``"uleb128"`` or ``"u64le"``, each is preceded by its length.
        """
        self._check_open()
        with self._fatal():
            try:
                approx = self.approx_block_size if approx_block_size is None else approx_block_size
                if not isinstance(approx, int) or approx < 1:
                    raise ZSError(f"approx_block_size must be a positive integer, not {approx!r}")
                if length_prefixed is not None:
                    if length_prefixed not in LENGTH_PREFIXES:
                        raise ZSError(
                            f"length_prefixed must be one of {', '.join(LENGTH_PREFIXES)}, not {length_prefixed!r}"
                        )
                    self._add_records(length_prefixed_records(file, length_prefixed), approx)
                else:
                    if not isinstance(terminator, bytes) or not terminator:
                        raise ZSError(f"terminator must be a non-empty bytes string, not {terminator!r}")
                    self._flush_pending()
                    for chunk in terminated_chunks(file, approx, terminator):
                        self._submit(_build_chunk_block, chunk, terminator)
            finally:
                file.close()

    def finish(self) -> None:
        """Write the index and the final header, fsync, then mark the file complete (ZSfiLe)."""
        self._check_open()
        with self._fatal():
            self._flush_pending()
            while self._in_flight:
                self._write_oldest()
            if self._last_record is None:
                raise ZSError(
                    f"{self._name}: no records were added; a ZS file must hold at least "
                    "one record (its root index needs an entry)"
                )
            root = self._index.finish()
            while self._hashed:
                self._hashed.popleft().result()
            self._header = self._header._replace(
                root_index_offset=root.offset,
                root_index_length=root.length,
                total_file_length=self._pos,
                data_sha256=self._hasher.digest(),
            )
            encoded = self._header.encode()
            if len(encoded) != self._header_length:
                raise ZSError(f"{self._name}: metadata changed while writing; the header no longer fits")
            os.lseek(self._fd, len(MAGIC), os.SEEK_SET)
            write_all(self._fd, [encoded])
            os.fsync(self._fd)
            # Only now, with everything durable, may the file claim to be a ZS file.
            os.lseek(self._fd, 0, os.SEEK_SET)
            write_all(self._fd, [MAGIC])
            os.fsync(self._fd)
        self.close()

    def close(self) -> None:
        """Stop the workers and close the file; without :meth:`finish` it stays a ZStoBe file."""
        if self.closed:
            return
        self.closed = True
        for fut in self._in_flight:
            fut.cancel()
        self._in_flight.clear()
        self._pool.shutdown(wait=True, cancel_futures=True)
        self._hashing.shutdown(wait=True, cancel_futures=True)
        os.close(self._fd)

    def __enter__(self) -> ZSWriter:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def __del__(self) -> None:
        if getattr(self, "closed", True) is False:
            self.close()

    # -- data blocks ----------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self.closed:
            raise ZSError(f"{self._name}: ZSWriter is closed")

    @contextmanager
    def _fatal(self) -> Iterator[None]:
        """Any error while writing is final: close the writer (leaving ZStoBe) and re-raise."""
        try:
            yield
        except BaseException:
            self.close()
            raise

    def _add_records(self, records: Iterable[bytes], approx: int) -> None:
        for block in self._cutter.cut(records, approx):
            self._submit(build_data_block, block, None)

    def _flush_pending(self) -> None:
        block = self._cutter.flush()
        if block:
            self._submit(build_data_block, block, None)

    def _queue_built(self, build: Callable[..., BuiltBlock], *args: object) -> None:
        """Build a block here and now, queued after the blocks in flight (a failure to build is raised
        when its turn to be written comes, as a worker's would be)."""
        while len(self._in_flight) >= self._max_in_flight:
            self._write_oldest()
        done: Future = Future()
        try:
            done.set_result(build(*args))
        except (_Unsorted, _NotBytes) as exc:
            done.set_exception(exc)
        self._in_flight.append(done)

    def _submit(self, fn: Callable[..., BuiltBlock], *args: object, compress: Callable | None = None) -> None:
        while len(self._in_flight) >= self._max_in_flight:
            self._write_oldest()
        self._in_flight.append(self._pool.submit(fn, *args, compress or self._codec.compress))

    def _write_oldest(self) -> None:
        fut = self._in_flight.popleft()
        base = self._records_written
        try:
            built = fut.result()
        except _Unsorted as exc:
            raise ZSError(
                f"records are not sorted: record {base + exc.index + 1} {show_record(exc.after)} "
                f"sorts before record {base + exc.index} {show_record(exc.before)} "
                "(records count from 1; input must be sorted bytewise)"
            ) from None
        except _NotBytes as exc:
            raise ZSError(
                f"record {base + exc.index + 1} is {type(exc.record).__name__}, not bytes: {show_record(exc.record)}"
            ) from None
        last = self._last_record
        exact = None if built.key_length is None else bytes(built.first[: built.key_length])
        if last is None:
            key = b""  # nothing comes before the first block: the empty key is the shortest
        elif exact is not None and last <= exact:
            key = exact
        elif last <= built.first:
            key = shortest_separator(last, built.first)
        else:
            raise ZSError(
                f"records are not sorted: record {base + 1} {show_record(built.first)} "
                f"sorts before record {base} {show_record(last)} "
                "(records count from 1; input must be sorted bytewise)"
            )
        self._hashed.append(self._hashing.submit(_update, self._hasher, built.payload))
        while len(self._hashed) > self._max_in_flight:
            self._hashed.popleft().result()
        self._records_written = base + built.count
        self._last_record = built.last
        length = sum(map(len, built.framed)) if isinstance(built.framed, list) else len(built.framed)
        self._index.add(0, key, self._append(built.framed), length)

    def _append(self, framed: bytes | list) -> int:
        """Write a framed block (bytes, or a list of buffers) at the end of the file; return its offset."""
        offset = self._pos
        parts = framed if isinstance(framed, list) else [framed]
        write_all(self._fd, parts)  # a stored block's records in one writev, not a write each
        self._pos += sum(map(len, parts))
        if self._pos - self._written_back >= WRITE_BACK:
            start_writeback(self._fd, self._written_back, self._pos - self._written_back)
            self._written_back = self._pos
        return offset


WRITE_BACK = 32 << 20
"""Every this many bytes written, the kernel is asked to start writing them to the disk, so that the
final fsync waits for little more than the last of them."""


def _update(hasher, payload: bytes | list) -> None:
    """Hash a payload given as bytes or as a list of buffers (their concatenation)."""
    if isinstance(payload, list):
        for part in payload:
            hasher.update(part)
    else:
        hasher.update(payload)
