"""Queries of chunks: the ref at a coordinate at any snapshot, every ref of an array, their bytes
(inline, embedded, from the repository or an authorized virtual location), shard indexes and inner chunks."""

from __future__ import annotations

import os
import threading
from typing import TYPE_CHECKING, Any, Iterable, Iterator, Mapping

from zsarchive.archive.format import schema
from zsarchive.archive.format.header import has_chunk_pieces, refs_by_manifest
from zsarchive.archive.format.views import ChunkBytesValue, ChunkRefValue, ShardIndexKey, ShardIndexValue
from zsarchive.archive.read.chunkrefs import ManifestRefs, RefTimeline
from zsarchive.archive.read.invariants import check_shard_index
from zsarchive.archive.read.model import ChunkInfo, NodeInfo
from zsarchive.archive.read.nodes import NodeQueries
from zsarchive.archive.read.reader import NotFound, checked_record
from zsarchive.archive.read.refspec import chunk_coords, coords_text
from zsarchive.errors import ZSCorrupt, ZSError
from zsarchive.io.location import Location, parse_location

if TYPE_CHECKING:
    from zsarchive.archive.read.chunkdata import ChunkReader


class ChunkQueries(NodeQueries):
    """Chunk refs and chunk bytes. ``authorize``: location prefixes (e.g. ``file:///data/``), or prefix ->
    storage options, under which virtual chunk refs may be read; nothing outside them is ever opened."""

    def __init__(self, source: Any, authorize: Iterable[str] | Mapping[str, Mapping[str, Any]] = ()):
        super().__init__(source)
        self._has_chunk_data: bool | None = None
        self._has_virtual_data: bool | None = None
        self._has_shard_indexes: bool | None = None
        self._authorized = authorize
        self._chunk_reader: ChunkReader | None = None
        self._chunk_reader_lock = threading.Lock()
        self._refs = (
            ManifestRefs(self.zs)
            if refs_by_manifest(self.format_version)
            else RefTimeline(self.zs, self._history_depths, self.name)
        )

    def close(self) -> None:
        """Release the underlying reader and the connections chunk reads kept open."""
        super().close()
        if self._chunk_reader is not None:
            self._chunk_reader.close()

    @property
    def _chunks(self) -> ChunkReader:
        """The reader of chunk bytes, made on first use: a lookup of refs does not import what reading
        bytes needs (object stores, HTTP validators, repository storage)."""
        with self._chunk_reader_lock:
            if self._chunk_reader is None:
                from zsarchive.archive.read.chunkdata import ChunkReader

                self._chunk_reader = ChunkReader(
                    self.name, self._authorized, self._embedded_chunk, self._embedded_virtual
                )
            return self._chunk_reader

    @property
    def authorize(self) -> dict[str, dict[str, Any]]:
        """Location prefixes under which virtual chunk refs may be read, each with its storage options."""
        return self._chunks.authorize

    @staticmethod
    @checked_record(schema.CHUNK_REF)
    def _chunk_info(path: str, coords: tuple, value: tuple) -> ChunkInfo:
        ref = ChunkRefValue.decode(value)
        kind = schema.KIND_NAMES[ref.kind]  # an unknown kind past the names fails here, as a malformed record
        if ref.kind not in (schema.INLINE, schema.NATIVE, schema.VIRTUAL):
            raise ZSCorrupt(f"chunk ref {path} {coords_text(coords)}: unknown kind {ref.kind}")
        return ChunkInfo(
            path,
            coords,
            kind,
            ref.offset,
            ref.length,
            ref.chunk_id,
            ref.location,
            ref.checksum_etag,
            ref.checksum_last_modified,
            ref.inline if ref.kind == schema.INLINE else None,
        )

    def chunk_info(self, ref: str, path: str, coords: Iterable[int]) -> ChunkInfo:
        """:meth:`chunk_ref` as a typed value."""
        coords = chunk_coords(coords)
        node = self._array_at(ref, path)
        dims = len(node.num_chunks)
        if len(coords) != dims:
            given = f"not {len(coords)} ({coords_text(coords)})"
            raise NotFound(
                f"{self.name}: {node.path!r} at {ref!r} "
                + (
                    f"has {dims} dimension{'s' if dims != 1 else ''} and needs {dims} coordinate"
                    f"{'s' if dims != 1 else ''}, {given}"
                    if dims
                    else f"is a scalar (0 dimensions) and needs no coordinates, {given}: () in Python, \"\" on the "
                    "command line"
                )
            )
        if any(not c < n for c, n in zip(coords, node.num_chunks)):
            raise NotFound(
                f"{self.name}: coords {coords_text(coords)} are outside the chunk grid "
                f"{coords_text(node.num_chunks)} of {node.path!r} at {ref!r}"
            )
        chunk = self.array_chunk(node, coords)
        if chunk is not None:
            return chunk
        raise NotFound(
            f"{self.name}: no chunk at {coords_text(coords)} of {node.path!r} at {ref!r} "
            "(never written: it reads as the fill value)"
        )

    def chunk_ref(self, ref: str, path: str, coords: Iterable[int]) -> dict:
        """The chunk ref at ``coords`` of the array at ``path`` in REF; NotFound if there is none."""
        return self.chunk_info(ref, path, coords).as_dict()

    def array_chunk(self, node: NodeInfo, coords: tuple[int, ...]) -> ChunkInfo | None:
        """The chunk ref at ``coords`` of an array node from :meth:`node_info` or :meth:`node_infos`; None if none."""
        value = self._refs.ref(node, tuple(coords))
        return None if value is None else self._chunk_info(node.path, tuple(coords), value)

    def node_chunk_ref(self, node: dict | NodeInfo, coords: tuple[int, ...]) -> dict | None:
        """The chunk ref at ``coords`` of an array node from :meth:`node` or :meth:`ls`; None if none."""
        chunk = self.array_chunk(NodeInfo.of(node), coords)
        return None if chunk is None else chunk.as_dict()

    def chunk_refs(self, ref: str, path: str) -> Iterator[dict]:
        """Every chunk ref of the array, streamed in coordinate order."""
        return (chunk.as_dict() for chunk in self.array_chunks(self._array_at(ref, path)))

    def array_chunks(
        self, node: NodeInfo, start: Iterable[int] | None = None, stop: Iterable[int] | None = None
    ) -> Iterator[ChunkInfo]:
        """Every chunk ref of an array node from :meth:`node_info` or :meth:`node_infos`, streamed in
        coordinate order; only those with ``start <= coords < stop`` (coordinate tuples), if given."""
        bounds = (None if start is None else tuple(start), None if stop is None else tuple(stop))
        for coords, value in self._refs.refs(node, *bounds):
            yield self._chunk_info(node.path, coords, value)

    def node_chunk_refs(
        self, node: dict | NodeInfo, start: Iterable[int] | None = None, stop: Iterable[int] | None = None
    ) -> Iterator[dict]:
        """Every chunk ref of an array node from :meth:`node` or :meth:`ls`, streamed in coordinate
        order; only those with ``start <= coords < stop`` (coordinate tuples), if given."""
        return (chunk.as_dict() for chunk in self.array_chunks(NodeInfo.of(node), start, stop))

    def node_chunk_coords(self, node: dict | NodeInfo) -> Iterator[tuple[int, ...]]:
        """The coordinates of every chunk ref of an array node, streamed in order."""
        return self._refs.coords(NodeInfo.of(node))

    def chunk_data(
        self,
        ref: str,
        path: str,
        coords: Iterable[int],
        repo: str | os.PathLike | Location | None = None,
        storage_options: Mapping[str, object] | None = None,
        anon: bool = False,
    ) -> bytes:
        """The chunk's stored bytes: inline, embedded, from ``repo``'s chunks/ (a path or an object-store
        URL, reached with ``storage_options`` / ``anon``), or an authorized virtual file."""
        where = None if repo is None else parse_location(repo, storage_options, anon)
        return self.read_chunk(self.chunk_info(ref, path, coords), ref, where)

    def read_chunk(
        self,
        chunk: dict | ChunkInfo,
        ref: str,
        repo: str | os.PathLike | Location | None = None,
        zero_copy: bool = False,
    ) -> bytes | memoryview:
        """The bytes of a chunk ref from :meth:`chunk_ref` / :meth:`chunk_refs` (read at REF, for
        messages); ``repo`` is a repository path, URL or :class:`Location`. ``zero_copy``: embedded bytes
        of an uncompressed local archive come as a memoryview into its map (no copy)."""
        return self._chunks.read(ChunkInfo.of(chunk), ref, repo, zero_copy)

    def _embedded_chunk(self, chunk_id: str, start: int, stop: int, zero_copy: bool) -> bytes | memoryview | None:
        """Bytes [start, stop) of the archive's copy of a native chunk file, if it embeds one (most
        archives hold none: the header's counts say so without a lookup per chunk)."""
        if self._has_chunk_data is None:
            self._has_chunk_data = self.holds(schema.CHUNK_DATA)
        if not self._has_chunk_data:
            return None
        if has_chunk_pieces(self.format_version):
            # imported here, as the shard layouts below: a chunk ref lookup does not read bytes or shards
            from zsarchive.archive.format.pieces import read_pieces

            return read_pieces(self.zs, chunk_id, start, stop, zero_copy)
        value = self._one(schema.CHUNK_DATA, (chunk_id,))
        if value is None:
            return None
        data = ChunkBytesValue.decode(value).data
        if len(data) < stop:
            raise ZSCorrupt(f"embedded chunk {chunk_id} is shorter than offset {start} + length {stop - start}")
        return data[start:stop]

    def _embedded_virtual(self, key: tuple, start: int, stop: int, zero_copy: bool) -> bytes | memoryview | None:
        """Bytes [start, stop) of a virtual range (``(location, offset, length, etag, last_modified)``)
        the archive keeps, or None (archives before format 7 keep none: no lookup)."""
        if self._has_virtual_data is None:
            self._has_virtual_data = self.keeps_virtual_data and self.holds(schema.VIRTUAL_DATA)
        if not self._has_virtual_data:
            return None
        from zsarchive.archive.format.pieces import read_virtual

        return read_virtual(self.zs, key, start, stop, zero_copy)

    def embeds(self, chunk: dict | ChunkInfo) -> bool:
        """Whether the archive holds the chunk's bytes itself (inline, an embedded chunk file or virtual
        range), so that reading it needs neither the repository nor the source."""
        chunk = ChunkInfo.of(chunk)
        if chunk.kind == "inline":
            return True
        if chunk.kind == "native":
            return self._embedded_chunk(chunk.chunk_id, chunk.offset, chunk.offset, False) is not None
        key = (chunk.location, *chunk.whole_range, chunk.checksum_etag, chunk.checksum_last_modified)
        return self._embedded_virtual(key, chunk.offset, chunk.offset, False) is not None

    def shard_index(self, chunk: dict | ChunkInfo) -> tuple[bool, bytes] | None:
        """``(at_end, raw index bytes)`` the archive keeps of a shard (a native or virtual chunk ref), or None;
        ZSCorrupt where the archive also embeds a native shard whose bytes hold another index (a reader of
        the kept index would read each inner chunk from another's place)."""
        chunk = ChunkInfo.of(chunk)
        if chunk.kind == "inline" or not has_chunk_pieces(self.format_version):
            return None
        if self._has_shard_indexes is None:
            self._has_shard_indexes = self.holds(schema.SHARD_INDEX)
        if not self._has_shard_indexes:
            return None
        if chunk.kind == "native":
            key = ShardIndexKey(chunk.chunk_id, chunk.offset, chunk.length)
        else:
            key = ShardIndexKey(
                chunk.location, chunk.offset, chunk.length, chunk.checksum_etag, chunk.checksum_last_modified
            )
        value = self._one(schema.SHARD_INDEX, key.encode())
        if value is None:
            return None
        try:
            kept = ShardIndexValue.decode(value)
        except ValueError:
            raise ZSCorrupt(f"{self.name}: shard index record of {key.target} is malformed") from None
        check_shard_index(key, kept, lambda chunk_id, start, stop: self._embedded_chunk(chunk_id, start, stop, False))
        return tuple(kept)

    def inner_chunk(
        self,
        ref: str,
        path: str,
        coords: Iterable[int],
        inner: Iterable[int],
        repo: str | os.PathLike | Location | None = None,
    ) -> dict:
        """Where the inner chunk at ``inner`` of the shard at ``coords`` lies: the shard's chunk ref
        with ``offset`` / ``length`` narrowed to it (``empty`` True where the shard holds none).
        ``repo``: where to read the shard's index if the archive keeps neither it nor the shard."""
        from zsarchive.archive.format.shards import EMPTY, shard_layout

        node = self._array_at(ref, path)
        layout = shard_layout(node.user_data)
        if layout is None:
            raise ZSError(
                f"{self.name}: {node.path!r} is not a sharded array (no sharding_indexed "
                "codec with a bytes [+ crc32c] index)"
            )
        inner = chunk_coords(inner, "inner")
        number = layout.inner_number(inner)
        chunk = self.chunk_info(ref, path, coords)
        where = f"shard {coords_text(chunk.coords)} of {chunk.path!r} at {ref!r}"
        kept = self.shard_index(chunk)
        if kept is not None:
            raw = kept[1]
        else:
            start, stop = layout.index_span(chunk.length)
            raw = self._span_bytes(chunk, ref, start, stop, repo)
        offset, length = layout.entries(raw, chunk.length, f"{self.name}: {where}")[number]
        empty = offset == EMPTY
        return dict(
            (chunk.replace(length=0) if empty else chunk.narrowed(offset, length)).as_dict(), inner=inner, empty=empty
        )

    def _span_bytes(
        self, chunk: ChunkInfo, ref: str, start: int, stop: int, repo: str | os.PathLike | Location | None
    ) -> bytes:
        """Bytes [start, stop) of a chunk ref's value."""
        if chunk.kind == "inline":
            return chunk.inline[start:stop]
        return bytes(self.read_chunk(chunk.narrowed(start, stop - start), ref, repo))
