"""Where a ZS file's bytes come from: a local file (mmap), a file object, HTTP(S), fsspec URLs."""

from __future__ import annotations

import os
import re

from zsarchive.lazy import lazy_exports
from zsarchive.io.base import Transport
from zsarchive.io.local import FileObjectTransport, LocalFile

# network transports import http.client, ssl or fsspec: only a URL should pay for that
__getattr__ = lazy_exports(__name__, {
    "HTTPTransport": "zsarchive.io.http",
    "ConnectionPool": "zsarchive.io.http",
    "FsspecTransport": "zsarchive.io.fsspec",
})

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")


def open_transport(source) -> Transport:
    """Return a Transport for a path, ``file://``, ``http(s)://`` or fsspec URL (``s3://``, ...),
    open binary file object or Transport."""
    if isinstance(source, Transport):
        return source
    if isinstance(source, (str, os.PathLike)):
        text = os.fspath(source)
        scheme = _SCHEME.match(text)
        if scheme is None:
            return LocalFile(text)
        name = scheme.group(1).lower()
        if name == "file":
            return LocalFile(text[len("file://"):])
        if name in ("http", "https"):
            from zsarchive.io.http import HTTPTransport

            return HTTPTransport(text)
        from zsarchive.io.fsspec import FsspecTransport

        return FsspecTransport(text)
    if hasattr(source, "read") and hasattr(source, "seek"):
        return FileObjectTransport(source)
    raise TypeError(f"cannot read a ZS file from {source!r}: give a path, URL or binary file object")


__all__ = ["Transport", "LocalFile", "FileObjectTransport", "HTTPTransport", "FsspecTransport",
           "open_transport"]
