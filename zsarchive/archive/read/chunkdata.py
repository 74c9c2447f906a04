"""Reading the bytes a chunk ref points to: inline, embedded in the archive, a native chunk file of
the repository (local or over http), or an authorized virtual location, with the ref's checksums
checked as icechunk checks them. Nothing outside the authorized prefixes is ever opened."""

from __future__ import annotations

import contextlib
import functools
import os
import threading
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, Mapping, Sequence, TypeVar
from urllib.parse import unquote, urlsplit

from zsarchive.archive.read.refspec import coords_text
from zsarchive.errors import ZSCorrupt, ZSError
from zsarchive.times import format_time
from zsarchive.icechunk import ids
from zsarchive.icechunk.kinds import ZS_FILE, archive_not_repository, local_kind
from zsarchive.io.location import SCHEMES, Location, parse_location
from zsarchive.io.objects import ObjectChanged, object_store
from zsarchive.io.pinning import Version
from zsarchive.io.versioned import (
    http_conditions,
    object_conditions,
    read_file_into,
    read_file_runs,
    read_object_run,
    read_url_run,
    stat_file,
    stat_object,
    stat_object_async,
    stat_url,
)
from zsarchive.icechunk.storage import ObjectStorage, read_file_range

if TYPE_CHECKING:
    from zsarchive.archive.read.model import ChunkInfo
    from zsarchive.io.httpclient import ConnectionPool

T = TypeVar("T")


class ChunkReader:
    """Reads chunk bytes for one archive (``name``, for messages).

    ``embedded(chunk_id, start, stop, zero_copy)``: bytes [start, stop) of the archive's own copy of a
    native chunk file, or None if it holds none; ``embedded_virtual(range key, start, stop, zero_copy)`` the
    same of a virtual range (``(location, offset, length, etag, last_modified)`` of the whole ref), read
    before any source and needing no authorization; ``authorize``:
    location prefixes under which virtual refs may be read, or a mapping of such prefixes to the
    storage options (credentials, endpoint, ``anon``) of the object store under each, as icechunk's
    virtual chunk containers have them. Connections to a host are kept per host.
    """

    def __init__(
        self,
        name: str,
        authorize: Iterable[str] | Mapping[str, Mapping[str, Any]],
        embedded: Callable[[str, int, int, bool], bytes | memoryview | None],
        embedded_virtual: Callable[[tuple, int, int, bool], bytes | memoryview | None] | None = None,
    ):
        self.name = name
        if isinstance(authorize, Mapping):
            self.authorize = {str(p): dict(options or {}) for p, options in authorize.items()}
        else:
            self.authorize = {str(p): {} for p in authorize}
        self.embedded = embedded
        self.embedded_virtual = embedded_virtual
        self._pools: dict[tuple, ConnectionPool] = {}
        self._pools_lock = threading.Lock()
        self._repos: dict[Location, ObjectStorage] = {}
        self._stores: dict[tuple[str, str], Any] = {}

    def close(self) -> None:
        """Close the connections chunk reads kept open."""
        with self._pools_lock:
            pools, self._pools = self._pools, {}
        for pool in pools.values():
            pool.close()

    def read(
        self, chunk: ChunkInfo, ref: str, repo: str | os.PathLike | Location | None = None, zero_copy: bool = False
    ) -> bytes | memoryview:
        """The bytes of a chunk ref (read at REF, for messages); ``repo`` is a local repository path, an
        object-store URL or a :class:`Location`. ``zero_copy``: embedded bytes may come as a memoryview into
        the archive's map (no copy)."""
        where = f"chunk {coords_text(chunk.coords)} of {chunk.path!r} at {ref!r}"
        if chunk.kind == "inline":
            if chunk.inline is None:
                raise ZSCorrupt(f"{self.name}: {where}: an inline ref without its bytes")
            return chunk.inline
        offset, length = chunk.offset, chunk.length
        if not (isinstance(offset, int) and isinstance(length, int) and offset >= 0 and length >= 0):
            raise ZSCorrupt(
                f"{self.name}: {where}: offset {str(offset)[:40]} and length {str(length)[:40]} must be integers >= 0"
            )
        if chunk.kind == "native":
            chunk_id = chunk.chunk_id
            if not ids.is_id(chunk_id):  # the only chunk file names an archive may make us open
                raise ZSCorrupt(f"{self.name}: {where}: invalid chunk id {chunk_id!r}")
            embedded = _kept(self.embedded, chunk_id, offset, length, zero_copy, where)
            if embedded is not None:
                return embedded
            if repo is None:
                raise ZSError(
                    f"{where} is native chunk {chunk_id}, not embedded in the archive: "
                    "give the repository (repo= in Python, --repo on the command line)"
                )
            where_repo = parse_location(repo)
            if where_repo.is_local:
                if not os.path.isdir(where_repo.url):
                    if local_kind(where_repo.url) == ZS_FILE:
                        raise archive_not_repository(where_repo.url)
                    raise ZSError(f"{where}: the repository {where_repo.url} is not a directory")
                return _read_range(os.path.join(where_repo.url, "chunks", chunk_id), offset, length, where)
            storage = self._repos.get(where_repo)
            if storage is None:
                storage = self._repos[where_repo] = ObjectStorage(where_repo)
            try:
                return storage.read_range(f"chunks/{chunk_id}", offset, length)
            except ZSError as exc:
                raise _named(exc, where) from None
        if chunk.location is None:
            raise ZSCorrupt(f"{self.name}: {where}: a virtual ref without its location")
        if self.embedded_virtual is not None:
            key = (chunk.location, *chunk.whole_range, chunk.checksum_etag, chunk.checksum_last_modified)
            kept = _kept(self.embedded_virtual, key, offset, length, zero_copy, where)
            if kept is not None:
                return kept
        return self.read_virtual(
            chunk.location, offset, length, chunk.checksum_etag, chunk.checksum_last_modified, where
        )

    def read_virtual(
        self, location: str, offset: int, length: int, etag: str | None, last_modified: int | None, where: str
    ) -> bytes:
        """``length`` bytes at ``offset`` of a virtual location under an authorized prefix, on
        condition of the ref's checksums (``where`` names the ref in messages)."""
        version, data = self.read_runs(location, [(offset, length)], [(etag, last_modified)], where)[0]
        differs = version.differs(etag, last_modified)
        # no bytes from a remote answer: the length check below says why (the answer named no version)
        if differs and (data or version.local):
            raise ZSError(f"{where}: {location} changed since the virtual ref was written ({differs})")
        if len(data) != length:
            raise ZSCorrupt(f"{where}: {location} holds {len(data)} bytes at offset {offset}, expected {length}")
        return data

    def read_runs(
        self, location: str, runs: Sequence[tuple[int, int]], pins: Iterable[tuple[str | None, int | None]], where: str
    ) -> list[tuple[Version, bytes]]:
        """Per ``(offset, length)`` run of a virtual location under an authorized prefix, its bytes (fewer
        where the object ends sooner) and the version of the object that answered, which the caller checks
        against each checksum (``pins``: ``(etag, last_modified)`` each) the bytes are read under. Requests
        ask for the version the pins share, so a server that honours preconditions sends nothing else; a
        local file's runs are read between two looks at it. One-line ZSError when a read fails."""
        etag, last_modified = _shared(pins)
        scheme = urlsplit(location).scheme.lower()
        if scheme in ("http", "https"):
            self._authorized_url(location, where)
            headers = http_conditions(etag, last_modified)
            pool = self._pool_for(location)
            try:
                return [read_url_run(location, offset, length, headers, pool) for offset, length in runs]
            except ZSError as exc:
                checks = ", ".join(f"{k} {v}" for k, v in headers.items())
                raise _named(exc, f"{where}: cannot read {location}{f' ({checks})' if checks else ''}") from None
        if SCHEMES.get(scheme) in ("s3", "gs", "az"):
            store, key = self._object_of(location, where)
            return [
                _read_object(store, key, location, offset, length, where, etag, last_modified)
                for offset, length in runs
            ]
        version, bodies = self._read_local(location, where, lambda path: read_file_runs(path, runs))
        return [(version, body) for body in bodies]

    def read_local_into(
        self, location: str, reads: Sequence[tuple[int, Sequence[memoryview]]], where: str
    ) -> tuple[Version, list[int]]:
        """Fill each ``(offset, buffers)`` read of a local virtual location under an authorized prefix (see
        :func:`~zsarchive.io.versioned.read_file_into`): the file's version and the bytes each read got;
        one-line ZSError when a read fails or the file changed while it was read."""
        return self._read_local(location, where, lambda path: read_file_into(path, reads))

    def _read_local(self, location: str, where: str, read: Callable[[str], T]) -> T:
        """``read(path)`` of a local virtual location under an authorized prefix, its errors one line
        naming ``where``."""
        path = self._authorized_local_path(location, where)
        try:
            return read(path)
        except ObjectChanged:
            raise ZSError(f"{where}: {path} changed while it was read") from None
        except ZSError as exc:
            raise _named(exc, where) from None

    def version_of(self, location: str) -> Version | None:
        """The current version of the object at a virtual location under an authorized prefix (its
        ETag, modification time and size), asked once; None when it no longer exists."""
        where = f"virtual location {location}"
        scheme = urlsplit(location).scheme.lower()
        try:
            if scheme in ("http", "https"):
                self._authorized_url(location, where)
                return stat_url(location, self._pool_for(location))
            if SCHEMES.get(scheme) in ("s3", "gs", "az"):
                return stat_object(*self._object_of(location, where), location)
            return stat_file(self._authorized_local_path(location, where))
        except ZSError as exc:
            raise _named(exc, where) from None

    async def _version_of_object(self, location: str) -> Version | None:
        """:meth:`version_of` of an object in S3, GCS or Azure, by obstore's async HEAD."""
        where = f"virtual location {location}"
        try:
            return await stat_object_async(*self._object_of(location, where), location)
        except ZSError as exc:
            raise _named(exc, where) from None

    def versions_of(self, locations: Sequence[str], in_flight: int) -> Iterator[tuple[int, Version | None | ZSError]]:
        """``(index, version)`` of each location as :meth:`version_of` answers it (the ZSError it raises
        instead of raising), in the order the answers come: objects in S3, GCS or Azure asked by obstore's
        async HEAD on one event loop, other locations on threads, at most ``in_flight`` of each at once."""
        from zsarchive.io.eventloop import EventLoopThread  # here: only a check of sources asks

        objects = [SCHEMES.get(urlsplit(location).scheme.lower()) in ("s3", "gs", "az") for location in locations]
        futures: dict[Future, int] = {}
        with contextlib.ExitStack() as running:
            loop = running.enter_context(EventLoopThread(in_flight)) if any(objects) else None
            pool = ThreadPoolExecutor(in_flight, thread_name_prefix="zsarchive-versions")
            running.callback(pool.shutdown, wait=True, cancel_futures=True)
            for i, location in enumerate(locations):
                if loop is not None and objects[i]:
                    futures[loop.submit(functools.partial(self._version_of_object, location))] = i
                else:
                    futures[pool.submit(self.version_of, location)] = i
            for future in as_completed(futures):
                try:
                    yield futures[future], future.result()
                except ZSError as exc:
                    yield futures[future], exc

    def authorized(self, location: str) -> bool:
        """Whether ``location`` lies under an authorized prefix (a read of it would be allowed)."""
        try:
            if SCHEMES.get(urlsplit(location).scheme.lower()):
                self._authorized_url(location, location)
            else:
                self._authorized_local_path(location, location)
        except ZSError:
            return False
        return True

    @staticmethod
    def is_local(location: str) -> bool:
        """Whether ``location`` is a local file (a ``file://`` URL or a path)."""
        return SCHEMES.get(urlsplit(location).scheme.lower()) is None

    def _authorized_url(self, location: str, where: str) -> str:
        """The authorized prefix ``location`` lies under (ZSError if none)."""
        parts = urlsplit(location)
        # no dot segments: "prefix/../elsewhere" must not pass a plain prefix test
        if any(seg in (".", "..") for seg in unquote(parts.path).split("/")):
            raise ZSError(f"{where}: virtual location {location!r} has '.' or '..' path segments")
        for prefix in self.authorize:
            pre = urlsplit(prefix)
            if (
                (pre.scheme, pre.netloc) == (parts.scheme, parts.netloc)
                and pre.path
                and parts.path.startswith(pre.path if pre.path.endswith("/") else pre.path + "/")
            ):
                return prefix
        raise ZSError(
            f"{where}: virtual location {location!r} is not under an authorized prefix; "
            f"{_authorize_hint(location.rsplit('/', 1)[0] + '/')}"
        )

    def _object_of(self, location: str, where: str) -> tuple[Any, str]:
        """The store and key of an object in S3, GCS or Azure under an authorized prefix (one store per
        prefix and reader: a check asks thousands of objects of one bucket)."""
        prefix = self._authorized_url(location, where)
        parts = urlsplit(location)
        store = self._stores.get((prefix, parts.netloc))
        if store is None:
            settings = dict(self.authorize[prefix])
            anon = str(settings.pop("anon", "")).lower() in ("1", "true", "yes")
            store = self._stores[(prefix, parts.netloc)] = object_store(
                parse_location(f"{parts.scheme}://{parts.netloc}", settings, anon)
            )
        return store, unquote(parts.path).lstrip("/")

    def _pool_for(self, url: str) -> ConnectionPool:
        from zsarchive.io.httpclient import ConnectionPool, host_of

        host = host_of(url)
        with self._pools_lock:
            pool = self._pools.get(host)
            if pool is None:
                pool = self._pools[host] = ConnectionPool(url)
            return pool

    def _authorized_local_path(self, location: str, where: str) -> str:
        parts = urlsplit(location)
        if parts.scheme not in ("file", ""):
            raise ZSError(
                f"{where}: virtual location {location!r} uses scheme {parts.scheme!r}, which "
                "zsarchive does not read (supported: file:// URLs and local paths)"
            )
        path = unquote(parts.path) if parts.scheme == "file" else location
        if not os.path.isabs(path):
            raise ZSError(f"{where}: virtual location {location!r} is not an absolute path")
        real = os.path.realpath(path)
        for prefix in self.authorize:
            pre = urlsplit(prefix)
            if pre.scheme not in ("file", ""):
                continue
            base = unquote(pre.path) if pre.scheme == "file" else prefix
            if not base:
                continue
            base_real = os.path.realpath(base)
            if real == base_real or real.startswith(base_real.rstrip("/") + "/"):
                return real
        suggestion = "file://" + os.path.dirname(real).rstrip("/") + "/"
        if real != os.path.normpath(path):  # a link led elsewhere: the prefix that would pass is the target's
            raise ZSError(
                f"{where}: virtual location {location!r} resolves to {real!r} (through a symbolic "
                f"link), which is not under an authorized prefix; if that is intended, "
                f"{_authorize_hint(suggestion)}"
            )
        raise ZSError(
            f"{where}: virtual location {location!r} is not under an authorized prefix; {_authorize_hint(suggestion)}"
        )


def _authorize_hint(prefix: str) -> str:
    """How to authorize ``prefix``, for a Python caller and on the command line."""
    return f"authorize it with authorize=[{prefix!r}] in Python, --authorize {prefix} on the command line"


def _kept(
    lookup: Callable, key: Any, offset: int, length: int, zero_copy: bool, where: str
) -> bytes | memoryview | None:
    """``length`` bytes at ``offset`` of what the archive keeps under ``key`` (a chunk file's id, a virtual
    range's key), or None; a damaged archive's error names the chunk."""
    try:
        return lookup(key, offset, offset + length, zero_copy)
    except ZSCorrupt as exc:
        raise ZSCorrupt(f"{where}: {exc}") from None


def _named(exc: ZSError, where: str) -> ZSError:
    """``exc`` with its message beginning with ``where`` (as it is, if it does already): the same class and
    attributes (an object store error's cause)."""
    if str(exc).startswith(where):
        return exc
    named = type(exc).__new__(type(exc))
    named.__dict__.update(exc.__dict__)
    named.args = (f"{where}: {exc}",)
    return named


def _shared(pins: Iterable[tuple[str | None, int | None]]) -> tuple[str | None, int | None]:
    """The checksum ``(etag, last_modified)`` every pin agrees on, element by element (None where they differ)."""
    etags, times = set(), set()
    for etag, last_modified in pins:
        etags.add(etag)
        times.add(last_modified)
    return (etags.pop() if len(etags) == 1 else None), (times.pop() if len(times) == 1 else None)


def _read_object(
    store: Any,
    key: str,
    location: str,
    offset: int,
    length: int,
    where: str,
    etag: str | None,
    last_modified: int | None,
) -> tuple[Version, bytes]:
    """A range of an object in S3, GCS or Azure (``key`` in ``store``), asked for on condition that the
    object still has the ref's ETag and was not modified after the ref's time."""
    try:
        return read_object_run(store, key, location, offset, length, object_conditions(etag, last_modified))
    except ObjectChanged:
        checks = ", ".join(
            f"{k} {v}"
            for k, v in (("ETag", etag), ("modified by", last_modified and format_time(last_modified * 10**6)))
            if v
        )
        raise ZSError(
            f"{where}: {location} changed since the virtual ref was written (the ref's checksum: {checks})"
        ) from None
    except ZSError as exc:
        raise _named(exc, where) from None


def _read_range(path: str, offset: int, length: int, where: str) -> bytes:
    """``length`` bytes at ``offset`` of a repository's local chunk file."""
    try:
        return read_file_range(path, offset, length)
    except ZSError as exc:
        raise _named(exc, where) from None
