"""A ``.zip`` file as a write target: zarr-python's ``ZipStore`` layout (one STORED entry per key).

The file is written under a temporary name beside the target and linked into place by :meth:`commit`,
so a failed or interrupted write never leaves a zip at the target. Entries are written in the order
``put_all`` is given them, with a fixed timestamp: the same objects give the same bytes.
"""

from __future__ import annotations

import os
import secrets
import threading
import zipfile
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from typing import BinaryIO, Callable, Iterable

from zsarchive.errors import ZSError
from zsarchive.io.location import Location
from zsarchive.io.names import check_portable
from zsarchive.io.sink import AlreadyExists, Body, Sink, body_size, check_key, parts_of, write_error

_EPOCH = (1980, 1, 1, 0, 0, 0)
"""Every entry's time: the earliest a zip can say, so the bytes depend on the objects alone."""


class ZipSink(Sink):
    """Objects as entries of one new zip file at ``location`` (a local path); see :meth:`commit`."""

    def __init__(self, location: Location, window: int = 8):
        super().__init__(location, window)
        self.path = location.url
        self._temp = os.path.join(
            os.path.dirname(os.path.abspath(self.path)) or ".",
            f".{os.path.basename(self.path)}.{secrets.token_hex(6)}.tmp",
        )
        self._lock = threading.Lock()
        self._zip: zipfile.ZipFile | None = None
        self._handle: BinaryIO | None = None

    def is_empty(self) -> bool:
        """True if nothing is at the path, or an empty file (a zip holds at least its directory)."""
        try:
            return os.stat(self.path).st_size == 0 and os.path.isfile(self.path)
        except FileNotFoundError:
            return True
        except OSError as exc:
            raise write_error(exc, self.path) from None

    def _open(self) -> zipfile.ZipFile:
        if self._zip is None:
            try:
                self._handle = open(self._temp, "xb")
                self._zip = zipfile.ZipFile(self._handle, "w", zipfile.ZIP_STORED, allowZip64=True)
            except OSError as exc:
                raise write_error(exc, self.path) from None
        return self._zip

    def put(self, key: str, data: bytes) -> None:
        """Append the entry ``key``: a portable name (no backslash, drive letter, ``..``, NUL or control
        character, which other readers take for paths), and never a second entry of one name (readers
        disagree on which of two holds)."""
        check_key(key, self.path)
        check_portable(key, self.path)
        info = zipfile.ZipInfo(key, _EPOCH)
        info.compress_type = zipfile.ZIP_STORED
        with self._lock:
            if key in self._open().NameToInfo:
                raise ZSError(f"{self.path}: refusing a second entry named {key!r}")
            try:
                with self._open().open(info, "w", force_zip64=body_size(data) >= 1 << 31) as entry:
                    entry.writelines(parts_of(data))
            except OSError as exc:
                raise write_error(exc, self.path) from None

    def put_new(self, key: str, data: bytes) -> None:
        """As :meth:`put`: the file is new, so no entry precedes this one under ``key``."""
        self.put(key, data)

    def put_all(self, items: Iterable[tuple[str, Body]], done: Callable[[str, int], None] | None = None) -> int:
        """Bodies are made on ``window`` threads and written in the order given."""
        total = 0
        with ThreadPoolExecutor(self.window, thread_name_prefix="zsarchive-zip") as pool:
            running: deque[tuple[str, Future]] = deque()
            try:
                for key, body in items:
                    running.append((key, pool.submit(body) if callable(body) else _ready(body)))
                    if len(running) > self.window:
                        total += self._write_next(running, done)
                while running:
                    total += self._write_next(running, done)
            except BaseException:
                for _, future in running:
                    future.cancel()
                raise
        return total

    def _write_next(self, running: deque, done: Callable[[str, int], None] | None) -> int:
        key, future = running.popleft()
        data = future.result()
        self.charge(key, body_size(data))
        self.put(key, data)
        size = body_size(data)
        if done is not None:
            done(key, size)
        return size

    def commit(self) -> None:
        """Finish the zip (its central directory), flush it to disk, and put it at the target path;
        ZSError if something appeared there meanwhile."""
        archive = self._open()
        try:
            archive.close()  # the central directory; the file stays open (ZipFile did not open it)
            self._handle.flush()
            os.fsync(self._handle.fileno())
            self._handle.close()
            if os.path.lexists(self.path) and self.is_empty():
                os.replace(self._temp, self.path)  # an empty file given as the target
            else:
                os.link(self._temp, self.path)  # exclusive: never over a file made meanwhile
        except FileExistsError:
            raise AlreadyExists(f"{self.path}: appeared while writing; nothing written") from None
        except OSError as exc:
            raise write_error(exc, self.path) from None
        finally:
            self.abort()

    def abort(self) -> None:
        """Drop the temporary file: nothing is left at or beside the target."""
        if self._zip is not None:
            self._zip.fp = None  # a ZipFile closed (or collected) later would write its directory
            self._zip = None
        if self._handle is not None:
            try:
                self._handle.close()
            except OSError:
                pass
            self._handle = None
        try:
            os.unlink(self._temp)
        except FileNotFoundError:
            pass
        except OSError as exc:
            raise ZSError(f"{self._temp}: cannot remove: {exc.strerror}") from None


def _ready(value: bytes | bytearray | memoryview) -> Future:
    future: Future = Future()
    future.set_result(value)
    return future
