"""A read-only zarr-python 3 store over one snapshot of a repo archive: history back as arrays.

Keys are the ones icechunk's own store serves: ``zarr.json`` of every node (its stored user
data) and each array's chunk keys in the array's chunk key encoding. Chunk bytes come from the
archive (inline, embedded) or from where the chunk ref points (``RepoArchive.read_chunk``); a
shard's index comes from the archive where it keeps it, so an inner chunk costs one read of its
bytes; from an uncompressed local archive, embedded bytes are views into its map (no copy).
Needs the ``zarr`` extra; nothing else in zsarchive imports this module.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Iterable, Iterator, Mapping
from itertools import islice
from typing import Any, Callable

from zarr.abc.store import ByteRequest, OffsetByteRequest, RangeByteRequest, Store, SuffixByteRequest
from zarr.core.buffer import Buffer, BufferPrototype, default_buffer_prototype

from zsarchive.archive.format.chunkkeys import ChunkKeys
from zsarchive.archive.read.model import ChunkInfo, NodeInfo
from zsarchive.archive.read.repoarchive import RepoArchive
from zsarchive.archive.zarrstore.refwindow import RefWindow
from zsarchive.archive.format.shards import ShardLayout, shard_layout
from zsarchive.errors import ZSError
from zsarchive.io.location import Location, is_url, parse_location

_LIST_BATCH = 4096
"""Keys pulled from the archive per step of a listing: bounded memory for millions of chunks."""


class ArchiveStore(Store):
    """One snapshot of a repo archive as a read-only zarr store (make it with :func:`open_store`)."""

    supports_writes = False
    supports_deletes = False
    supports_listing = True

    def __init__(
        self,
        archive: RepoArchive,
        ref: str,
        repo: Location | None = None,
        *,
        owns_archive: bool = False,
        read_only: bool = True,
    ) -> None:
        if not read_only:
            raise ValueError("an archive snapshot cannot be opened for writing")
        super().__init__(read_only=True)
        self.archive = archive
        self.ref = ref
        self.snapshot_id = archive.resolve(ref)
        self.repo = repo
        self._owns_archive = owns_archive
        self._where = ref if ref == self.snapshot_id else f"{ref} (snapshot {self.snapshot_id})"
        # Blocking I/O over a network goes to threads so that zarr's concurrent gets overlap;
        # local reads are cheaper run in place than handed to a thread.
        self._threaded = (
            is_url(archive.name)
            or (repo is not None and not repo.is_local)
            or any(is_url(p) for p in archive.authorize)
        )
        self._meta: dict[str, bytes] = {}
        self._nodes: dict[str, NodeInfo] = {}
        self._arrays: dict[str, ChunkKeys] = {}
        self._refs: dict[str, RefWindow] = {}
        self._layouts: dict[str, ShardLayout | None] = {}
        for node in archive.node_infos(f"snapshot:{self.snapshot_id}"):
            path = node.path.strip("/")
            self._nodes[path] = node
            self._meta[f"{path}/zarr.json" if path else "zarr.json"] = node.user_data
            if node.is_array:
                self._arrays[path] = ChunkKeys(node.path, node.zarr_json, node.num_chunks, f"{path}/" if path else "")
                self._refs[path] = RefWindow(archive, node)
                self._layouts[node.path] = shard_layout(node.user_data)

    # -- plumbing ----------------------------------------------------------------------------

    def __eq__(self, other: object) -> bool:
        # the same snapshot of the same archive file, whichever reader opened it
        return (
            isinstance(other, ArchiveStore)
            and other.archive.name == self.archive.name
            and other.snapshot_id == self.snapshot_id
            and other.repo == self.repo
        )

    def __hash__(self) -> int:
        return hash((self.archive.name, self.snapshot_id, str(self.repo)))

    def __reduce__(self) -> tuple:
        # a copy in another process opens the archive again (an open file does not travel)
        return (open_store, (self.archive.name, f"snapshot:{self.snapshot_id}", self.repo, self.archive.authorize))

    def __repr__(self) -> str:
        return f"ArchiveStore({self.archive.name!r}, ref={self.ref!r}, snapshot={self.snapshot_id!r})"

    def with_read_only(self, read_only: bool = False) -> ArchiveStore:
        """Another store on the same snapshot; an archive is immutable, so only read-only exists
        (``read_only=False`` raises NotImplementedError, as zarr's stores without writes do)."""
        if not read_only:
            return super().with_read_only(read_only)
        return ArchiveStore(self.archive, self.ref, self.repo)

    @property
    def supports_consolidated_metadata(self) -> bool:
        """No: every node's metadata is one lookup already (icechunk's store says the same)."""
        return False

    def close(self) -> None:
        """Close the store, and the archive if :func:`open_store` opened it."""
        super().close()
        if self._owns_archive:
            self.archive.close()

    async def _run(self, fn: Callable, *args: Any) -> Any:
        if self._threaded:
            return await asyncio.to_thread(fn, *args)
        return fn(*args)

    # -- keys --------------------------------------------------------------------------------

    def _locate(self, key: str) -> tuple[ChunkKeys, tuple[int, ...]] | None:
        """The array and chunk coordinates a chunk key names, or None."""
        cut = len(key)
        while True:
            # try each "/" from the right as the end of an array's path ("" for a root array)
            cut = key.rfind("/", 0, cut)
            array = self._arrays.get(key[:cut] if cut > 0 else "")
            if array is not None:
                coords = array.coords(key[len(array.base) :])
                if coords is not None:
                    return array, coords
            if cut <= 0:
                return None

    def _chunk(self, key: str) -> ChunkInfo | None:
        located = self._locate(key)
        return None if located is None else self._ref(*located)

    def _ref(self, array: ChunkKeys, coords: tuple[int, ...]) -> ChunkInfo | None:
        return self._refs[array.path.strip("/")].get(coords)

    def _read(self, key: str, byte_range: ByteRequest | None) -> bytes | memoryview | None:
        meta = self._meta.get(key)
        if meta is not None:
            start, stop = _span(byte_range, len(meta))
            return meta[start:stop]
        located = self._locate(key)
        chunk = None if located is None else self._ref(*located)
        if chunk is None:
            return None
        start, stop = _span(byte_range, chunk.length)
        if chunk.kind == "inline":
            return chunk.inline[start:stop]
        if (start, stop) != (0, chunk.length):
            layout = self._layouts.get(located[0].path)
            if layout is not None and (start, stop) == layout.index_span(chunk.length):
                kept = self.archive.shard_index(chunk)
                if kept is not None and kept[0] == layout.at_end and len(kept[1]) == layout.index_size:
                    return kept[1]  # the shard's index, kept in the archive: no read of the shard
            # read just the range: an inner chunk or an index the archive does not keep
            chunk = chunk.narrowed(start, stop - start)
        return self.archive.read_chunk(chunk, self._where, self.repo, zero_copy=True)

    # -- the Store API -----------------------------------------------------------------------

    async def get(
        self, key: str, prototype: BufferPrototype | None = None, byte_range: ByteRequest | None = None
    ) -> Buffer | None:
        """The value at ``key`` (or a byte range of it); None if the snapshot has no such key."""
        data = await self._run(self._read, key, byte_range)
        if data is None:
            return None
        return (prototype or default_buffer_prototype()).buffer.from_bytes(data)

    async def get_partial_values(
        self, prototype: BufferPrototype, key_ranges: Iterable[tuple[str, ByteRequest | None]]
    ) -> list[Buffer | None]:
        """Several values or ranges at once, in order."""
        return list(await asyncio.gather(*(self.get(key, prototype, rng) for key, rng in key_ranges)))

    async def exists(self, key: str) -> bool:
        """Whether ``key`` is a node's metadata or a chunk that has a ref in this snapshot."""
        return key in self._meta or await self._run(self._chunk, key) is not None

    async def getsize(self, key: str) -> int:
        """Size of a value in bytes, from the chunk ref alone (no chunk bytes are read)."""
        meta = self._meta.get(key)
        if meta is not None:
            return len(meta)
        chunk = await self._run(self._chunk, key)
        if chunk is None:
            raise FileNotFoundError(key)
        return chunk.length

    async def set(self, key: str, value: Buffer) -> None:
        """Refused: the store is read-only."""
        self._check_writable()

    async def set_if_not_exists(self, key: str, value: Buffer) -> None:
        """Refused: the store is read-only."""
        self._check_writable()

    async def delete(self, key: str) -> None:
        """Refused: the store is read-only."""
        self._check_writable()

    async def delete_dir(self, prefix: str) -> None:
        """Refused: the store is read-only."""
        self._check_writable()

    async def clear(self) -> None:
        """Refused: the store is read-only."""
        self._check_writable()

    async def _stream(self, keys: Iterator[str]) -> AsyncIterator[str]:
        """Yield keys from a blocking iterator a batch at a time (off the event loop if remote)."""
        while True:
            batch = await self._run(lambda: list(islice(keys, _LIST_BATCH)))
            for key in batch:
                yield key
            if len(batch) < _LIST_BATCH:
                return

    def _keys(self, prefix: str) -> Iterator[str]:
        for path, node in self._nodes.items():
            meta = f"{path}/zarr.json" if path else "zarr.json"
            if meta.startswith(prefix):
                yield meta
            array = self._arrays.get(path)
            if array is not None and (array.base.startswith(prefix) or prefix.startswith(array.base)):
                for coords in self.archive.node_chunk_coords(node):
                    key = array.key(coords)
                    if key.startswith(prefix):
                        yield key

    def list(self) -> AsyncIterator[str]:
        """Every key of the snapshot, streamed (chunk keys in coordinate order)."""
        return self._stream(self._keys(""))

    def list_prefix(self, prefix: str) -> AsyncIterator[str]:
        """Every key that starts with ``prefix``, streamed."""
        return self._stream(self._keys(prefix))

    def _children(self, prefix: str) -> Iterator[str]:
        base = prefix.rstrip("/")
        base = base + "/" if base else ""
        names = set()
        for meta in self._meta:
            if meta.startswith(base):
                names.add(meta[len(base) :].split("/", 1)[0])
        here = self._arrays.get(base[:-1] if base else "")
        if here is not None and here.default:
            names.add("c")  # icechunk lists "c" under every array, chunks or not
        yield from sorted(names)
        for path, array in self._arrays.items():
            if not base.startswith(array.base):
                continue  # its chunk keys lie below a node name listed above, or elsewhere
            if base == array.base and array.default and array.sep == "/":
                continue  # all its chunk keys lie under "c", already listed: no scan of millions
            previous = None
            for coords in self.archive.node_chunk_coords(self._nodes[path]):
                key = array.key(coords)
                if key.startswith(base):
                    name = key[len(base) :].split("/", 1)[0]
                    # chunks stream in coordinate order: repeats of a name are adjacent
                    if name != previous and name not in names:
                        yield name
                    previous = name

    def list_dir(self, prefix: str) -> AsyncIterator[str]:
        """The names directly under ``prefix`` (keys and key "directories"), streamed."""
        return self._stream(self._children(prefix))


def _span(byte_range: ByteRequest | None, size: int) -> tuple[int, int]:
    """``[start, stop)`` of a zarr byte request on a value of ``size`` bytes, clipped to it."""
    if byte_range is None:
        return 0, size
    if isinstance(byte_range, RangeByteRequest):
        start, stop = byte_range.start, byte_range.end
    elif isinstance(byte_range, OffsetByteRequest):
        start, stop = byte_range.offset, size
    elif isinstance(byte_range, SuffixByteRequest):
        start, stop = size - byte_range.suffix, size
    else:
        raise TypeError(f"Unexpected byte_range, got {byte_range!r}")  # zarr's own stores' words
    start = min(max(start, 0), size)
    return start, min(max(stop, start), size)


def open_store(
    archive: RepoArchive | str | os.PathLike,
    ref: str = "main",
    repo: str | os.PathLike | Location | None = None,
    authorize: Iterable[str] | Mapping[str, Mapping[str, Any]] = (),
    storage_options: Mapping[str, object] | None = None,
    anon: bool = False,
) -> ArchiveStore:
    """Open the snapshot REF names (branch, tag, snapshot id, with any ``~N``, ``^`` or ``@TIME``) as a read-only zarr store.

    ``archive``: a path, an http(s) URL or an open :class:`RepoArchive`; ``repo``: where native
    chunks live (a repository path or URL, reached with ``storage_options`` / ``anon``);
    ``authorize``: virtual chunk location prefixes to follow.
    """
    authorize = dict(authorize) if isinstance(authorize, Mapping) else list(authorize)
    repo = None if repo is None else parse_location(repo, storage_options, anon)
    if isinstance(archive, RepoArchive):
        if authorize:
            raise ZSError("give authorize= to the RepoArchive, not open_store, when passing one")
        return ArchiveStore(archive, ref, repo)
    opened = RepoArchive(archive, authorize=authorize)
    try:
        return ArchiveStore(opened, ref, repo, owns_archive=True)
    except BaseException:
        opened.close()
        raise
