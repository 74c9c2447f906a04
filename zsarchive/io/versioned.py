"""Reads of byte ranges that say which version of the object answered: a local file (``pread`` or ``preadv`` between
two ``fstat``), an HTTP(S) URL (one ``Range`` request) or an object in S3, GCS or Azure (one ranged GET through
obstore). A caller checks the :class:`~zsarchive.io.pinning.Version` against every checksum a range is read
under; preconditions sent with a request only spare the transfer of a version no checksum accepts."""

from __future__ import annotations

import collections
import itertools
import os
import stat
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Callable, Sequence, TypeVar

from zsarchive.errors import ObjectMissing, ZSError
from zsarchive.io.objects import ObjectChanged, get_bounded
from zsarchive.io.pinning import Version, http_date

if TYPE_CHECKING:
    from zsarchive.io.httpclient import ConnectionPool

T = TypeVar("T")


def read_file_runs(path: str, runs: Sequence[tuple[int, int]]) -> tuple[Version, list[bytes]]:
    """The bytes of each ``(offset, length)`` run of a regular local file (shorter where it ends sooner)
    and its version; ObjectChanged if the file changed while it was read, ZSError if it cannot be read."""
    return _between_looks(path, lambda fd: [_pread(fd, offset, length) for offset, length in runs])


def read_file_into(path: str, reads: Sequence[tuple[int, Sequence[memoryview]]]) -> tuple[Version, list[int]]:
    """Fill the buffers of each ``(offset, buffers)`` read of a regular local file with its bytes from
    ``offset`` on, one after the other (no copy: the kernel writes into them), and its version; the bytes
    each read got (fewer where the file ends sooner). Errors as :func:`read_file_runs`."""
    return _between_looks(path, lambda fd: [_preadv(fd, offset, buffers) for offset, buffers in reads])


def _between_looks(path: str, read: Callable[[int], T]) -> tuple[Version, T]:
    """``read(fd)`` of a regular local file between two ``fstat`` of it, and its version."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NONBLOCK", 0))
    except OSError as exc:
        raise ZSError(f"cannot read {path}: {exc.strerror or exc}") from None
    try:
        before = os.fstat(fd)
        if not stat.S_ISREG(before.st_mode):  # a FIFO or device could block or never end
            raise ZSError(f"cannot read {path}: not a regular file")
        got = read(fd)
        after = os.fstat(fd)
    except OSError as exc:
        raise ZSError(f"cannot read {path}: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    if (before.st_ino, before.st_size, before.st_mtime_ns) != (after.st_ino, after.st_size, after.st_mtime_ns):
        raise ObjectChanged(f"{path}: changed while it was read")
    return Version.of_stat(before), got


def _pread(fd: int, offset: int, length: int) -> bytes:
    """``length`` bytes at ``offset`` (fewer at the end of the file)."""
    data = os.pread(fd, length, offset)
    if len(data) == length or not data:
        return data
    parts = [data]
    got = len(data)
    while got < length:
        more = os.pread(fd, length - got, offset + got)
        if not more:
            break
        parts.append(more)
        got += len(more)
    return b"".join(parts)


def _preadv(fd: int, offset: int, buffers: Sequence[memoryview]) -> int:
    """The bytes read into ``buffers`` (in order) from ``offset`` on, until they are full or the file ends."""
    pending = collections.deque(view for view in buffers if len(view))
    got = 0
    while pending:
        n = os.preadv(fd, list(itertools.islice(pending, IOV_MAX)), offset + got)
        if not n:
            break
        got += n
        while pending and n >= len(pending[0]):
            n -= len(pending.popleft())
        if n:
            pending[0] = pending[0][n:]
    return got


IOV_MAX = 1024
"""Buffers one ``preadv`` fills at most (POSIX allows a system no more)."""


def http_conditions(etag: str | None, last_modified: int | None) -> dict[str, str]:
    """The request headers that ask a server for the version a checksum pins (``If-Match`` compares
    strongly: a weak ETag is checked in the answer only)."""
    headers = {}
    if etag and not etag.startswith("W/"):
        headers["If-Match"] = etag if etag.startswith('"') or etag == "*" else f'"{etag}"'
    since = http_date(last_modified) if last_modified else None
    if since:
        headers["If-Unmodified-Since"] = since
    return headers


def read_url_run(
    url: str, offset: int, length: int, headers: dict[str, str], pool: ConnectionPool
) -> tuple[Version, bytes]:
    """One ``Range`` request of ``url`` with ``headers`` (preconditions): the bytes (fewer where the object
    ends sooner; a server that ignored Range is cut to the range) and the version its answer names."""
    from zsarchive.io.http import HTTPTransport  # here: a chunk ref lookup needs no HTTP client

    transport = HTTPTransport(url, headers=headers, pool=pool)
    try:
        data = transport.read_once(offset, length)
    finally:
        transport.close()
    etag, modified = transport.version
    return Version.of_answer(etag, modified), data


def object_conditions(etag: str | None, last_modified: int | None) -> dict[str, Any]:
    """obstore's GET options that ask for the version a checksum pins."""
    conditions: dict[str, Any] = {}
    if etag and etag.strip('"') != "*":
        conditions["if_match"] = etag if etag.startswith(('"', "W/")) else f'"{etag}"'
    if last_modified and http_date(last_modified):
        conditions["if_unmodified_since"] = datetime.fromtimestamp(last_modified, timezone.utc)
    return conditions


def read_object_run(
    store: Any, key: str, url: str, offset: int, length: int, conditions: dict[str, Any]
) -> tuple[Version, bytes]:
    """One ranged GET of ``key`` with ``conditions``: the bytes and the version the store's answer names;
    ObjectChanged when a precondition fails, ZSError (one line naming ``url``) for any other failure."""
    meta, _, data = get_bounded(store, key, {"range": (offset, offset + length), **conditions}, length, url)
    return Version.of_answer(meta.get("e_tag"), meta.get("last_modified"), meta.get("size")), data


def stat_file(path: str) -> Version | None:
    """The version of a regular local file (None when there is none)."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ZSError(f"cannot read {path}: {exc.strerror or exc}") from None
    if not stat.S_ISREG(st.st_mode):
        raise ZSError(f"cannot read {path}: not a regular file")
    return Version.of_stat(st)


def stat_url(url: str, pool: ConnectionPool) -> Version | None:
    """The version of the object at an HTTP(S) URL, asked with the smallest ranged GET (None: HTTP 404
    or 410); its size from the answer's Content-Range."""
    from zsarchive.io.http import HTTPTransport  # here: a chunk ref lookup needs no HTTP client

    transport = HTTPTransport(url, pool=pool)
    try:
        size = transport.size
    except ObjectMissing:
        return None
    finally:
        transport.close()
    etag, modified = transport.version
    return Version.of_answer(etag, modified, size)


def stat_object(store: Any, key: str, url: str) -> Version | None:
    """The version of an object in S3, GCS or Azure, from one HEAD (None when there is none)."""
    import obstore

    try:
        meta = obstore.head(store, key)
    except Exception as exc:
        _raise_unless_gone(exc, url)
        return None
    return _version_of(meta)


async def stat_object_async(store: Any, key: str, url: str) -> Version | None:
    """:func:`stat_object` through obstore's async HEAD: many wait on one event loop
    (:class:`~zsarchive.io.eventloop.EventLoopThread`), not a thread each."""
    import obstore

    try:
        meta = await obstore.head_async(store, key)
    except Exception as exc:
        _raise_unless_gone(exc, url)
        return None
    return _version_of(meta)


def _version_of(meta: Any) -> Version:
    return Version.of_answer(meta.get("e_tag"), meta.get("last_modified"), meta.get("size"))


def _raise_unless_gone(exc: Exception, url: str) -> None:
    """Return when a failed HEAD says there is no such object; otherwise raise a one-line ZSError naming
    ``url``."""
    from obstore.exceptions import NotFoundError

    from zsarchive.io.objects import describe

    if isinstance(exc, (FileNotFoundError, NotFoundError)):  # obstore 0.12 raises the first for a HEAD
        return
    raise describe(exc, url) from None
