"""HTTP(S) GETs of byte ranges over a pool of keep-alive connections (stdlib http.client only): each
answer read within a deadline and never past what can be right, transient failures retried with
backoff, a reused connection the server closed replaced at once. Redirects are never followed."""

from __future__ import annotations

import http.client
import random
import re
import socket
import ssl
import threading
import time
from dataclasses import dataclass
from urllib.parse import urlsplit

from zsarchive.errors import ObjectMissing, ZSCorrupt, ZSError
from zsarchive.io.remote import RequestStats

CONTENT_RANGE = re.compile(r"bytes\s+(?:(\d+)-(\d+)|\*)/(\d+|\*)\s*$")
"""A ``Content-Range`` value: first and last byte (or ``*``) and the whole length (or ``*``)."""
_RETRY_STATUS = frozenset({408, 429, 500, 502, 503, 504})
_ERROR_BODY = 64 * 1024  # bytes of an error answer's body worth reading
# a reused keep-alive connection that the server already closed fails like this before any answer
_STALE = (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError, ConnectionAbortedError)


@dataclass
class Answer:
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

    def __init__(
        self,
        url: str,
        connect_timeout: float = 10.0,
        read_timeout: float = 30.0,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self.host = host_of(url)
        scheme, self._host, self._port = self.host
        self._context = (ssl_context or ssl.create_default_context()) if scheme == "https" else None
        self.timeouts = (connect_timeout, read_timeout)
        self._idle: list[http.client.HTTPConnection] = []
        self._lock = threading.Lock()

    def take(self) -> tuple[http.client.HTTPConnection, bool]:
        """An idle connection (reused=True) or a newly connected one."""
        with self._lock:
            if self._idle:
                return self._idle.pop(), True
        conn = (
            http.client.HTTPConnection(self._host, self._port, timeout=self.timeouts[0])
            if self._context is None
            else http.client.HTTPSConnection(self._host, self._port, timeout=self.timeouts[0], context=self._context)
        )
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


class RangedGets:
    """GETs of one URL's byte ranges (``target``: its path and query) over ``pool``, counted in
    ``stats``: ``retries`` more attempts after a transient failure, ``width`` requests written at
    once, a 200 answer refused past ``max_unranged`` bytes, bodies due at ``min_rate`` bytes/s."""

    def __init__(
        self,
        name: str,
        target: str,
        pool: ConnectionPool,
        stats: RequestStats,
        *,
        retries: int,
        backoff: float,
        width: int,
        max_unranged: int,
        min_rate: float,
    ) -> None:
        self.name = name
        self.stats = stats
        self._target = target
        self._pool = pool
        self._timeouts = pool.timeouts
        self._retries = retries
        self._backoff = backoff
        self._width = width
        self._max_unranged = max_unranged
        self._min_rate = min_rate

    def send(self, headers: dict[str, str], failure: _Retry | None = None) -> Answer:
        """One GET with ``headers`` (a ``Range`` among them) and retries (after a first attempt that
        failed with ``failure``, if given); returns answers 200, 206 and 416, raises ZSError for the rest."""
        attempts = self._retries + 1
        for attempt in range(0 if failure is None else 1, attempts):
            if attempt:
                self.stats.add(retries=1)
                time.sleep(self._delay(attempt))
            try:
                return self._attempt(headers)
            except _Retry as exc:
                failure = exc
        raise ZSError(f"{self.name}: {failure} (gave up after {attempts} attempts)")

    def _delay(self, attempt: int) -> float:
        # exponential backoff with jitter, so concurrent readers do not retry in lockstep
        return self._backoff * (2 ** (attempt - 1)) * (0.5 + random.random() / 2)

    def send_many(self, requests: list[dict[str, str]]) -> list[Answer]:
        """Several GETs at once: each batch is written out on its own connections before any answer
        is read, so the batch costs one round trip; a failed one is then retried alone."""
        answers: list[Answer | _Retry | None] = [None] * len(requests)
        width = self._width
        for first in range(0, len(requests), width):
            started: list[tuple[int, tuple[http.client.HTTPConnection, bool]]] = []
            try:
                for i in range(first, min(first + width, len(requests))):
                    try:
                        started.append((i, self._start(requests[i])))
                    except _Retry as exc:
                        answers[i] = exc
                while started:
                    i, (conn, reused) = started.pop(0)  # _finish pools or closes it, whatever happens
                    try:
                        answers[i] = self._finish(conn, reused, requests[i])
                    except _Retry as exc:
                        answers[i] = exc
            finally:
                for _, (unread, _) in started:
                    unread.close()  # an error cut the batch short: its answer was never read
        # a reused connection found closed counts as no attempt, like in _attempt
        return [
            answer if isinstance(answer, Answer) else self.send(headers, None if isinstance(answer, _Stale) else answer)
            for answer, headers in zip(answers, requests)
        ]

    def _attempt(self, headers: dict[str, str]) -> Answer:
        while True:
            try:
                return self._finish(*self._start(headers), headers)
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
            raise ZSError(f"{self.name}: cannot connect: TLS certificate not trusted ({exc.verify_message})") from None
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

    def _finish(self, conn: http.client.HTTPConnection, reused: bool, headers: dict[str, str]) -> Answer:
        """Read the answer to the GET written on ``conn`` with ``headers``."""
        try:
            response = conn.getresponse()
        except _STALE:
            conn.close()
            raise (_Stale if reused else _Retry)("the server closed the connection before answering") from None
        except TimeoutError:
            conn.close()
            raise _Retry(f"no answer within {self._timeouts[1]} s") from None
        except (OSError, http.client.HTTPException) as exc:
            conn.close()
            raise _Retry(f"request failed: {exc!r}") from None
        self.stats.add(requests=1)
        return self._answer(conn, response, headers)

    def _answer(
        self, conn: http.client.HTTPConnection, response: http.client.HTTPResponse, asked_for: dict[str, str]
    ) -> Answer:
        status, asked = response.status, _asked(asked_for["Range"])
        try:
            limit = _ERROR_BODY
            if status == 200:
                length = response.getheader("Content-Length")
                if length is None or not length.isdigit() or int(length) > self._max_unranged:
                    raise ZSError(
                        f"{self.name}: the server ignores Range requests (HTTP 200 with the whole "
                        f"{length or 'unknown-length'} body); refusing to download more than "
                        f"{self._max_unranged} bytes for each read"
                    )
                limit = self._max_unranged
            elif status == 206:
                limit = asked
                match = CONTENT_RANGE.match(response.getheader("Content-Range", ""))
                if match and match.group(1) is not None and int(match.group(2)) - int(match.group(1)) + 1 > asked:
                    raise ZSError(
                        f"{self.name}: asked for {asked} bytes, the server answers with bytes "
                        f"{match.group(1)}-{match.group(2)}"
                    )
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
            match = CONTENT_RANGE.match(response.getheader("Content-Range", ""))
            if match and match.group(1) is not None and len(body) != int(match.group(2)) - int(match.group(1)) + 1:
                raise _Retry(f"short read: {len(body)} bytes of {int(match.group(2)) - int(match.group(1)) + 1}")
        if status in (200, 206, 416):
            return Answer(status, response.headers, body)
        if status in _RETRY_STATUS:
            raise _Retry(f"HTTP {status} {response.reason}")
        if status == 412:
            pinned = asked_for.get("If-Match") or asked_for.get("If-Unmodified-Since")
            raise ZSCorrupt(
                f"{self.name}: file changed while reading (HTTP 412 Precondition "
                f"Failed{f' for {pinned}' if pinned else ''})"
            )
        if 300 <= status < 400 and response.getheader("Location"):
            raise ZSError(
                f"{self.name}: HTTP {status} {response.reason} to "
                f"{response.getheader('Location')} (redirects are not followed)"
            )
        if status in (404, 410):
            raise ObjectMissing(f"{self.name}: HTTP {status} {response.reason}")
        raise ZSError(f"{self.name}: HTTP {status} {response.reason}")

    def _read_body(self, response: http.client.HTTPResponse, limit: int) -> bytes:
        """The whole body, never more than ``limit`` bytes whatever the headers claim, within a
        deadline that grows with that limit: a server dripping bytes just fast enough to beat the
        socket timeout must not hold a reader forever."""
        expected = response.length
        if expected is not None and expected > limit:
            raise ZSError(
                f"{self.name}: the server announces a body of {expected} bytes where at most {limit} can be right"
            )
        if expected is None:  # chunked, or no usable Content-Length: read to the end, within the limit
            parts, received = [], 0
            deadline = time.monotonic() + self._timeouts[1] + limit / self._min_rate
            while chunk := response.read1(min(limit + 1 - received, 1 << 20)):
                parts.append(chunk)
                received += len(chunk)
                if received > limit:
                    raise ZSError(f"{self.name}: the server sent more than the {limit} bytes that can be right")
                if time.monotonic() > deadline:
                    raise _Retry(
                        f"the body came too slowly ({received} bytes after "
                        f"{self._timeouts[1] + limit / self._min_rate:.1f} s)"
                    )
            return b"".join(parts)
        deadline = time.monotonic() + self._timeouts[1] + expected / self._min_rate
        parts = []
        received = 0
        while received < expected:
            chunk = response.read1(expected - received)
            if not chunk:
                raise _Retry(f"connection lost while reading the body ({received} of {expected} bytes)")
            parts.append(chunk)
            received += len(chunk)
            if received < expected and time.monotonic() > deadline:
                raise _Retry(
                    f"the body came too slowly ({received} of {expected} bytes after "
                    f"{self._timeouts[1] + expected / self._min_rate:.1f} s)"
                )
        response.read()  # reads nothing, but marks the answer finished so the connection is reusable
        return b"".join(parts)
