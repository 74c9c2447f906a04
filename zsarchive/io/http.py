"""Random access to one object over HTTP(S): byte ranges through :mod:`httpclient <zsarchive.io.httpclient>`.

The object is pinned by the first answers: its length, ETag and Last-Modified. Later requests
carry ``If-Match`` (or ``If-Unmodified-Since``) and every answer is checked again, so a file
replaced on the server fails loudly instead of mixing bytes of two versions.
"""

from __future__ import annotations

import http.client
import ssl
from typing import Mapping
from urllib.parse import urlsplit

from zsarchive.errors import ZSCorrupt, ZSError
from zsarchive.io.httpclient import CONTENT_RANGE, Answer, ConnectionPool, RangedGets, host_of
from zsarchive.io.remote import RemoteTransport


class HTTPTransport(RemoteTransport):
    """Random access to one object on an HTTP(S) server through ``Range`` requests.

    ``stats`` counts requests, body bytes, connections opened and retries; ``ssl_context``
    replaces the default certificate checks for https (e.g. a private CA). A request may wait
    ``read_timeout`` for any byte, and a body must arrive within ``read_timeout`` plus its
    length at ``min_rate`` bytes/s; a slower one is retried, then reported. ``pool``: a
    :class:`ConnectionPool` for the URL's host to share with other transports (its timeouts and
    TLS context then apply); without one the transport keeps its own, closed with it.
    """

    def __init__(
        self,
        url: str,
        *,
        connect_timeout: float = 10.0,
        read_timeout: float = 30.0,
        retries: int = 4,
        backoff: float = 0.2,
        max_connections: int = 8,
        max_unranged: int = 16 * 1024 * 1024,
        headers: Mapping[str, str] | None = None,
        ssl_context: ssl.SSLContext | None = None,
        min_rate: float = 64 * 1024,
        pool: ConnectionPool | None = None,
    ) -> None:
        super().__init__(url, max_workers=max_connections)
        host = host_of(url)
        if pool is not None and pool.host != host:
            scheme, name, port = pool.host
            raise ZSError(
                f"{url}: the connection pool given is for another host ({scheme}://{name}{f':{port}' if port else ''})"
            )
        parts = urlsplit(url)
        self._target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        self._headers = {"User-Agent": "zsarchive", "Accept-Encoding": "identity", **(headers or {})}
        self._etag: str | None = None
        self._last_modified: str | None = None
        self._pinned = False
        self._owns_pool = pool is None
        self._pool = pool or ConnectionPool(url, connect_timeout, read_timeout, ssl_context)
        self._gets = RangedGets(
            self.name,
            self._target,
            self._pool,
            self.stats,
            retries=retries,
            backoff=backoff,
            width=self._max_workers,
            max_unranged=max_unranged,
            min_rate=min_rate,
        )

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
            raise ZSCorrupt(f"{self.name}: file changed while reading (answers give lengths {sorted(sizes)})")
        size = sizes.pop()
        whole = next((body for start, body in pieces if start == 0 and len(body) == size), None)
        if whole is not None:
            self._hold(0, whole)  # a server that ignored Range sent everything: keep it
            return size, whole[:head], whole[max(0, size - tail) :] if tail else b""
        head, tail = min(head, size), min(tail, size)
        expected = ([(0, head)] if head else []) + ([(size - tail, tail)] if tail else [])
        for (start, body), (want, length) in zip(pieces, expected or [(0, min(1, size))]):
            if (start, len(body)) != (want, length):
                raise ZSError(
                    f"{self.name}: asked for {length} bytes at offset {want}, the server "
                    f"sent {len(body)} at offset {start}"
                )
        return size, pieces[0][1] if head else b"", pieces[-1][1] if tail else b""

    def _unsatisfiable_size(self, answer: Answer) -> int:
        match = CONTENT_RANGE.match(answer.headers.get("Content-Range", ""))
        if match is None or match.group(3) != "0":
            raise ZSError(
                f"{self.name}: the server refused the range request "
                f"(HTTP 416, Content-Range {answer.headers.get('Content-Range')!r})"
            )
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
            return answer.body[offset : offset + length]
        start, end, _ = self._content_range(answer)
        if start != offset or end > offset + length - 1:
            raise ZSError(f"{self.name}: asked for bytes {offset}-{offset + length - 1}, the server sent {start}-{end}")
        return answer.body

    def _fetch_many(self, ranges: list[tuple[int, int]]) -> list[bytes]:
        answers = self._send_many([self._range(offset, length) for offset, length in ranges])
        return [self._body(answer, offset, length) for answer, (offset, length) in zip(answers, ranges)]

    def _body(self, answer: Answer, offset: int, length: int) -> bytes:
        """The bytes [offset, offset + length) from an answer, after checking it is that range of
        the pinned object."""
        self._pin(answer.headers)
        if answer.status == 200:
            if len(answer.body) != self._size:
                raise ZSCorrupt(
                    f"{self.name}: file changed while reading (length was {self._size}, "
                    f"the server now sends {len(answer.body)} bytes)"
                )
            self._hold(0, answer.body)
            return answer.body[offset : offset + length]
        if answer.status == 416:
            raise ZSCorrupt(
                f"{self.name}: file changed while reading (bytes {offset}-"
                f"{offset + length - 1} of {self._size} are no longer there)"
            )
        start, end, total = self._content_range(answer)
        if total != self._size:
            raise ZSCorrupt(f"{self.name}: file changed while reading (length was {self._size}, now {total})")
        if (start, end) != (offset, offset + length - 1):
            raise ZSError(f"{self.name}: asked for bytes {offset}-{offset + length - 1}, the server sent {start}-{end}")
        return answer.body

    def _content_range(self, answer: Answer) -> tuple[int, int, int]:
        value = answer.headers.get("Content-Range", "")
        match = CONTENT_RANGE.match(value)
        if match is None or match.group(1) is None or match.group(3) == "*":
            raise ZSError(f"{self.name}: HTTP 206 with unusable Content-Range {value!r}")
        return int(match.group(1)), int(match.group(2)), int(match.group(3))

    @property
    def version(self) -> tuple[str | None, str | None]:
        """The object's ETag and Last-Modified as the server's answers give them (None: not sent,
        or nothing read yet)."""
        return self._etag, self._last_modified

    def _pin(self, headers: http.client.HTTPMessage) -> None:
        """Remember the object's version from the first answer; insist on it in every later one."""
        etag, modified = headers.get("ETag"), headers.get("Last-Modified")
        if not self._pinned:
            self._etag, self._last_modified, self._pinned = etag, modified, True
            return
        if (self._etag or etag) and etag != self._etag:
            raise ZSCorrupt(f"{self.name}: file changed while reading (ETag was {self._etag}, now {etag})")
        if not self._etag and modified != self._last_modified:
            raise ZSCorrupt(
                f"{self.name}: file changed while reading (Last-Modified was {self._last_modified}, now {modified})"
            )

    def _request_headers(self, range_value: str) -> dict[str, str]:
        headers = dict(self._headers, Range=range_value)
        if self._pinned:
            # If-Match compares strongly, so a weak ETag can only be checked in the answer
            if self._etag and not self._etag.startswith("W/"):
                headers["If-Match"] = self._etag
            elif self._last_modified:
                headers["If-Unmodified-Since"] = self._last_modified
        return headers

    def _send(self, range_value: str) -> Answer:
        return self._gets.send(self._request_headers(range_value))

    def _send_many(self, range_values: list[str]) -> list[Answer]:
        return self._gets.send_many([self._request_headers(value) for value in range_values])

    def close(self) -> None:
        super().close()
        if self._owns_pool:
            self._pool.close()
