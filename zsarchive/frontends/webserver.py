"""``zs serve``: a local, read-only web page of an archive (standard library HTTP server).

``/`` and the page's scripts and style are files of this package (no CDN: the page works offline): the
page that ``zs site`` writes, with the JavaScript reader under ``reader/``; served here it asks ``/api/NAME``,
JSON from :class:`~zsarchive.frontends.webapi.ArchiveAPI`. Every response forbids inline script
(Content-Security-Policy), and the page inserts every archive-derived string as text.
"""

from __future__ import annotations

import ipaddress
import json
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Iterable
from urllib.parse import parse_qsl, urlsplit

from zsarchive.archive import NotFound, RepoArchive
from zsarchive.errors import ZSCorrupt, ZSError
from zsarchive.frontends.page import content_type, page_files
from zsarchive.frontends.webapi import ArchiveAPI

SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
    "img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}
_MESSAGE = 2000
"""Longest error message sent (an archive can put anything in one)."""
LOCAL_NAMES = frozenset({"127.0.0.1", "localhost", "::1", "[::1]"})
"""Host names every server answers to: a page of another site whose name was made to resolve to the
server's address (DNS rebinding) names its own site in the Host header, and gets nothing."""


class ArchiveServer(ThreadingHTTPServer):
    """The page and its API for one open archive, on ``host:port`` (port 0: any free port). It answers only
    requests whose Host header names it: a loopback name, the address it listens on, or one of
    ``allowed_hosts`` (the names it is reached by on a network, with or without a port)."""

    daemon_threads = True

    def __init__(self, archive: RepoArchive, host: str = "127.0.0.1", port: int = 0, allowed_hosts: Iterable[str] = ()):
        self.api = ArchiveAPI(archive)
        self.static = {f"/{name}": (body, content_type(name)) for name, body in page_files()}
        self.static["/"] = self.static["/index.html"]
        super().__init__((host, port), _Handler)
        bound = self.host
        own = () if ipaddress.ip_address(bound).is_unspecified else (bound, f"[{bound}]")
        self.names = LOCAL_NAMES | set(own) | {_host_name(name).lower() for name in allowed_hosts}
        """The Host names it answers to (without a port)."""

    @property
    def host(self) -> str:
        """The address the server listens on, as text (``127.0.0.1``, ``::1``)."""
        return str(self.server_address[0])

    @property
    def url(self) -> str:
        """Where the page is, e.g. ``http://127.0.0.1:8000/``."""
        host, port = self.host, self.server_address[1]
        return f"http://{f'[{host}]' if ':' in host else host}:{port}/"


class _Handler(BaseHTTPRequestHandler):
    server: ArchiveServer
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        url = urlsplit(self.path)
        if _host_name(self.headers.get("Host", "")).lower() not in self.server.names:
            self._send(
                403,
                "text/plain; charset=utf-8",
                b"this server answers only to its own names: "
                b"127.0.0.1, localhost, the address it listens on and those given with --allow-host\n",
            )
        elif url.path.startswith("/api/"):
            self._api(url.path[len("/api/") :], dict(parse_qsl(url.query, keep_blank_values=True)))
        elif url.path in self.server.static:
            body, kind = self.server.static[url.path]
            self._send(200, kind, body)
        else:
            self._send(404, "text/plain; charset=utf-8", b"not found\n")

    def _api(self, name: str, params: dict[str, str]) -> None:
        try:
            status, answer = 200, self.server.api.answer(name, params)
        except NotFound as exc:
            status, answer = 404, {"error": str(exc)[:_MESSAGE]}
        except ZSCorrupt as exc:  # the archive's fault, not the request's
            status, answer = 500, {"error": str(exc)[:_MESSAGE]}
        except ZSError as exc:  # a request the archive cannot answer as asked (a bad REF, parameter, ...)
            status, answer = 400, {"error": str(exc)[:_MESSAGE]}
        except Exception as exc:  # a bug must not take the page down: the page shows it in one line
            status, answer = 500, {"error": f"internal error: {type(exc).__name__}: {exc}"[:_MESSAGE]}
        self._send(status, "application/json; charset=utf-8", json.dumps(answer, ensure_ascii=False).encode())

    def _send(self, status: int, kind: str, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        for name, value in SECURITY_HEADERS.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args) -> None:  # the terminal is for the URL and errors
        pass


def _host_name(host: str) -> str:
    """The name in a Host header, without its port."""
    return host if host.endswith("]") else host.rsplit(":", 1)[0] if host.count(":") == 1 else host
