"""Local files through mmap, and arbitrary seekable binary file objects."""

from __future__ import annotations

import errno
import mmap
import os
import stat
import threading
from typing import BinaryIO

from zsarchive.errors import ZSError
from zsarchive.io.base import Transport


def check_regular(fd: int, path: str | os.PathLike) -> None:
    """Refuse the file open as ``fd`` unless it is a regular file (IsADirectoryError for a directory, a
    one-line ZSError otherwise), then make its reads blocking again."""
    mode = os.fstat(fd).st_mode
    if stat.S_ISDIR(mode):
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), os.fspath(path))
    if not stat.S_ISREG(mode):
        raise ZSError(f"{path}: not a regular file (a FIFO or device is never read)")
    os.set_blocking(fd, True)


def open_regular(path: str | os.PathLike) -> BinaryIO:
    """A local file that input names, opened for reading as every such file is: without blocking (opening a
    FIFO would wait for a writer) and refused unless regular (a FIFO would hang a read, a device never
    end). OSError as ``open`` raises it; ZSError for a file that is not regular."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        check_regular(fd, path)
    except BaseException:
        os.close(fd)
        raise
    return os.fdopen(fd, "rb")


class LocalFile(Transport):
    """A local file read through a shared read-only mmap (thread-safe, zero syscalls per read)."""

    def __init__(self, path: str) -> None:
        self.name = path
        try:
            self._file = open_regular(path)
        except OSError as exc:
            raise ZSError(f"{path}: cannot open: {exc.strerror or exc}") from None
        self.size = os.fstat(self._file.fileno()).st_size
        self._map = mmap.mmap(self._file.fileno(), 0, access=mmap.ACCESS_READ) if self.size else b""

    def read(self, offset: int, length: int) -> bytes:
        self._check_range(offset, length)
        return self._map[offset : offset + length]

    def view(self, offset: int, length: int) -> memoryview:
        """Zero-copy view of a checked range (valid until close)."""
        self._check_range(offset, length)
        return memoryview(self._map)[offset : offset + length]

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
