"""The typed values the reading side passes around: a node of a snapshot and a chunk ref of an array.

Queries, the zarr store, checkout and the views work on these; :class:`~zsarchive.archive.read.repoarchive.
RepoArchive`'s commands turn them into the dicts they document (``as_dict``), and take those dicts back
(``of``) where a caller hands one in. They are plain classes with slots, not dataclasses: a dataclass
costs a cold ``zs chunk`` about a millisecond to define, and they are not frozen because millions of
chunk refs stream through here and a frozen value is several times slower to make: treat them as read-only."""

from __future__ import annotations

from typing import Any

from zsarchive.typedtuple import TypedTuple


class ManifestSpan(TypedTuple):
    """A manifest an array's chunk refs are in (format 1), and the extents of the chunks it holds:
    ``(from, to)`` per dimension, from inclusive, to exclusive."""

    manifest_id: str
    extents: tuple[tuple[int, int], ...]


class _Value:
    """Equality and repr over the slots, and a changed copy, as a dataclass has them."""

    __slots__ = ()

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return all(getattr(self, name) == getattr(other, name) for name in self.__slots__)

    __hash__ = None  # mutable, equal by value: as a dataclass with eq

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(f'{n}={getattr(self, n)!r}' for n in self.__slots__)})"

    def replace(self, **changes: Any):
        """A copy with the named fields changed."""
        copy = object.__new__(type(self))
        for name in self.__slots__:
            setattr(copy, name, changes.pop(name) if name in changes else getattr(self, name))
        if changes:
            raise TypeError(f"{type(self).__name__} has no field {next(iter(changes))!r}")
        return copy


class NodeInfo(_Value):
    """A group or array of one snapshot. ``snapshot_id`` and ``since`` (the snapshot its chunk ref
    timeline starts at, format 2 on) say where the array's chunk refs are found. ``node_type`` is
    ``"group"`` or ``"array"``; ``zarr_json`` the parsed zarr.json (the writer's: never checked),
    ``user_data`` its bytes exactly as stored."""

    __slots__ = (
        "path",
        "node_type",
        "id",
        "zarr_json",
        "user_data",
        "snapshot_id",
        "shape",
        "num_chunks",
        "dimension_names",
        "dtype",
        "chunk_shape",
        "manifests",
        "since",
    )

    def __init__(
        self,
        path: str,
        node_type: str,
        id: str,
        zarr_json: Any,
        user_data: bytes,
        snapshot_id: str,
        shape: list[int] | None = None,
        num_chunks: list[int] | None = None,
        dimension_names: list | None = None,
        dtype: Any = None,
        chunk_shape: list[int] | None = None,
        manifests: tuple[ManifestSpan, ...] = (),
        since: str | None = None,
    ) -> None:
        self.path, self.node_type, self.id, self.zarr_json, self.user_data = path, node_type, id, zarr_json, user_data
        self.snapshot_id, self.shape, self.num_chunks, self.dimension_names = (
            snapshot_id,
            shape,
            num_chunks,
            dimension_names,
        )
        self.dtype, self.chunk_shape, self.manifests, self.since = dtype, chunk_shape, manifests, since

    @property
    def is_array(self) -> bool:
        return self.node_type == "array"

    def as_dict(self) -> dict:
        """The node as ``RepoArchive.ls`` and ``node`` give it (arrays: shape, chunks and where their refs are)."""
        out: dict[str, Any] = {
            "path": self.path,
            "node_type": self.node_type,
            "id": self.id,
            "zarr_json": self.zarr_json,
            "user_data": self.user_data,
        }
        if self.is_array:
            out.update(
                shape=self.shape,
                num_chunks=self.num_chunks,
                dimension_names=self.dimension_names,
                dtype=self.dtype,
                chunk_shape=self.chunk_shape,
                manifests=[{"id": m.manifest_id, "extents": [list(e) for e in m.extents]} for m in self.manifests],
                snapshot_id=self.snapshot_id,
                since=self.since,
            )
        return out

    @classmethod
    def of(cls, node: NodeInfo | dict) -> NodeInfo:
        """``node`` itself, or the node a dict from :meth:`as_dict` describes."""
        if isinstance(node, NodeInfo):
            return node
        return cls(
            node["path"],
            node["node_type"],
            node["id"],
            node["zarr_json"],
            node["user_data"],
            node.get("snapshot_id"),
            node.get("shape"),
            node.get("num_chunks"),
            node.get("dimension_names"),
            node.get("dtype"),
            node.get("chunk_shape"),
            tuple(ManifestSpan(m["id"], tuple(tuple(e) for e in m["extents"])) for m in node.get("manifests", ())),
            node.get("since"),
        )


class ChunkInfo(_Value):
    """The ref of one chunk of an array: by ``kind`` (``"inline"``, ``"native"``, ``"virtual"``) its bytes,
    the native chunk file's id or the virtual location, the range in it and the checksums it is read under.
    ``ref_range``: of a ref narrowed to part of its range (an inner chunk of a shard, its index), the
    ``(offset, length)`` of the whole ref (an archive keeps a virtual ref's bytes by its whole range)."""

    __slots__ = (
        "path",
        "coords",
        "kind",
        "offset",
        "length",
        "chunk_id",
        "location",
        "checksum_etag",
        "checksum_last_modified",
        "inline",
        "ref_range",
    )

    def __init__(
        self,
        path: str,
        coords: tuple[int, ...],
        kind: str,
        offset: int,
        length: int,
        chunk_id: str | None = None,
        location: str | None = None,
        checksum_etag: str | None = None,
        checksum_last_modified: int | None = None,
        inline: bytes | None = None,
        ref_range: tuple[int, int] | None = None,
    ) -> None:
        self.path, self.coords, self.kind, self.offset, self.length = path, coords, kind, offset, length
        self.chunk_id, self.location, self.checksum_etag = chunk_id, location, checksum_etag
        self.checksum_last_modified, self.inline, self.ref_range = checksum_last_modified, inline, ref_range

    def narrowed(self, start: int, length: int) -> ChunkInfo:
        """The same ref, ``length`` bytes from ``start`` within its range (an inner chunk, an index)."""
        if self.kind == "inline":
            return self.replace(inline=self.inline[start : start + length], length=length)
        return self.replace(
            offset=self.offset + start, length=length, ref_range=self.ref_range or (self.offset, self.length)
        )

    @property
    def whole_range(self) -> tuple[int, int]:
        """``(offset, length)`` of the whole ref (of a narrowed one, the range it was narrowed from)."""
        return self.ref_range or (self.offset, self.length)

    def as_dict(self) -> dict:
        """The ref as ``RepoArchive.chunk_ref`` gives it (``inline``: only for inline bytes; ``ref_range``:
        only for a ref narrowed to part of its range)."""
        out: dict[str, Any] = {
            "path": self.path,
            "coords": list(self.coords),
            "kind": self.kind,
            "offset": self.offset,
            "length": self.length,
            "chunk_id": self.chunk_id,
            "location": self.location,
            "checksum_etag": self.checksum_etag,
            "checksum_last_modified": self.checksum_last_modified,
        }
        if self.kind == "inline":
            out["inline"] = self.inline
        if self.ref_range is not None:
            out["ref_range"] = list(self.ref_range)
        return out

    @classmethod
    def of(cls, chunk: ChunkInfo | dict) -> ChunkInfo:
        """``chunk`` itself, or the ref a dict from :meth:`as_dict` describes."""
        if isinstance(chunk, ChunkInfo):
            return chunk
        whole = chunk.get("ref_range")
        return cls(
            chunk["path"],
            tuple(chunk["coords"]),
            chunk["kind"],
            chunk["offset"],
            chunk["length"],
            chunk.get("chunk_id"),
            chunk.get("location"),
            chunk.get("checksum_etag"),
            chunk.get("checksum_last_modified"),
            chunk.get("inline"),
            None if whole is None else (whole[0], whole[1]),
        )
