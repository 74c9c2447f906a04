"""Local files through mmap, and arbitrary seekable binary file objects."""

from __future__ import annotations

import mmap
import os
import threading

from zsarchive.errors import ZSError
from zsarchive.io.base import Transport


class LocalFile(Transport):
    """A local file read through a shared read-only mmap (thread-safe, zero syscalls per read)."""

    def __init__(self, path: str) -> None:
        self.name = path
        try:
            self._file = open(path, "rb")
        except OSError as exc:
            raise ZSError(f"{path}: cannot open: {exc.strerror or exc}") from None
        self.size = os.fstat(self._file.fileno()).st_size
        self._map = mmap.mmap(self._file.fileno(), 0, access=mmap.ACCESS_READ) if self.size else b""

    def read(self, offset: int, length: int) -> bytes:
        self._check_range(offset, length)
        return self._map[offset:offset + length]

    def view(self, offset: int, length: int) -> memoryview:
        """Zero-copy view of a checked range (valid until close)."""
        self._check_range(offset, length)
        return memoryview(self._map)[offset:offset + length]

    def close(self) -> None:
        if isinstance(self._map, mmap.mmap):
            try:
                self._map.close()
            except BufferError:
                pass  # a caller still holds a view; the map closes when it is released
        self._file.close()


class FileObjectTransport(Transport):
    """Any seekable binary file object; reads are serialized with a lock."""

    def __init__(self, fileobj) -> None:
        self._f = fileobj
        self.name = getattr(fileobj, "name", None) or repr(fileobj)
        self._lock = threading.Lock()
        self._f.seek(0, os.SEEK_END)
        self.size = self._f.tell()

    def read(self, offset: int, length: int) -> bytes:
        self._check_range(offset, length)
        with self._lock:
            self._f.seek(offset)
            data = self._f.read(length)
        self._check_range(offset, len(data) if len(data) == length else self.size + 1)
        return data
