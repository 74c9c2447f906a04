"""Reading the bytes a chunk ref points to: inline, embedded in the archive, a native chunk file of
the repository (local or over http), or an authorized virtual location, with the ref's checksums
checked as icechunk checks them. Nothing outside the authorized prefixes is ever opened."""

from __future__ import annotations

import os
import threading
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping
from urllib.parse import unquote, urlsplit

from zsarchive.archive.read.refspec import coords_text
from zsarchive.errors import ZSCorrupt, ZSError
from zsarchive.times import format_time
from zsarchive.icechunk import ids
from zsarchive.icechunk.kinds import ZS_FILE, archive_not_repository, local_kind
from zsarchive.io.location import SCHEMES, Location, parse_location
from zsarchive.io.objects import ObjectChanged, get_bounded, object_store
from zsarchive.io.pinning import http_date, http_seconds, mismatch, seconds_of
from zsarchive.icechunk.storage import ObjectStorage, read_file_range

if TYPE_CHECKING:
    from zsarchive.archive.read.model import ChunkInfo
    from zsarchive.io.httpclient import ConnectionPool



class ChunkReader:
    """Reads chunk bytes for one archive (``name``, for messages).

    ``embedded(chunk_id, start, stop, views)``: bytes [start, stop) of the archive's own copy of a
    native chunk file, or None if it holds none; ``authorize``:
    location prefixes under which virtual refs may be read, or a mapping of such prefixes to the
    storage options (credentials, endpoint, ``anon``) of the object store under each, as icechunk's
    virtual chunk containers have them. Connections to a host are kept per host.
    """

    def __init__(self, name: str, authorize: Iterable[str] | Mapping[str, Mapping[str, Any]],
                 embedded: Callable[[str, int, int, bool], bytes | memoryview | None]):
        self.name = name
        if isinstance(authorize, Mapping):
            self.authorize = {str(p): dict(options or {}) for p, options in authorize.items()}
        else:
            self.authorize = {str(p): {} for p in authorize}
        self.embedded = embedded
        self._pools: dict[tuple, ConnectionPool] = {}
        self._pools_lock = threading.Lock()
        self._repos: dict[Location, ObjectStorage] = {}

    def close(self) -> None:
        """Close the connections chunk reads kept open."""
        with self._pools_lock:
            pools, self._pools = self._pools, {}
        for pool in pools.values():
            pool.close()

    def read(self, chunk: ChunkInfo, ref: str, repo: str | os.PathLike | Location | None = None,
             views: bool = False) -> bytes | memoryview:
        """The bytes of a chunk ref (read at REF, for messages); ``repo`` is a local repository path, an
        object-store URL or a :class:`Location`. ``views``: embedded bytes may come as a memoryview into
        the archive's map (no copy)."""
        where = f"chunk {coords_text(chunk.coords)} of {chunk.path!r} at {ref!r}"
        if chunk.kind == "inline":
            return chunk.inline
        offset, length = chunk.offset, chunk.length
        if not (isinstance(offset, int) and isinstance(length, int) and offset >= 0 and length >= 0):
            raise ZSCorrupt(f"{self.name}: {where}: offset {str(offset)[:40]} and length {str(length)[:40]} "
                            f"must be integers >= 0")
        if chunk.kind == "native":
            chunk_id = chunk.chunk_id
            if not ids.is_id(chunk_id):  # the only chunk file names an archive may make us open
                raise ZSCorrupt(f"{self.name}: {where}: invalid chunk id {chunk_id!r}")
            try:
                embedded = self.embedded(chunk_id, offset, offset + length, views)
            except ZSCorrupt as exc:
                raise ZSCorrupt(f"{where}: {exc}") from None
            if embedded is not None:
                return embedded
            if repo is None:
                raise ZSError(f"{where} is native chunk {chunk_id}, not embedded in the archive: "
                              "give the repository (repo= in Python, --repo on the command line)")
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
                raise type(exc)(f"{where}: {exc}") from None
        return self.read_virtual(chunk.location, offset, length, chunk.checksum_etag,
                                 chunk.checksum_last_modified, where)

    def read_virtual(self, location: str, offset: int, length: int, etag: str | None,
                     last_modified: int | None, where: str) -> bytes:
        """``length`` bytes at ``offset`` of a virtual location under an authorized prefix, on
        condition of the ref's checksums (``where`` names the ref in messages)."""
        scheme = urlsplit(location).scheme.lower()
        if scheme in ("http", "https"):
            self._authorized_url(location, where)
            return self._read_url(location, offset, length, where, etag, last_modified)
        if SCHEMES.get(scheme) in ("s3", "gs", "az"):
            options = self.authorize[self._authorized_url(location, where)]
            return _read_object(location, options, offset, length, where, etag, last_modified)
        local = self._authorized_local_path(location, where)
        return _read_range(local, offset, length, where, etag, last_modified)

    def _authorized_url(self, location: str, where: str) -> str:
        """The authorized prefix ``location`` lies under (ZSError if none)."""
        parts = urlsplit(location)
        # no dot segments: "prefix/../elsewhere" must not pass a plain prefix test
        if any(seg in (".", "..") for seg in unquote(parts.path).split("/")):
            raise ZSError(f"{where}: virtual location {location!r} has '.' or '..' path segments")
        for prefix in self.authorize:
            pre = urlsplit(prefix)
            if (pre.scheme, pre.netloc) == (parts.scheme, parts.netloc) and pre.path and \
                    parts.path.startswith(pre.path if pre.path.endswith("/") else pre.path + "/"):
                return prefix
        raise ZSError(f"{where}: virtual location {location!r} is not under an authorized prefix; "
                      f"{_authorize_hint(location.rsplit('/', 1)[0] + '/')}")

    def _read_url(self, url: str, offset: int, length: int, where: str, etag: str | None = None,
                  last_modified: int | None = None) -> bytes:
        """``length`` bytes at ``offset`` of ``url``; the ref's ETag / modification time are sent as
        preconditions, so a changed object fails instead of returning other bytes."""
        headers = {}
        # If-Match compares strongly: a weak ETag is checked in the answer only
        if etag and not etag.startswith("W/"):
            headers["If-Match"] = etag if etag.startswith('"') or etag == "*" else f'"{etag}"'
        since = http_date(last_modified) if last_modified else None
        if since:
            headers["If-Unmodified-Since"] = since
        from zsarchive.io.http import HTTPTransport  # here: a chunk ref lookup needs no HTTP client
        transport = HTTPTransport(url, headers=headers, pool=self._pool_for(url))
        try:
            data = transport.read_once(offset, length)
        except ZSError as exc:
            checks = ", ".join(f"{k} {v}" for k, v in headers.items())
            raise type(exc)(f"{where}: cannot read {url}{f' ({checks})' if checks else ''}: {exc}") from None
        finally:
            transport.close()
        # a server that ignores the preconditions answers with what it holds now: check the answer itself
        answer_etag, answer_modified = transport.version
        differs = mismatch(etag, last_modified, answer_etag, http_seconds(answer_modified))
        if differs and data:  # no bytes returned: the length check below says why
            raise ZSError(f"{where}: {url} changed since the virtual ref was written ({differs})")
        if len(data) != length:
            raise ZSCorrupt(f"{where}: {url} holds {len(data)} bytes at offset {offset}, expected {length}")
        return data

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
            raise ZSError(f"{where}: virtual location {location!r} uses scheme {parts.scheme!r}, which "
                          "zsarchive does not read (supported: file:// URLs and local paths)")
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
            raise ZSError(f"{where}: virtual location {location!r} resolves to {real!r} (through a symbolic "
                          f"link), which is not under an authorized prefix; if that is intended, "
                          f"{_authorize_hint(suggestion)}")
        raise ZSError(f"{where}: virtual location {location!r} is not under an authorized prefix; "
                      f"{_authorize_hint(suggestion)}")


def _authorize_hint(prefix: str) -> str:
    """How to authorize ``prefix``, for a Python caller and on the command line."""
    return f"authorize it with authorize=[{prefix!r}] in Python, --authorize {prefix} on the command line"


def _read_object(location: str, options: dict[str, Any], offset: int, length: int, where: str,
                 etag: str | None, last_modified: int | None) -> bytes:
    """A virtual chunk in S3, GCS or Azure: the range is asked for on condition that the object still
    has the ref's ETag and was not modified after the ref's time, so changed bytes are never returned."""
    parts = urlsplit(location)
    settings = dict(options)
    anon = str(settings.pop("anon", "")).lower() in ("1", "true", "yes")
    bucket = parse_location(f"{parts.scheme}://{parts.netloc}", settings, anon)
    conditions: dict[str, Any] = {"range": (offset, offset + length)}
    if etag and etag.strip('"') != "*":
        conditions["if_match"] = etag if etag.startswith(('"', "W/")) else f'"{etag}"'
    if last_modified and http_date(last_modified):
        conditions["if_unmodified_since"] = datetime.fromtimestamp(last_modified, timezone.utc)
    try:
        meta, _, data = get_bounded(object_store(bucket), unquote(parts.path).lstrip("/"), conditions, length,
                                    location)
    except ObjectChanged:
        checks = ", ".join(f"{k} {v}" for k, v in (("ETag", etag), ("modified by", last_modified and
                                                    format_time(last_modified * 10**6))) if v)
        raise ZSError(f"{where}: {location} changed since the virtual ref was written (the ref's "
                      f"checksum: {checks})") from None
    except ZSError as exc:
        raise type(exc)(f"{where}: {exc}") from None
    # the store's own answer names the version it sent: a store or proxy that ignored the
    # preconditions is caught here
    differs = mismatch(etag, last_modified, meta.get("e_tag"), seconds_of(meta.get("last_modified")))
    if differs:
        raise ZSError(f"{where}: {location} changed since the virtual ref was written ({differs})")
    if len(data) != length:
        raise ZSCorrupt(f"{where}: {location} holds {len(data)} bytes at offset {offset}, expected {length}")
    return data


def _read_range(path: str, offset: int, length: int, where: str, etag: str | None = None,
                last_modified: int | None = None) -> bytes:
    check = None
    if etag or last_modified:
        def check(st: os.stat_result) -> None:
            _check_local_checksum(st, path, where, etag, last_modified)
    try:
        return read_file_range(path, offset, length, check)
    except ZSError as exc:
        if str(exc).startswith(where):  # the checksum's own message names the chunk already
            raise
        raise type(exc)(f"{where}: {exc}") from None


def _check_local_checksum(st: os.stat_result, path: str, where: str, etag: str | None,
                          last_modified: int | None) -> None:
    """Refuse a file that changed since the virtual ref was written, as icechunk does: its local
    store's ETag is ``inode-mtime_us-size`` in hex (``*`` matches any), and a modification after the
    ref's time fails. (icechunk 2.3 quotes the file's ETag but not the ref's, so it refuses them all.)"""
    wanted = etag.strip('"') if etag else None
    if wanted and wanted != "*":
        local = f"{st.st_ino:x}-{st.st_mtime_ns // 1000:x}-{st.st_size:x}"
        if local != wanted:
            raise ZSError(f"{where}: {path} changed since the virtual ref was written (the ref's ETag "
                          f"checksum is {etag!r}, the file's is {local!r})")
    if last_modified and st.st_mtime_ns > last_modified * 10**9:
        raise ZSError(f"{where}: {path} changed since the virtual ref was written (modified "
                      f"{format_time(st.st_mtime_ns // 1000)}, after the ref's checksum time "
                      f"{format_time(last_modified * 10**6)})")
