"""HTTP(S) byte-range reads over a pool of keep-alive connections (stdlib http.client only).

The object is pinned by the first answers: its length, ETag and Last-Modified. Later requests
carry ``If-Match`` (or ``If-Unmodified-Since``) and every answer is checked again, so a file
replaced on the server fails loudly instead of mixing bytes of two versions.
"""

from __future__ import annotations

import http.client
import random
import re
import socket
import ssl
import threading
import time
from dataclasses import dataclass
from typing import Mapping
from urllib.parse import urlsplit

from zsarchive.errors import ZSCorrupt, ZSError
from zsarchive.io.remote import RemoteTransport

_CONTENT_RANGE = re.compile(r"bytes\s+(?:(\d+)-(\d+)|\*)/(\d+|\*)\s*$")
_RETRY_STATUS = frozenset({408, 429, 500, 502, 503, 504})
# a reused keep-alive connection that the server already closed fails like this before any answer
_ERROR_BODY = 64 * 1024  # bytes of an error answer's body worth reading

_STALE = (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError, ConnectionAbortedError)


@dataclass
class _Answer:
    status: int
    headers: http.client.HTTPMessage
    body: bytes


class _Retry(Exception):
    """One attempt failed in a way that another attempt may cure."""


class _Stale(_Retry):
    """A reused keep-alive connection turned out closed by the server: try a fresh one at once."""


def host_of(url: str) -> tuple[str, str, int | None]:
    """(scheme, host, port) of an http(s) URL, the unit connections are kept for."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ZSError(f"{url}: not an http:// or https:// URL")
    try:
        return parts.scheme, parts.hostname, parts.port
    except ValueError:
        raise ZSError(f"{url}: bad port in URL") from None


class ConnectionPool:
    """Idle keep-alive connections to the host of ``url``; a thread takes one, uses it, gives it back.

    One pool may serve many transports to objects on the same host (e.g. chunk after chunk of a
    repository): pass it as ``HTTPTransport(..., pool=)``; its timeouts and TLS context apply.
    """

    def __init__(self, url: str, connect_timeout: float = 10.0, read_timeout: float = 30.0,
                 ssl_context: ssl.SSLContext | None = None) -> None:
        self.host = host_of(url)
        scheme, self._host, self._port = self.host
        self._cls = http.client.HTTPSConnection if scheme == "https" else http.client.HTTPConnection
        if scheme == "https":
            self._kwargs = {"context": ssl_context or ssl.create_default_context()}
        else:
            self._kwargs = {}
        self.timeouts = (connect_timeout, read_timeout)
        self._idle: list[http.client.HTTPConnection] = []
        self._lock = threading.Lock()

    def take(self) -> tuple[http.client.HTTPConnection, bool]:
        """An idle connection (reused=True) or a newly connected one."""
        with self._lock:
            if self._idle:
                return self._idle.pop(), True
        conn = self._cls(self._host, self._port, timeout=self.timeouts[0], **self._kwargs)
        try:
            conn.connect()
        except BaseException:
            conn.close()
            raise
        # connect and read have separate budgets: the socket keeps the read timeout from here on
        conn.sock.settimeout(self.timeouts[1])
        conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return conn, False

    def give(self, conn: http.client.HTTPConnection) -> None:
        with self._lock:
            self._idle.append(conn)

    def close(self) -> None:
        """Close the idle connections; the pool stays usable and connects anew when asked."""
        with self._lock:
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()


def _asked(range_value: str) -> int:
    """Bytes a ``Range`` header value asks for: ``bytes=A-B`` or ``bytes=-N``."""
    first, _, last = range_value.removeprefix("bytes=").partition("-")
    return int(last) if not first else int(last) - int(first) + 1


class HTTPTransport(RemoteTransport):
    """Random access to one object on an HTTP(S) server through ``Range`` requests.

    ``stats`` counts requests, body bytes, connections opened and retries; ``ssl_context``
    replaces the default certificate checks for https (e.g. a private CA). A request may wait
    ``read_timeout`` for any byte, and a body must arrive within ``read_timeout`` plus its
    length at ``min_rate`` bytes/s; a slower one is retried, then reported. ``pool``: a
    :class:`ConnectionPool` for the URL's host to share with other transports (its timeouts and
    TLS context then apply); without one the transport keeps its own, closed with it.
    """

    def __init__(self, url: str, *, connect_timeout: float = 10.0, read_timeout: float = 30.0,
                 retries: int = 4, backoff: float = 0.2, max_connections: int = 8,
                 max_unranged: int = 16 * 1024 * 1024, headers: Mapping[str, str] | None = None,
                 ssl_context: ssl.SSLContext | None = None, min_rate: float = 64 * 1024,
                 pool: ConnectionPool | None = None) -> None:
        super().__init__(url, max_workers=max_connections)
        host = host_of(url)
        if pool is not None and pool.host != host:
            scheme, name, port = pool.host
            raise ZSError(f"{url}: the connection pool given is for another host "
                          f"({scheme}://{name}{f':{port}' if port else ''})")
        parts = urlsplit(url)
        self._target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        self._headers = {"User-Agent": "zsarchive", "Accept-Encoding": "identity", **(headers or {})}
        self._retries = retries
        self._backoff = backoff
        self._max_unranged = max_unranged
        self._min_rate = min_rate
        self._etag: str | None = None
        self._last_modified: str | None = None
        self._pinned = False
        self._owns_pool = pool is None
        self._pool = pool or ConnectionPool(url, connect_timeout, read_timeout, ssl_context)
        self._timeouts = self._pool.timeouts

    # --- opening -------------------------------------------------------------------------------

    def _open(self, head: int, tail: int) -> tuple[int, bytes, bytes]:
        wanted = []
        if head > 0:
            wanted.append(f"bytes=0-{head - 1}")
        if tail > 0:
            wanted.append(f"bytes=-{tail}")
        if not wanted:
            wanted.append("bytes=0-0")  # only the size is wanted: the smallest answer that tells it
        answers = self._send_many(wanted)  # both go out together: opening costs one round trip
        sizes = set()
        pieces = []
        for answer in answers:
            self._pin(answer.headers)
            if answer.status == 200:
                sizes.add(len(answer.body))
                pieces.append((0, answer.body))
            elif answer.status == 416:
                sizes.add(self._unsatisfiable_size(answer))
                pieces.append((0, b""))
            else:
                start, _, total = self._content_range(answer)
                sizes.add(total)
                pieces.append((start, answer.body))
        if len(sizes) != 1:
            raise ZSCorrupt(f"{self.name}: file changed while reading (answers give lengths "
                            f"{sorted(sizes)})")
        size = sizes.pop()
        whole = next((body for start, body in pieces if start == 0 and len(body) == size), None)
        if whole is not None:
            self._hold(0, whole)  # a server that ignored Range sent everything: keep it
            return size, whole[:head], whole[max(0, size - tail):] if tail else b""
        head, tail = min(head, size), min(tail, size)
        expected = ([(0, head)] if head else []) + ([(size - tail, tail)] if tail else [])
        for (start, body), (want, length) in zip(pieces, expected or [(0, min(1, size))]):
            if (start, len(body)) != (want, length):
                raise ZSError(f"{self.name}: asked for {length} bytes at offset {want}, the server "
                              f"sent {len(body)} at offset {start}")
        return size, pieces[0][1] if head else b"", pieces[-1][1] if tail else b""

    def _unsatisfiable_size(self, answer: _Answer) -> int:
        match = _CONTENT_RANGE.match(answer.headers.get("Content-Range", ""))
        if match is None or match.group(3) != "0":
            raise ZSError(f"{self.name}: the server refused the range request "
                          f"(HTTP 416, Content-Range {answer.headers.get('Content-Range')!r})")
        return 0  # an empty object: no range of it is satisfiable

    # --- one range ------------------------------------------------------------------------------

    @staticmethod
    def _range(offset: int, length: int) -> str:
        return f"bytes={offset}-{offset + length - 1}"

    def _fetch(self, offset: int, length: int) -> bytes:
        return self._body(self._send(self._range(offset, length)), offset, length)

    def read_once(self, offset: int, length: int) -> bytes:
        """The bytes [offset, offset + length) in one request, without learning the size first
        (fewer bytes if the object ends sooner): one range of an object read once, like a chunk."""
        if length <= 0:
            return b""
        answer = self._send(self._range(offset, length))
        if answer.status == 416:
            return b""  # the object ends before offset (the answer names no version to pin)
        self._pin(answer.headers)
        if answer.status == 200:
            return answer.body[offset:offset + length]
        start, end, _ = self._content_range(answer)
        if start != offset or end > offset + length - 1:
            raise ZSError(f"{self.name}: asked for bytes {offset}-{offset + length - 1}, "
                          f"the server sent {start}-{end}")
        return answer.body

    def _fetch_many(self, ranges: list[tuple[int, int]]) -> list[bytes]:
        answers = self._send_many([self._range(offset, length) for offset, length in ranges])
        return [self._body(answer, offset, length) for answer, (offset, length) in zip(answers, ranges)]

    def _body(self, answer: _Answer, offset: int, length: int) -> bytes:
        """The bytes [offset, offset + length) from an answer, after checking it is that range of
        the pinned object."""
        self._pin(answer.headers)
        if answer.status == 200:
            if len(answer.body) != self._size:
                raise ZSCorrupt(f"{self.name}: file changed while reading (length was {self._size}, "
                                f"the server now sends {len(answer.body)} bytes)")
            self._hold(0, answer.body)
            return answer.body[offset:offset + length]
        if answer.status == 416:
            raise ZSCorrupt(f"{self.name}: file changed while reading (bytes {offset}-"
                            f"{offset + length - 1} of {self._size} are no longer there)")
        start, end, total = self._content_range(answer)
        if total != self._size:
            raise ZSCorrupt(f"{self.name}: file changed while reading (length was {self._size}, "
                            f"now {total})")
        if (start, end) != (offset, offset + length - 1):
            raise ZSError(f"{self.name}: asked for bytes {offset}-{offset + length - 1}, "
                          f"the server sent {start}-{end}")
        return answer.body

    def _content_range(self, answer: _Answer) -> tuple[int, int, int]:
        value = answer.headers.get("Content-Range", "")
        match = _CONTENT_RANGE.match(value)
        if match is None or match.group(1) is None or match.group(3) == "*":
            raise ZSError(f"{self.name}: HTTP 206 with unusable Content-Range {value!r}")
        return int(match.group(1)), int(match.group(2)), int(match.group(3))

    def _pin(self, headers: http.client.HTTPMessage) -> None:
        """Remember the object's version from the first answer; insist on it in every later one."""
        etag, modified = headers.get("ETag"), headers.get("Last-Modified")
        if not self._pinned:
            self._etag, self._last_modified, self._pinned = etag, modified, True
            return
        if (self._etag or etag) and etag != self._etag:
            raise ZSCorrupt(f"{self.name}: file changed while reading (ETag was {self._etag}, "
                            f"now {etag})")
        if not self._etag and modified != self._last_modified:
            raise ZSCorrupt(f"{self.name}: file changed while reading (Last-Modified was "
                            f"{self._last_modified}, now {modified})")

    def _request_headers(self, range_value: str) -> dict[str, str]:
        headers = dict(self._headers, Range=range_value)
        if self._pinned:
            # If-Match compares strongly, so a weak ETag can only be checked in the answer
            if self._etag and not self._etag.startswith("W/"):
                headers["If-Match"] = self._etag
            elif self._last_modified:
                headers["If-Unmodified-Since"] = self._last_modified
        return headers

    # --- requests with retries -------------------------------------------------------------------

    def _send(self, range_value: str, failure: _Retry | None = None) -> _Answer:
        """One GET with retries (after a first attempt that failed with ``failure``, if given);
        returns answers 200, 206 and 416, raises ZSError for the rest."""
        attempts = self._retries + 1
        for attempt in range(0 if failure is None else 1, attempts):
            if attempt:
                self.stats.add(retries=1)
                time.sleep(self._delay(attempt))
            try:
                return self._attempt(range_value)
            except _Retry as exc:
                failure = exc
        raise ZSError(f"{self.name}: {failure} (gave up after {attempts} attempts)")

    def _delay(self, attempt: int) -> float:
        # exponential backoff with jitter, so concurrent readers do not retry in lockstep
        return self._backoff * (2 ** (attempt - 1)) * (0.5 + random.random() / 2)

    def _send_many(self, range_values: list[str]) -> list[_Answer]:
        """Several GETs at once: each batch is written out on its own connections before any answer
        is read, so the batch costs one round trip; a failed one is then retried alone."""
        answers: list[_Answer | _Retry | None] = [None] * len(range_values)
        width = self._max_workers
        for first in range(0, len(range_values), width):
            started: list[tuple[int, tuple[http.client.HTTPConnection, bool]]] = []
            try:
                for i in range(first, min(first + width, len(range_values))):
                    try:
                        started.append((i, self._start(self._request_headers(range_values[i]))))
                    except _Retry as exc:
                        answers[i] = exc
                while started:
                    i, (conn, reused) = started.pop(0)  # _finish pools or closes it, whatever happens
                    try:
                        answers[i] = self._finish(conn, reused, _asked(range_values[i]))
                    except _Retry as exc:
                        answers[i] = exc
            finally:
                for _, (unread, _) in started:
                    unread.close()  # an error cut the batch short: its answer was never read
        # a reused connection found closed counts as no attempt, like in _attempt
        return [answer if isinstance(answer, _Answer)
                else self._send(value, None if isinstance(answer, _Stale) else answer)
                for answer, value in zip(answers, range_values)]

    def _attempt(self, range_value: str) -> _Answer:
        headers = self._request_headers(range_value)
        while True:
            try:
                return self._finish(*self._start(headers), _asked(headers["Range"]))
            except _Stale:
                continue  # the server had closed an idle connection: a fresh one is no retry

    def _start(self, headers: dict[str, str]) -> tuple[http.client.HTTPConnection, bool]:
        """Take a connection and write one GET on it."""
        try:
            conn, reused = self._pool.take()
            if not reused:
                self.stats.add(connections=1)
        except ssl.SSLCertVerificationError as exc:
            # no later attempt would trust it either
            raise ZSError(f"{self.name}: cannot connect: TLS certificate not trusted "
                          f"({exc.verify_message})") from None
        except TimeoutError:
            raise _Retry(f"cannot connect within {self._timeouts[0]} s") from None
        except OSError as exc:
            raise _Retry(f"cannot connect: {exc.strerror or exc}") from None
        try:
            conn.request("GET", self._target, headers=headers)
        except (OSError, http.client.HTTPException) as exc:
            conn.close()
            raise (_Stale if reused else _Retry)(f"request failed: {exc!r}") from None
        return conn, reused

    def _finish(self, conn: http.client.HTTPConnection, reused: bool, asked: int) -> _Answer:
        """Read the answer to the GET written on ``conn`` (which asked for ``asked`` bytes)."""
        try:
            response = conn.getresponse()
        except _STALE:
            conn.close()
            raise (_Stale if reused else _Retry)("the server closed the connection before "
                                                 "answering") from None
        except TimeoutError:
            conn.close()
            raise _Retry(f"no answer within {self._timeouts[1]} s") from None
        except (OSError, http.client.HTTPException) as exc:
            conn.close()
            raise _Retry(f"request failed: {exc!r}") from None
        self.stats.add(requests=1)
        return self._answer(conn, response, asked)

    def _answer(self, conn: http.client.HTTPConnection, response: http.client.HTTPResponse,
                asked: int) -> _Answer:
        status = response.status
        try:
            limit = _ERROR_BODY
            if status == 200:
                length = response.getheader("Content-Length")
                if length is None or not length.isdigit() or int(length) > self._max_unranged:
                    raise ZSError(
                        f"{self.name}: the server ignores Range requests (HTTP 200 with the whole "
                        f"{length or 'unknown-length'} body); refusing to download more than "
                        f"{self._max_unranged} bytes for each read")
                limit = self._max_unranged
            elif status == 206:
                limit = asked
                match = _CONTENT_RANGE.match(response.getheader("Content-Range", ""))
                if match and match.group(1) is not None and int(match.group(2)) - int(match.group(1)) + 1 > asked:
                    raise ZSError(f"{self.name}: asked for {asked} bytes, the server answers with bytes "
                                  f"{match.group(1)}-{match.group(2)}")
            body = self._read_body(response, limit)
        except ZSError:
            conn.close()
            raise
        except TimeoutError:
            conn.close()
            raise _Retry(f"no data within {self._timeouts[1]} s while reading the body") from None
        except (OSError, http.client.HTTPException) as exc:
            conn.close()
            raise _Retry(f"connection lost while reading the body ({exc!r})") from None
        except _Retry:
            conn.close()
            raise
        self.stats.add(bytes=len(body))
        if response.will_close:
            conn.close()
        else:
            self._pool.give(conn)
        if status == 206:
            match = _CONTENT_RANGE.match(response.getheader("Content-Range", ""))
            if match and match.group(1) is not None and \
                    len(body) != int(match.group(2)) - int(match.group(1)) + 1:
                raise _Retry(f"short read: {len(body)} bytes of "
                             f"{int(match.group(2)) - int(match.group(1)) + 1}")
        if status in (200, 206, 416):
            return _Answer(status, response.headers, body)
        if status in _RETRY_STATUS:
            raise _Retry(f"HTTP {status} {response.reason}")
        if status == 412:
            pinned = self._etag or self._last_modified
            raise ZSCorrupt(f"{self.name}: file changed while reading (HTTP 412 Precondition "
                            f"Failed{f' for {pinned}' if pinned else ''})")
        if 300 <= status < 400 and response.getheader("Location"):
            raise ZSError(f"{self.name}: HTTP {status} {response.reason} to "
                          f"{response.getheader('Location')} (redirects are not followed)")
        raise ZSError(f"{self.name}: HTTP {status} {response.reason}")

    def _read_body(self, response: http.client.HTTPResponse, limit: int) -> bytes:
        """The whole body, never more than ``limit`` bytes whatever the headers claim, within a
        deadline that grows with that limit: a server dripping bytes just fast enough to beat the
        socket timeout must not hold a reader forever."""
        expected = response.length
        if expected is not None and expected > limit:
            raise ZSError(f"{self.name}: the server announces a body of {expected} bytes where at most "
                          f"{limit} can be right")
        if expected is None:  # chunked, or no usable Content-Length: read to the end, within the limit
            parts, received = [], 0
            deadline = time.monotonic() + self._timeouts[1] + limit / self._min_rate
            while chunk := response.read1(min(limit + 1 - received, 1 << 20)):
                parts.append(chunk)
                received += len(chunk)
                if received > limit:
                    raise ZSError(f"{self.name}: the server sent more than the {limit} bytes that can be right")
                if time.monotonic() > deadline:
                    raise _Retry(f"the body came too slowly ({received} bytes after "
                                 f"{self._timeouts[1] + limit / self._min_rate:.1f} s)")
            return b"".join(parts)
        deadline = time.monotonic() + self._timeouts[1] + expected / self._min_rate
        parts = []
        received = 0
        while received < expected:
            chunk = response.read1(expected - received)
            if not chunk:
                raise _Retry(f"connection lost while reading the body ({received} of {expected} "
                             "bytes)")
            parts.append(chunk)
            received += len(chunk)
            if received < expected and time.monotonic() > deadline:
                raise _Retry(f"the body came too slowly ({received} of {expected} bytes after "
                             f"{self._timeouts[1] + expected / self._min_rate:.1f} s)")
        response.read()  # reads nothing, but marks the answer finished so the connection is reusable
        return b"".join(parts)

    def close(self) -> None:
        super().close()
        if self._owns_pool:
            self._pool.close()
