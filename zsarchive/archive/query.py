"""``RepoArchive``: answer questions about an exported repository from the archive alone.

Every answer is a handful of ``ZS.search(prefix=...)`` lookups or one range scan, so a cold
lookup reads only the index path and the data block of each record family it touches, locally
or over HTTP through the same reader.
"""

from __future__ import annotations

import collections
import functools
import json
import os
from typing import Any, Iterable, Iterator, Mapping

from zsarchive.archive import schema as S
from zsarchive.archive.chunkdata import ChunkReader, coords_text, is_url
from zsarchive.archive.chunkpieces import read_pieces
from zsarchive.archive.chunkrefs import ManifestRefs, RefTimeline
from zsarchive.archive.fragments import Chain, Member, open_chain
from zsarchive.archive.refspec import RefSpec, TimeBound, parse_ref, time_bound
from zsarchive.archive.shards import EMPTY, shard_layout, virtual_index_key
from zsarchive.errors import ZSCorrupt, ZSError
from zsarchive.icechunk.model import format_time
from zsarchive.io.location import Location, parse_location
from zsarchive.limits import load_json
from zsarchive.zs.reader import ZS

_HISTORIES = 64
"""Snapshot histories a reader keeps (resolving format 2 chunk refs walks a snapshot's history once)."""


def _checked(family: bytes):
    """Turn a record value of the wrong shape (from a damaged or hostile archive) into ZSCorrupt."""
    def wrap(build):
        @functools.wraps(build)
        def checked(*args):
            try:
                return build(*args)
            except (ValueError, TypeError, IndexError, KeyError, AttributeError, OverflowError, RecursionError) as exc:
                raise ZSCorrupt(f"archive {S.FAMILY_NAMES[family]} record {args[:-1]!r} has a malformed "
                                f"value: {exc}") from None
        return checked
    return wrap


_MALFORMED = (ValueError, TypeError, IndexError, KeyError, AttributeError, OverflowError, RecursionError)
"""What decoding a record of the wrong shape raises before any check of ours names it."""


def _guarded(method):
    """A query whose every failure is a ZSError: a record of the wrong shape (from a damaged or hostile
    archive) becomes ZSCorrupt naming the archive, also while a streamed answer is being read."""
    @functools.wraps(method)
    def guarded(self, *args, **kwargs):
        try:
            result = method(self, *args, **kwargs)
        except ZSError:
            raise
        except _MALFORMED as exc:
            raise _malformed(self, exc) from None
        return _guarded_stream(self, result) if isinstance(result, Iterator) else result
    return guarded


def _guarded_stream(archive: "RepoArchive", items: Iterator) -> Iterator:
    try:
        yield from items
    except ZSError:
        raise
    except _MALFORMED as exc:
        raise _malformed(archive, exc) from None


def _malformed(archive: "RepoArchive", exc: BaseException) -> ZSCorrupt:
    return ZSCorrupt(f"{archive.name}: a record of the wrong shape ({type(exc).__name__}: {exc})")


class NotFound(ZSError, LookupError):
    """A ref, path, chunk or snapshot that the archive does not have."""


def archive_metadata(zs: ZS | Chain) -> dict | None:
    """The archive marker in a ZS file's header metadata, or None when it is not a repo archive."""
    marker = zs.metadata.get(S.METADATA_KEY) if isinstance(zs.metadata, dict) else None
    return marker if isinstance(marker, dict) else None


def header_summary(zs: ZS) -> dict | None:
    """The archive header record of ``zs`` as a JSON-ready dict, or None if ``zs`` is no archive."""
    if archive_metadata(zs) is None:
        return None
    for rec in zs.search(prefix=S.key_prefix(S.HEADER)):
        _, _, value = S.split(rec)
        try:
            format_version, spec_version, export_time, exporter, counts = value[:5]
            return {"format_version": format_version, "source_spec_version": spec_version,
                    "export_time": format_time(export_time), "exporter": exporter,
                    "counts": {name: count for name, count in counts}}
        except (ValueError, TypeError) as exc:
            raise ZSCorrupt(f"{zs_name(zs)}: malformed archive header record: {exc}") from None
    raise ZSCorrupt(f"{zs_name(zs)}: archive has no header record")


def zs_name(zs: ZS) -> str:
    """The file name or URL a ZS reads (for messages)."""
    return str(getattr(zs, "name", None) or getattr(getattr(zs, "transport", None), "name", "archive"))


def open_archive(source: Any) -> tuple[ZS | Chain, str, int]:
    """The reader of a repo archive (a ZS, a path or a URL; a fragment read with the archives it builds
    on), the name it goes by and its format version; a one-line error for a file that is no archive,
    or of a format newer than this zsarchive reads."""
    if isinstance(source, ZS):
        zs = source
    elif is_url(source):
        zs = ZS(url=source)
    else:
        path = os.fspath(source)
        zs = ZS(path[len("file://"):] if path.startswith("file://") else path)
    name = zs_name(zs) if isinstance(source, ZS) else str(source)
    try:
        marker = archive_metadata(zs)
        if marker is None:
            raise ZSError(f"{name}: a ZS file but not a repo archive (no {S.METADATA_KEY!r} "
                          "object in its metadata); make one with `zs export`")
        version = marker.get("format_version")
        if not isinstance(version, int) or version > S.FORMAT_VERSION:
            raise ZSError(f"{name}: archive format version {version!r} is newer than this "
                          f"zsarchive reads ({S.FORMAT_VERSION}): upgrade zsarchive")
        return (open_chain(zs, name) if marker.get("fragment") is not None else zs), name, version
    except BaseException:
        zs.close()
        raise


def records_under(zs: ZS | Chain, family: bytes, key: tuple = ()) -> Iterator[tuple[tuple, tuple]]:
    """(key, value) of every record of ``family`` whose key starts with the elements ``key``."""
    n = len(key)
    for rec in zs.search(prefix=S.key_prefix(family, key)):
        _, k, v = S.split(rec)
        # the bytes of text "a" are a prefix of those of "a\0b" (NUL is escaped as 00 FF): compare
        if k[:n] == key:
            yield k, v


class RepoArchive:
    """Queries over a repo archive (a local path or an ``http(s)://`` URL).

    ``authorize``: location prefixes (e.g. ``file:///data/``) under which virtual chunk refs may be
    read by :meth:`chunk_data`; nothing outside them is ever opened.
    """

    def __init__(self, source: Any, authorize: Iterable[str] | Mapping[str, Mapping[str, Any]] = ()):
        self.zs, self.name, version = open_archive(source)
        self._snapshots: dict[str, tuple] = {}
        self._has_chunk_data: bool | None = None
        self._has_shard_indexes: bool | None = None
        self._chunks = ChunkReader(self.name, authorize, self._embedded_chunk)
        self.format_version = version
        self._depths: collections.OrderedDict[str, dict[str, int]] = collections.OrderedDict()
        self._refs = ManifestRefs(self.zs) if version < 2 else RefTimeline(self.zs, self._history_depths, self.name)

    # -- plumbing -------------------------------------------------------------------------

    def close(self) -> None:
        """Release the underlying reader and the connections chunk reads kept open."""
        self.zs.close()
        self._chunks.close()

    @property
    def authorize(self) -> dict[str, dict[str, Any]]:
        """Location prefixes under which virtual chunk refs may be read, each with its storage options."""
        return self._chunks.authorize

    def __enter__(self) -> "RepoArchive":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _records(self, family: bytes, key: tuple = ()) -> Iterator[tuple[tuple, tuple]]:
        return records_under(self.zs, family, key)

    def _range(self, family: bytes, start: tuple, stop: tuple | None) -> Iterator[tuple[tuple, tuple]]:
        stop_key = S.key_prefix(family, stop) if stop is not None else bytes((family[0] + 1,))
        for rec in self.zs.search(start=S.key_prefix(family, start), stop=stop_key):
            _, k, v = S.split(rec)
            yield k, v

    def _one(self, family: bytes, key: tuple) -> tuple | None:
        for k, v in self._records(family, key):
            if len(k) == len(key):
                return v
        return None

    def header(self) -> dict:
        """The archive header record: format version, source spec version, export time, counts (of a
        fragment: of its chain's view, as a full export's)."""
        summary = header_summary(self.zs)
        assert summary is not None  # checked in __init__
        return summary

    def chain(self) -> list[dict]:
        """The archives read as this one, newest first: one for a full archive, a fragment and its
        bases for a fragment (location, format version, export time, SHA-256, time range covered)."""
        members = self.zs.members if isinstance(self.zs, Chain) else [Member(self.zs, self.name, None, ())]
        out = []
        for member in members:
            header = header_summary(member.zs) or {}
            entry = {"location": member.location, "format_version": header.get("format_version"),
                     "export_time": header.get("export_time"), "sha256": member.zs.data_sha256.hex()}
            if member.info is not None:
                entry["covers"] = [format_time(t) for t in member.info.covers]
                entry["records"] = {S.FAMILY_NAMES[tag]: h.records for tag, h in sorted(member.info.holdings.items())}
                entry["tombstones"] = sum(h.tombstones for h in member.info.holdings.values())
            out.append(entry)
        return out

    def repo_facts(self) -> dict[str, Any]:
        """Repository-level facts: spec_version, metadata, config, status, feature_flags."""
        return {k[0]: load_json(v[0], f"{self.name}: archive repo record {k[0]!r}") for k, v in self._records(S.REPO)}

    # -- refs and snapshots ------------------------------------------------------------------

    def refs(self) -> list[dict]:
        """Branches, tags and deleted tags: ``{"type", "name", "snapshot_id"}`` (no id for deleted tags)."""
        out = []
        for (kind, name), value in self._records(S.REFS):
            if kind == "deleted_tag":
                out.append({"type": kind, "name": name})
            else:
                out.append({"type": kind, "name": name, "snapshot_id": value[0]})
        return out

    def _snapshot_value(self, snapshot_id: str) -> tuple | None:
        cached = self._snapshots.get(snapshot_id)
        if cached is None:
            cached = self._one(S.SNAPSHOT, (snapshot_id,))
            if cached is not None:
                self._snapshots[snapshot_id] = cached
        return cached

    @staticmethod
    @_checked(S.SNAPSHOT)
    def _snapshot_dict(snapshot_id: str, value: tuple) -> dict:
        parent, flushed_at, message, metadata = value[:4]
        return {"id": snapshot_id, "parent_id": parent, "flushed_at": format_time(flushed_at),
                "message": message, "metadata": json.loads(metadata)}

    def snapshot(self, snapshot_id: str) -> dict:
        """One snapshot: id, parent_id, flushed_at, message, metadata, manifests."""
        value = self._snapshot_value(snapshot_id)
        if value is None:
            raise NotFound(f"{self.name}: no snapshot {snapshot_id!r}")
        out = self._snapshot_dict(snapshot_id, value)
        out["manifests"] = [{"id": m, "size_bytes": size, "num_chunk_refs": n} for m, size, n in value[4]]
        return out

    def _lookup_ref(self, spec: RefSpec, quiet: bool = False) -> str | None:
        kinds = (spec.kind,) if spec.kind else ("branch", "tag", "snapshot")
        for kind in kinds:
            if kind == "snapshot":
                if self._snapshot_value(spec.name) is not None:
                    return spec.name
                continue
            value = self._one(S.REFS, (kind, spec.name))
            if value is not None:
                return value[0]
        if quiet:
            return None
        if spec.kind in (None, "tag") and self._one(S.REFS, ("deleted_tag", spec.name)) is not None:
            raise NotFound(f"{self.name}: tag {spec.name!r} was deleted")
        what = f"{spec.kind} " if spec.kind else "branch, tag or snapshot "
        raise NotFound(f"{self.name}: unknown {what}{spec.name!r}")

    def resolve(self, ref: str) -> str:
        """Snapshot id a REF names (``[branch:|tag:|snapshot:]NAME[@TIME]``)."""
        if "@" in ref:  # a ref whose name holds "@" wins over reading the text after it as a time
            literal = self._lookup_ref(parse_ref(ref, with_time=False), quiet=True)
            if literal is not None:
                return literal
        spec = parse_ref(ref)
        snapshot_id = self._lookup_ref(spec)
        if spec.as_of is None:
            return snapshot_id
        first = None
        for sid, value in self._ancestry(snapshot_id):
            if value[1] <= spec.as_of:
                return sid
            first = value[1]
        raise NotFound(f"{self.name}: no snapshot in the history of {spec.name!r} was flushed at or before "
                       f"{format_time(spec.as_of)} (its first commit was flushed at {format_time(first)})")

    def _ancestry(self, snapshot_id: str) -> Iterator[tuple[str, tuple]]:
        current: str | None = snapshot_id
        seen: set[str] = set()
        while current is not None:
            if current in seen:
                raise ZSCorrupt(f"{self.name}: the history of snapshot {snapshot_id} loops at snapshot {current}")
            seen.add(current)
            value = self._snapshot_value(current)
            if value is None:
                raise ZSCorrupt(f"{self.name}: snapshot {current} is in a history but has no record")
            yield current, value
            current = value[0]

    def _history_depths(self, snapshot_id: str) -> dict[str, int]:
        """Every snapshot in the history of one -> its distance from it (0: itself); the history ends at
        the first snapshot without a parent, or whose parent the archive does not hold."""
        depths = self._depths.get(snapshot_id)
        if depths is None:
            depths = {}
            current: str | None = snapshot_id
            while current is not None and current not in depths:  # a loop ends where it closes
                value = self._snapshot_value(current)
                if value is None:
                    break
                depths[current] = len(depths)
                current = value[0]
            self._depths[snapshot_id] = depths
            while len(self._depths) > _HISTORIES:
                self._depths.popitem(last=False)
        return depths

    def ancestry(self, ref: str) -> list[dict]:
        """The history of REF, newest first."""
        return [self._snapshot_dict(sid, value) for sid, value in self._ancestry(self.resolve(ref))]

    def log(self, ref: str | None = None, since: TimeBound = None, until: TimeBound = None) -> list[dict]:
        """Snapshots (of REF's history, or all) flushed in ``[since, until]``, newest first.

        Bounds are inclusive: TIME text (a bare date covers its whole day), an aware datetime, or
        microseconds since 1970 UTC.
        """
        since, until = time_bound(since, False), time_bound(until, True)
        if ref is not None:
            items = list(self._ancestry(self.resolve(ref)))
            earliest = min((v[1] for _, v in items), default=None)
            chosen = [(sid, v) for sid, v in items
                      if (since is None or v[1] >= since) and (until is None or v[1] <= until)]
        else:
            first = next(self._records(S.SNAPSHOT_TIME), None)
            earliest = first[0][0] if first else None
            # A range scan of the by-time family reads only the blocks of that period.
            window = list(self._range(S.SNAPSHOT_TIME, () if since is None else (since,),
                                      None if until is None else (until + 1,)))
            chosen = [(sid, self._snapshot_value(sid)) for (_, sid), _ in reversed(window)]
        if until is not None and earliest is not None and until < earliest:
            raise NotFound(f"{self.name}: {format_time(until)} is before the first commit "
                           f"({format_time(earliest)})")
        if ref is not None:
            chosen.sort(key=lambda item: item[1][1], reverse=True)
        return [self._snapshot_dict(sid, value) for sid, value in chosen]

    # -- nodes -------------------------------------------------------------------------------

    @staticmethod
    @_checked(S.NODE)
    def _node_dict(snapshot_id: str, components: tuple, value: tuple) -> dict:
        node_id, node_type, user_data, shape, names, manifests = value[:6]
        out: dict[str, Any] = {"path": S.path_of(components),
                               "node_type": "array" if node_type == S.ARRAY else "group",
                               "id": node_id, "zarr_json": json.loads(user_data), "user_data": user_data}
        if node_type == S.ARRAY:
            out["shape"] = [dim[0] for dim in shape]
            out["num_chunks"] = [dim[2] if dim[2] is not None else
                                 (-(-dim[0] // dim[1]) if dim[1] else 0) for dim in shape]
            out["dimension_names"] = None if names is None else list(names)
            out["manifests"] = [{"id": m, "extents": [list(e) for e in ext]} for m, ext in manifests]
            # where its chunk refs are found in a format 2 archive (the timeline from "since" on)
            out["snapshot_id"], out["since"] = snapshot_id, value[6] if len(value) > 6 else None
        return out

    def ls(self, ref: str) -> list[dict]:
        """Every node of the snapshot REF names, in the archive's order: path components compared one by one
        (``/a``, ``/a/b``, ``/a-b``), whatever order the repository's snapshot file used."""
        sid = self.resolve(ref)
        return [self._node_dict(sid, k[1], v) for k, v in self._records(S.NODE, (sid,))]

    def _node_at(self, snapshot_id: str, path: str, ref: str) -> dict:
        components = S.path_components(path if path.startswith("/") else "/" + path)
        value = self._one(S.NODE, (snapshot_id, components))
        if value is None:
            raise NotFound(f"{self.name}: no node {S.path_of(components)!r} at {ref!r}")
        return self._node_dict(snapshot_id, components, value)

    def node(self, ref: str, path: str) -> dict:
        """The group or array at ``path`` in the snapshot REF names."""
        return self._node_at(self.resolve(ref), path, ref)

    def _array_at(self, ref: str, path: str) -> dict:
        node = self.node(ref, path)
        if node["node_type"] != "array":
            raise NotFound(f"{self.name}: {node['path']!r} at {ref!r} is a group, not an array")
        return node

    # -- chunks ------------------------------------------------------------------------------

    @staticmethod
    @_checked(S.CHUNK_REF)
    def _chunk_dict(path: str, coords: tuple, value: tuple) -> dict:
        kind = value[0]
        out: dict[str, Any] = {"path": path, "coords": list(coords), "kind": S.KIND_NAMES[kind],
                               "offset": 0, "length": 0, "chunk_id": None, "location": None,
                               "checksum_etag": None, "checksum_last_modified": None}
        if kind == S.INLINE:
            out["length"] = len(value[1])
            out["inline"] = value[1]
        elif kind == S.NATIVE:
            out["chunk_id"], out["offset"], out["length"] = value[1], value[2], value[3]
        elif kind == S.VIRTUAL:
            (out["location"], out["offset"], out["length"], out["checksum_etag"],
             out["checksum_last_modified"]) = value[1:6]
        else:
            raise ZSCorrupt(f"chunk ref {path} {coords_text(coords)}: unknown kind {kind}")
        return out

    def chunk_ref(self, ref: str, path: str, coords: Iterable[int]) -> dict:
        """The chunk ref at ``coords`` of the array at ``path`` in REF; NotFound if there is none."""
        coords = tuple(int(c) for c in coords)
        node = self._array_at(ref, path)
        if len(coords) != len(node["num_chunks"]) or any(
                not 0 <= c < n for c, n in zip(coords, node["num_chunks"])):
            raise NotFound(f"{self.name}: coords {coords_text(coords)} are outside the chunk grid "
                           f"{coords_text(node['num_chunks'])} of {node['path']!r} at {ref!r}")
        chunk = self.node_chunk_ref(node, coords)
        if chunk is not None:
            return chunk
        raise NotFound(f"{self.name}: no chunk at {coords_text(coords)} of {node['path']!r} at {ref!r} "
                       "(never written: it reads as the fill value)")

    def node_chunk_ref(self, node: dict, coords: tuple[int, ...]) -> dict | None:
        """The chunk ref at ``coords`` of an array node from :meth:`node` or :meth:`ls`; None if none."""
        value = self._refs.ref(node, tuple(coords))
        return None if value is None else self._chunk_dict(node["path"], tuple(coords), value)

    def chunk_refs(self, ref: str, path: str) -> Iterator[dict]:
        """Every chunk ref of the array, streamed in coordinate order."""
        return self.node_chunk_refs(self._array_at(ref, path))

    def node_chunk_refs(self, node: dict, start: Iterable[int] | None = None,
                        stop: Iterable[int] | None = None) -> Iterator[dict]:
        """Every chunk ref of an array node from :meth:`node` or :meth:`ls`, streamed in coordinate
        order; only those with ``start <= coords < stop`` (coordinate tuples), if given."""
        bounds = (None if start is None else tuple(start), None if stop is None else tuple(stop))
        for coords, value in self._refs.refs(node, *bounds):
            yield self._chunk_dict(node["path"], coords, value)

    def node_chunk_coords(self, node: dict) -> Iterator[tuple[int, ...]]:
        """The coordinates of every chunk ref of an array node, streamed in order."""
        return self._refs.coords(node)

    def chunk_data(self, ref: str, path: str, coords: Iterable[int], repo: str | os.PathLike | Location | None = None,
                   storage_options: Mapping[str, object] | None = None, anon: bool = False) -> bytes:
        """The chunk's stored bytes: inline, embedded, from ``repo``'s chunks/ (a path or an object-store
        URL, reached with ``storage_options`` / ``anon``), or an authorized virtual file."""
        where = None if repo is None else parse_location(repo, storage_options, anon)
        return self.read_chunk(self.chunk_ref(ref, path, coords), ref, where)

    def read_chunk(self, chunk: dict, ref: str, repo: str | os.PathLike | Location | None = None,
                   views: bool = False) -> bytes | memoryview:
        """The bytes of a chunk ref from :meth:`chunk_ref` / :meth:`chunk_refs` (read at REF, for
        messages); ``repo`` is a repository path, URL or :class:`Location`. ``views``: embedded bytes
        of an uncompressed local archive come as a memoryview into its map (no copy)."""
        return self._chunks.read(chunk, ref, repo, views)

    def _counted(self, family: bytes) -> bool:
        """Whether the archive holds any record of ``family`` (its header's counts say, no lookup)."""
        return bool(self.header()["counts"].get(S.FAMILY_NAMES[family]))

    def _embedded_chunk(self, chunk_id: str, start: int, stop: int, views: bool) -> bytes | memoryview | None:
        """Bytes [start, stop) of the archive's copy of a native chunk file, if it embeds one (most
        archives hold none: the header's counts say so without a lookup per chunk)."""
        if self._has_chunk_data is None:
            self._has_chunk_data = self._counted(S.CHUNK_DATA)
        if not self._has_chunk_data:
            return None
        if self.format_version >= 3:
            return read_pieces(self.zs, chunk_id, start, stop, views)
        value = self._one(S.CHUNK_DATA, (chunk_id,))
        if value is None:
            return None
        if len(value[0]) < stop:
            raise ZSCorrupt(f"embedded chunk {chunk_id} is shorter than offset {start} + length {stop - start}")
        return value[0][start:stop]

    def shard_index(self, chunk: dict) -> tuple[bool, bytes] | None:
        """``(at_end, raw index bytes)`` the archive keeps of a shard (a native or virtual chunk ref), or None."""
        if chunk["kind"] == "inline" or self.format_version < 3:
            return None
        if self._has_shard_indexes is None:
            self._has_shard_indexes = self._counted(S.SHARD_INDEX)
        if not self._has_shard_indexes:
            return None
        if chunk["kind"] == "native":
            key: tuple = (chunk["chunk_id"], chunk["offset"], chunk["length"])
        else:
            key = virtual_index_key(chunk["location"], chunk["offset"], chunk["length"], chunk["checksum_etag"],
                            chunk["checksum_last_modified"])
        value = self._one(S.SHARD_INDEX, key)
        if value is None:
            return None
        if len(value) < 2 or not isinstance(value[0], bool) or not isinstance(value[1], bytes):
            raise ZSCorrupt(f"{self.name}: shard index record of {key[0]} is malformed")
        return value[0], value[1]

    def inner_chunk(self, ref: str, path: str, coords: Iterable[int], inner: Iterable[int],
                    repo: str | os.PathLike | Location | None = None) -> dict:
        """Where the inner chunk at ``inner`` of the shard at ``coords`` lies: the shard's chunk ref
        with ``offset`` / ``length`` narrowed to it (``empty`` True where the shard holds none).
        ``repo``: where to read the shard's index if the archive keeps neither it nor the shard."""
        node = self._array_at(ref, path)
        layout = shard_layout(node["user_data"])
        if layout is None:
            raise ZSError(f"{self.name}: {node['path']!r} is not a sharded array (no sharding_indexed "
                          "codec with a bytes [+ crc32c] index)")
        number = layout.inner_number(tuple(int(i) for i in inner))
        chunk = self.chunk_ref(ref, path, coords)
        where = f"shard {coords_text(chunk['coords'])} of {chunk['path']!r} at {ref!r}"
        kept = self.shard_index(chunk)
        if kept is not None:
            raw = kept[1]
        else:
            start, stop = layout.index_span(chunk["length"])
            raw = self._span_bytes(chunk, ref, start, stop, repo)
        offset, length = layout.entries(raw, chunk["length"], f"{self.name}: {where}")[number]
        out = dict(chunk, inner=tuple(int(i) for i in inner), empty=offset == EMPTY)
        if offset == EMPTY:
            return dict(out, length=0)
        if chunk["kind"] == "inline":
            return dict(out, inline=chunk["inline"][offset:offset + length], length=length)
        return dict(out, offset=chunk["offset"] + offset, length=length)

    def _span_bytes(self, chunk: dict, ref: str, start: int, stop: int,
                    repo: str | os.PathLike | Location | None) -> bytes:
        """Bytes [start, stop) of a chunk ref's value."""
        if chunk["kind"] == "inline":
            return chunk["inline"][start:stop]
        return bytes(self.read_chunk(dict(chunk, offset=chunk["offset"] + start, length=stop - start), ref, repo))

    # -- history -----------------------------------------------------------------------------

    def chunk_history(self, path: str, coords: Iterable[int], ref: str | None = None) -> list[dict]:
        """The commits in REF's history (default ``main``) that changed that chunk, newest first."""
        ref = ref or "main"
        coords = tuple(int(c) for c in coords)
        sid = self.resolve(ref)
        node = self._node_at(sid, path, ref)
        history = {sid for sid, _ in self._ancestry(sid)}
        changes = [(k[2], k[3]) for k, _ in self._records(S.CHUNK_HISTORY, (node["id"], coords))]
        changes.sort(reverse=True)
        return [self._snapshot_dict(change_sid, self._snapshot_value(change_sid))
                for _, change_sid in changes if change_sid in history]

    def diff(self, from_ref: str, to_ref: str) -> dict:
        """What changed from FROM to TO (FROM must be in TO's history), as icechunk's ``diff`` says it."""
        from_id, to_id = self.resolve(from_ref), self.resolve(to_ref)
        between = []
        for sid, value in self._ancestry(to_id):
            if sid == from_id:
                break
            between.append((sid, value))
        else:
            raise ZSError(f"{self.name}: cannot diff: {from_ref!r} is not in the history of {to_ref!r}")
        if not between:
            raise ZSError(f"{self.name}: cannot diff: {from_ref!r} and {to_ref!r} are the same snapshot")
        sets: dict[str, set] = {name: set() for name in (
            "new_groups", "new_arrays", "deleted_groups", "deleted_arrays", "updated_groups", "updated_arrays")}
        chunk_nodes: set[str] = set()
        moved: list[list[str]] = []
        changed = set()
        for sid, value in between:
            if value[0] is None:
                continue  # the initial snapshot: icechunk leaves its (empty) log out too
            changed.add(sid)
            tx = self._one(S.TXLOG, (sid,))
            if tx is None:
                raise ZSCorrupt(f"{self.name}: snapshot {sid} has no transaction log record")
            if len(tx) > 9 and sid in tx[9]:
                raise ZSError(f"{self.name}: cannot diff across snapshot {sid}: its transaction log was no "
                              f"longer in the repository when it was archived")
            for name, ids in zip(sets, tx[:6]):
                sets[name].update(ids)
            chunk_nodes.update(node_id for node_id, _ in tx[6])
            moved.extend([m[0], m[1]] for m in (tx[10] if len(tx) > 10 else tx[7]))  # unjoined, as icechunk
        paths: dict[str, str] = {}
        for snapshot_id in (from_id, to_id):
            for k, v in self._records(S.NODE, (snapshot_id,)):
                paths[v[0]] = S.path_of(k[1])
        out: dict[str, Any] = {name: sorted(paths[i] for i in ids if i in paths) for name, ids in sets.items()}
        updated: dict[str, list[list[int]]] = {}
        for node_id in sorted(chunk_nodes):
            if node_id not in paths:
                continue
            # A node a log lists with no chunks (icechunk 1.1 writes such entries) is in the diff too.
            coords = sorted({k[1] for k, _ in self._records(S.CHUNK_HISTORY, (node_id,)) if k[3] in changed})
            updated[paths[node_id]] = [list(c) for c in coords]
        out["updated_chunks"] = dict(sorted(updated.items()))
        out["moved_nodes"] = moved
        return out

    def ops_log(self, since: TimeBound = None, until: TimeBound = None) -> list[dict]:
        """Ops-log entries updated in ``[since, until]`` (inclusive bounds as for :meth:`log`), newest first."""
        since, until = time_bound(since, False), time_bound(until, True)
        if until is not None:
            first = next(iter(self._range(S.OPS, (), None)), None)
            if first is not None and until < first[0][0]:
                raise NotFound(f"{self.name}: {format_time(until)} is before the first operation "
                               f"({format_time(first[0][0])})")
        start = () if since is None else (since,)
        stop = None if until is None else (until + 1,)
        out = []
        for (updated_at, _), value in self._range(S.OPS, start, stop):
            kind, backup_path, details = value[:3]  # later elements: extensions this reader ignores
            entry = {"type": kind, "updated_at": format_time(updated_at), "backup_path": backup_path}
            entry.update(_present_details(load_json(details, f"{self.name}: archive ops record {updated_at}")))
            out.append(entry)
        out.reverse()
        return out


def _present_details(details: dict) -> dict:
    """Ops-log details as icechunk's ``ops_log()`` shows them: times as text, unset flags as null."""
    status = details.get("status")
    if isinstance(status, dict):
        status = dict(status)
        if isinstance(status.get("set_at"), int):
            status["set_at"] = format_time(status["set_at"])
        if isinstance(status.get("availability"), str):
            status["availability"] = status["availability"].replace("-", "_")
        details["status"] = status
    if details.get("is_set") is False:
        details["new_value"] = None  # the flag went back to its default: icechunk says None
    return details


for _name in ("header", "repo_facts", "refs", "snapshot", "resolve", "ancestry", "log", "ls", "node", "chunk_ref",
              "node_chunk_ref", "chunk_refs", "node_chunk_refs", "node_chunk_coords", "chunk_data", "read_chunk",
              "shard_index", "inner_chunk", "chunk_history", "diff", "ops_log"):
    setattr(RepoArchive, _name, _guarded(getattr(RepoArchive, _name)))
