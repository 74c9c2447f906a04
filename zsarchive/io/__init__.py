"""Where a ZS file's bytes come from: a local file (mmap), a file object, HTTP(S), object stores
(S3, GCS, Azure through obstore) and, for any other scheme, fsspec when it is installed."""

from __future__ import annotations

import os

from zsarchive.lazy import lazy_exports
from zsarchive.io.base import Transport
from zsarchive.io.local import FileObjectTransport, LocalFile
from zsarchive.io.location import SCHEMES, local_path, scheme_of

# network transports import http.client, ssl or fsspec: only a URL should pay for that
__getattr__ = lazy_exports(
    __name__,
    {
        "HTTPTransport": "zsarchive.io.http",
        "ConnectionPool": "zsarchive.io.httpclient",
        "FsspecTransport": "zsarchive.io.fsspec",
        "ObjectTransport": "zsarchive.io.objectfile",
    },
)


def open_transport(source) -> Transport:
    """Return a Transport for a path, ``file://``, ``http(s)://``, ``s3://``, ``gs://``, ``az://`` or other
    fsspec URL, open binary file object or Transport."""
    if isinstance(source, Transport):
        return source
    if isinstance(source, (str, os.PathLike)):
        text = os.fspath(source)
        name = scheme_of(text)
        if name is None:
            return LocalFile(text)
        if name == "file":
            return LocalFile(local_path(text))
        if name in ("http", "https"):
            from zsarchive.io.http import HTTPTransport

            return HTTPTransport(text)
        if SCHEMES.get(name) in ("s3", "gs", "az"):
            from zsarchive.io.objectfile import ObjectTransport

            return ObjectTransport(text)
        from zsarchive.io.fsspec import FsspecTransport

        return FsspecTransport(text)
    if hasattr(source, "read") and hasattr(source, "seek"):
        return FileObjectTransport(source)
    raise TypeError(f"cannot read a ZS file from {source!r}: give a path, URL or binary file object")


__all__ = [
    "Transport",
    "LocalFile",
    "FileObjectTransport",
    "HTTPTransport",
    "FsspecTransport",
    "ObjectTransport",
    "open_transport",
]
