"""Where an Icechunk repository's objects come from: a small interface, local directories and object stores.

The reader never touches paths or URLs itself: it asks a ``Storage`` for objects by key.
"""

from __future__ import annotations

import abc
import collections
import errno
import os
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterable, Mapping

from zsarchive.errors import ZSCorrupt, ZSError

if TYPE_CHECKING:  # the read-ahead pool (and concurrent.futures) loads only when a prefetch starts
    from concurrent.futures import Future, ThreadPoolExecutor
from zsarchive.icechunk.kinds import ZS_FILE, archive_not_repository, local_kind
from zsarchive.io.local import check_regular, open_regular
from zsarchive.io.location import Location, parse_location


def read_file_range(
    path: str | os.PathLike, offset: int, length: int, check: Callable[[os.stat_result], None] | None = None
) -> bytes:
    """``length`` bytes at ``offset`` of a local file, after ``check(its stat)`` if given (ZSError,
    one line naming the file, if it cannot be read; ZSCorrupt if it holds fewer bytes)."""
    try:
        with open_regular(path) as handle:
            if check is not None:
                check(os.fstat(handle.fileno()))
            handle.seek(offset)
            data = handle.read(length)
    except OSError as exc:
        raise ZSError(f"cannot read {path}: {exc.strerror or exc}") from None
    if len(data) != length:
        raise ZSCorrupt(f"{path}: holds {len(data)} bytes at offset {offset}, expected {length}")
    return data


class Storage(abc.ABC):
    """Read access to the objects of one repository, by key relative to its root (``snapshots/<id>``)."""

    @property
    @abc.abstractmethod
    def name(self) -> str:
        """Where the repository lives (for messages)."""

    @abc.abstractmethod
    def read(self, key: str) -> bytes | None:
        """The whole object at ``key``, or None if there is none."""

    @abc.abstractmethod
    def list(self, prefix: str) -> list[str]:
        """Names (relative to ``prefix``, a directory like ``refs/``) of the objects below it, sorted."""

    @property
    def can_list(self) -> bool:
        """False where objects can only be fetched by name (a plain HTTP server)."""
        return True

    @abc.abstractmethod
    def read_range(self, key: str, offset: int, length: int) -> bytes:
        """``length`` bytes at ``offset`` of the object at ``key`` (ZSError, one line, if it has fewer)."""

    def prefetch(self, keys: Iterable[str]) -> None:
        """A hint: these objects will be read soon, in this order (remote storage starts reading them)."""

    def close(self) -> None:
        """Release connections and threads."""


class LocalStorage(Storage):
    """A repository in a local directory."""

    def __init__(self, root: str | os.PathLike):
        self.root = Path(root)
        self._real_root = os.path.realpath(root)
        self._inside: set[str] = set()  # directories known to resolve inside the root

    @property
    def name(self) -> str:
        return str(self.root)

    def _path(self, key: str) -> Path:
        # Keys come from repository contents (e.g. backup paths): never let one escape the root.
        if key.startswith("/") or ".." in key.split("/"):
            raise ZSError(f"{self.root}: refusing object key {key!r} outside the repository")
        return self.root / key

    def read(self, key: str) -> bytes | None:
        path = self._path(key)
        try:
            directory = str(path.parent)
            if directory not in self._inside:
                real = os.path.realpath(directory)
                if not _within(real, self._real_root):
                    raise ZSError(f"{path}: refusing a link out of {self.root} (it leads to {real})")
                self._inside.add(directory)
            try:  # the directory resolves inside: only a link as the file itself needs resolving
                fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOFOLLOW)
            except OSError as exc:
                if exc.errno != errno.ELOOP:
                    raise
                return read_regular(path, self.root)
            return _read_fd(fd, path)
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
            return None
        except OSError as exc:
            raise ZSError(f"{path}: cannot open: {exc.strerror}") from None

    def read_range(self, key: str, offset: int, length: int) -> bytes:
        return read_file_range(self._path(key), offset, length)

    def list(self, prefix: str) -> list[str]:
        base = self._path(prefix)
        if not base.is_dir():
            return []
        return sorted(str(p.relative_to(base)) for p in base.rglob("*") if p.is_file())


def _within(real: str, base: str) -> bool:
    """Whether the resolved path ``real`` is the resolved directory ``base`` or lies inside it."""
    return real == base or real.startswith(base.rstrip(os.sep) + os.sep)


def read_regular(path: str | os.PathLike, root: str | os.PathLike) -> bytes:
    """The bytes of the regular file at ``path``, which must resolve inside ``root``.

    Files named by input are opened without blocking and refused unless regular: a FIFO would hang
    the read, a device never end, and a symlink out of ``root`` would hand out any local file.
    FileNotFoundError and the like pass through; every other refusal is a one-line ZSError.
    """
    real, base = os.path.realpath(path), os.path.realpath(root)
    if not _within(real, base):
        raise ZSError(f"{path}: refusing a link out of {root} (it leads to {real})")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
        raise
    except OSError as exc:
        raise ZSError(f"{path}: cannot open: {exc.strerror}") from None
    return _read_fd(fd, path)


def _read_fd(fd: int, path: str | os.PathLike) -> bytes:
    """The bytes of the file open as ``fd`` (closed after), refused unless it is a regular file."""
    with os.fdopen(fd, "rb") as handle:
        check_regular(fd, path)
        try:
            return handle.read()
        except OSError as exc:
            raise ZSError(f"{path}: cannot read: {exc.strerror}") from None


class ObjectStorage(Storage):
    """A repository in an object store (S3, GCS, Azure, HTTP), read through obstore.

    ``prefetch`` keeps up to ``window`` reads in flight ahead of the reader, so a history's many small
    files arrive concurrently instead of one round trip after another; memory holds at most that many.
    """

    def __init__(self, location: Location, window: int = 16):
        from zsarchive.io.objects import object_store

        self.location = location
        self.store = object_store(location)
        self.window = window
        self._waiting: collections.deque[str] = collections.deque()
        self._ahead: dict[str, Future] = {}
        self._pool: ThreadPoolExecutor | None = None

    @property
    def name(self) -> str:
        return self.location.url

    @property
    def can_list(self) -> bool:
        return self.location.kind != "http"

    def _fetch(self, key: str) -> bytes | None:
        import obstore

        from zsarchive.io.objects import describe, is_missing

        try:
            return bytes(obstore.get(self.store, key).bytes())
        except Exception as exc:
            if is_missing(exc):
                return None
            raise describe(exc, f"{self.location.url.rstrip('/')}/{key}") from None

    def read(self, key: str) -> bytes | None:
        future = self._ahead.pop(key, None)
        if future is None:
            try:
                self._waiting.remove(key)
            except ValueError:
                pass
            raw = self._fetch(key)
        else:
            raw = future.result()
        self._fill()
        return raw

    def read_range(self, key: str, offset: int, length: int) -> bytes:
        """``length`` bytes at ``offset`` of the object at ``key`` (ZSError, one line, if it has fewer)."""
        from zsarchive.io.objects import get_bounded

        url = f"{self.location.url.rstrip('/')}/{key}"
        data = get_bounded(self.store, key, {"range": (offset, offset + length)}, length, url)[2] if length else b""
        if len(data) != length:
            raise ZSError(f"{url}: holds {len(data)} bytes at offset {offset}, expected {length}")
        return data

    def prefetch(self, keys: Iterable[str]) -> None:
        self._waiting.extend(k for k in keys if k not in self._ahead)
        self._fill()

    def _fill(self) -> None:
        while self._waiting and len(self._ahead) < self.window:
            if self._pool is None:
                from concurrent.futures import ThreadPoolExecutor

                self._pool = ThreadPoolExecutor(self.window, thread_name_prefix="zsarchive-read")
            key = self._waiting.popleft()
            if key not in self._ahead:
                self._ahead[key] = self._pool.submit(self._fetch, key)

    def list(self, prefix: str) -> list[str]:
        import obstore

        from zsarchive.io.objects import describe

        if not self.can_list:
            raise ZSError(f"{self.location.url}: cannot list {prefix} over plain HTTP")
        base = prefix.rstrip("/") + "/"
        try:
            return sorted(
                item["path"][len(base) :]
                for batch in obstore.list(self.store, base)
                for item in batch
                if item["path"].startswith(base)
            )
        except Exception as exc:
            raise describe(exc, f"{self.location.url.rstrip('/')}/{base}") from None

    def close(self) -> None:
        self._waiting.clear()
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None
        self._ahead.clear()


def open_storage(
    location: str | os.PathLike | Location, storage_options: Mapping[str, object] | None = None, anon: bool = False
) -> Storage:
    """Storage for a local directory, ``file://`` URL or object-store URL; ZSError (one line) otherwise."""
    where = parse_location(location, storage_options, anon)
    if not where.is_local:
        return ObjectStorage(where)
    if not where.path.is_dir():
        if local_kind(where.path) == ZS_FILE:
            raise archive_not_repository(str(location))
        raise ZSError(f"{where.url}: not a directory, so not an Icechunk repository")
    return LocalStorage(where.path)
