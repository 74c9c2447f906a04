"""Where a ZS file's bytes come from: a local file (mmap), a file object, and (later) HTTP."""

from __future__ import annotations

import os

from zsarchive.transport.base import Transport
from zsarchive.transport.local import FileObjectTransport, LocalFile


def open_transport(source) -> Transport:
    """Return a Transport for a path, ``file://`` URL, open binary file object or Transport."""
    if isinstance(source, Transport):
        return source
    if isinstance(source, (str, os.PathLike)):
        text = os.fspath(source)
        if text.startswith("file://"):
            text = text[len("file://"):]
        return LocalFile(text)
    if hasattr(source, "read") and hasattr(source, "seek"):
        return FileObjectTransport(source)
    raise TypeError(f"cannot read a ZS file from {source!r}: give a path, URL or binary file object")


__all__ = ["Transport", "LocalFile", "FileObjectTransport", "open_transport"]
