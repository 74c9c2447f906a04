"""Where written objects go: a local directory or an object store (S3, GCS, Azure), one small API.

A :class:`Sink` writes whole objects by key relative to its root. ``put`` replaces, ``put_new`` creates
only (O_EXCL locally, a conditional put remotely) so that the file which makes a target something --
a repository's ``repo``, a lock -- is never written over another writer's. ``put_all`` keeps many writes in
flight. A sink also lists, reads back and deletes the objects directly under its root, and says when
one was written by the store's own clock (``modified``, ``clock``): what a directory of archives that a
program keeps up to date needs. Every failure is a one-line :class:`~zsarchive.errors.ZSError` naming the key.
"""

from __future__ import annotations

import abc
import errno
import os
import re
import secrets
import shutil
import threading
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Iterator, Literal, Mapping, Union

from zsarchive.errors import ZSCorrupt, ZSError
from zsarchive.io.base import ObjectMissing
from zsarchive.io.location import Location, parse_location
from zsarchive.io.outfile import fsync_directory, start_writeback


class Stream:
    """An object's ``size`` bytes as buffers made one after another by ``parts()`` (an embedded chunk file's
    pieces), written as they come: memory does not follow the object's length. Buffers adding up to another
    size are an error, never a shorter or longer object."""

    def __init__(self, size: int, parts: Callable[[], Iterable[bytes | memoryview]], name: str) -> None:
        self.size = size
        self.parts = parts
        self.name = name

    def __len__(self) -> int:
        return self.size

    def __iter__(self) -> Iterator[bytes | memoryview]:
        given = 0
        for part in self.parts():
            given += len(part)
            if given > self.size:
                break
            yield part
        if given != self.size:
            raise ZSCorrupt(f"{self.name}: {given} bytes or more, not the {self.size} planned")


Data = Union[bytes, bytearray, memoryview, list, Stream]
"""An object's bytes as ``put`` takes them: whole, a list of buffers (the object is their concatenation: a
local file writes them one after another, with no copy of the whole), or a :class:`Stream`."""
Body = Union[Data, Callable[[], bytes]]
"""What ``put_all`` writes: :data:`Data`, or a function that returns bytes (called on a worker thread)."""


BLOCK = 4096
"""The disk block a local file's size is rounded up to when counting the room it takes."""


@dataclass
class Totals:
    """What a restore or checkout is about to write: objects, their bytes, and the disk room they take
    (each object rounded up to whole blocks of :data:`BLOCK` bytes)."""

    files: int = 0
    bytes: int = 0
    room: int = 0
    complete: bool = True
    """False while they are being counted: a refusal then says "at least" (a small archive may claim more
    than any walk over its claims should take before it is refused)."""

    def add(self, size: int) -> None:
        """Count one object of ``size`` bytes."""
        self.files += 1
        self.bytes += size
        self.room += -(-size // BLOCK) * BLOCK

    def __str__(self) -> str:
        return f"{'' if self.complete else 'at least '}{self.files:,} files, {self.bytes:,} bytes"


def check_room(location: Location, totals: Totals, max_bytes: int | None = None) -> None:
    """Refuse, before anything is written, what would write more than ``max_bytes`` or, at a local target,
    more than its file system's free space or free inodes hold (a one-line ZSError saying both numbers)."""
    if max_bytes is not None and totals.bytes > max_bytes:
        raise ZSError(
            f"{location.url}: {totals} to write, more than the limit of {max_bytes:,} bytes "
            "(--max-bytes); nothing written"
        )
    if not location.is_local:
        return
    where = Path(os.path.abspath(location.path))
    while not where.exists() and where != where.parent:
        where = where.parent
    try:
        found = os.statvfs(where)
    except OSError as exc:
        raise ZSError(f"{where}: cannot read the free space: {exc.strerror}") from None
    free = found.f_bavail * found.f_frsize
    if totals.room > free:
        raise ZSError(
            f"{location.url}: {totals} to write ({totals.room:,} bytes on disk), but its file system "
            f"has {free:,} bytes free; nothing written"
        )
    if found.f_files and totals.files > found.f_favail:  # a file system without an inode count says 0
        raise ZSError(
            f"{location.url}: {totals} to write, but its file system has room for "
            f"{found.f_favail:,} more files; nothing written"
        )


class Stopped(Exception):
    """A write ended because ``put_all`` stopped (its own failure or interruption is what is raised)."""


WHOLE_PUT = 64 << 20
"""Objects of at most this many bytes are written in one request (create-only ones conditionally)."""
PART_SIZE = 16 << 20
"""The part size of a larger object's upload."""


class AlreadyExists(ZSError):
    """``put_new`` found an object at its key."""


def body_size(data: Data) -> int:
    """The length of an object's bytes, given whole, as a list of buffers or as a stream."""
    return sum(map(len, data)) if isinstance(data, list) else len(data)


def parts_of(data: Data) -> Iterable[bytes | bytearray | memoryview]:
    """An object's bytes as the buffers to write one after another."""
    return data if isinstance(data, (list, Stream)) else (data,)


class Sink(abc.ABC):
    """Write access to the objects below one root (a directory or an object-store prefix)."""

    def __init__(self, location: Location, window: int = 32):
        self.location = location
        self.window = window
        self.limit: int | None = None
        """The most bytes ``put_all`` writes (None: no limit); an object past it is not written."""
        self._charged = 0
        self._charging = threading.Lock()
        self._stopping = threading.Event()

    @property
    def name(self) -> str:
        """Where the objects go (for messages)."""
        return self.location.url

    def charge(self, key: str, size: int) -> None:
        """Count ``size`` bytes about to be written as ``key``; ZSError past :attr:`limit`."""
        with self._charging:
            self._charged += size
            if self.limit is not None and self._charged > self.limit:
                raise ZSError(f"{self.url(key)}: writing it would pass the limit of {self.limit} bytes (--max-bytes)")

    def url(self, key: str) -> str:
        """The path or URL of ``key`` (for messages)."""
        return self.location.url.rstrip("/") + "/" + key

    @abc.abstractmethod
    def is_empty(self) -> bool:
        """True when the root holds no object at all (or does not exist yet)."""

    @abc.abstractmethod
    def put(self, key: str, data: Data) -> None:
        """Write ``data`` as the object ``key``, replacing any; a reader never sees a partial object."""

    @abc.abstractmethod
    def put_new(self, key: str, data: bytes) -> None:
        """Write ``data`` as ``key`` only if no object is there (:class:`AlreadyExists` otherwise)."""

    def put_all(self, items: Iterable[tuple[str, Body]], done: Callable[[str, int], None] | None = None) -> int:
        """Write every ``(key, body)`` with up to ``window`` writes in flight; ``done(key, size)`` after
        each. Returns the bytes written; the first failure stops the rest and is raised."""
        total = 0
        with ThreadPoolExecutor(self.window, thread_name_prefix="zsarchive-write") as pool:
            running: set[Future] = set()
            try:
                for key, body in items:
                    if len(running) >= self.window:
                        total += self._settle(running, done, FIRST_COMPLETED)
                    running.add(pool.submit(self._write_body, key, body))
                while running:
                    total += self._settle(running, done, FIRST_COMPLETED)
            except BaseException as exc:
                if not isinstance(exc, Exception):  # interrupted: writes under way stop at their next buffer
                    self._stopping.set()
                for future in running:
                    future.cancel()
                raise
        return total

    def parts(self, data: Data) -> Iterator[bytes | bytearray | memoryview]:
        """The buffers of an object to write one after another, ending the write (:class:`Stopped`, its file
        removed) once an interruption (Ctrl-C, SIGTERM) stopped ``put_all``."""
        for part in parts_of(data):
            if self._stopping.is_set():
                raise Stopped("stopped")
            yield part

    def _write_body(self, key: str, body: Body) -> tuple[str, int]:
        data = body() if callable(body) else body
        self.charge(key, body_size(data))
        self.put(key, data)
        return key, body_size(data)

    @staticmethod
    def _settle(running: set[Future], done, when) -> int:
        finished, _ = wait(running, return_when=when)
        written = 0
        for future in finished:
            running.discard(future)
            key, size = future.result()
            written += size
            if done is not None:
                done(key, size)
        return written

    def flush(self) -> None:
        """Make every object written so far durable (object stores: already, once a put returns)."""

    def remove_leftovers(self, directory: str) -> int:
        """Remove what writers that died midway left in ``directory`` (a key prefix without its ``/``): the
        temporaries of a local directory; how many (an object store shows no partial object: none)."""
        return 0

    def close(self) -> None:
        """Release connections."""


class Directory(Sink):
    """A sink that is also read back: a local directory or an object-store prefix whose objects a program
    lists, reads, removes and dates (not a zip file, written once)."""

    @abc.abstractmethod
    def listing(self) -> dict[str, int]:
        """Name -> size of every object directly under the root (none below a ``/``); {} when the root
        does not exist."""

    @abc.abstractmethod
    def get(self, key: str, limit: int) -> bytes | None:
        """The bytes of ``key``, None when there is no such object; a ZSError when it holds more than ``limit``."""

    @abc.abstractmethod
    def delete(self, key: str) -> None:
        """Remove ``key`` (nothing to do when it is absent)."""

    @abc.abstractmethod
    def put_file_new(self, key: str, path: Path) -> None:
        """Write the local file ``path`` as ``key`` only if no object is there (:class:`AlreadyExists`
        otherwise); a reader never sees part of it."""

    @abc.abstractmethod
    def modified(self, key: str) -> int | None:
        """When ``key`` was last written, in microseconds since 1970 by the store's own clock (a local
        file system's, an object store's); None when it is absent."""

    def clock(self) -> int:
        """The store's clock now, in microseconds: the time it stamps on a probe object written and
        removed at once. Ages measured on it (now minus :meth:`modified`) never compare two machines' clocks."""
        probe = f".clock-{secrets.token_hex(8)}"
        self.put(probe, b"")
        try:
            stamp = self.modified(probe)
        finally:
            self.delete(probe)
        if stamp is None:
            raise ZSError(f"{self.url(probe)}: written, then not found")
        return stamp


def check_key(key: str, where: str) -> None:
    """ZSError unless ``key`` is a plain relative path: keys come from archive contents, and none may
    leave the target's root or name it."""
    if not key or key.startswith("/") or any(part in ("", ".", "..") for part in key.split("/")):
        raise ZSError(f"{where}: refusing object key {key!r} (not a plain relative path)")


class LocalSink(Directory):
    """A local directory; each object is written to a temporary name and moved into place."""

    def __init__(self, location: Location, window: int = 8):
        super().__init__(location, window)
        self.root = location.path
        self._made: set[Path] = set()
        self._unsynced: list[Path] = []

    def is_empty(self) -> bool:
        try:
            with os.scandir(self.root) as entries:
                return next(entries, None) is None
        except FileNotFoundError:
            return True
        except NotADirectoryError:
            raise ZSError(f"{self.root}: exists and is not a directory") from None
        except OSError as exc:
            raise ZSError(f"{self.root}: cannot list: {exc.strerror}") from None

    def _place(self, key: str) -> Path:
        """Where ``key`` goes, its directory made (once per directory)."""
        check_key(key, str(self.root))
        path = self.root / key
        if path.parent not in self._made:
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise write_error(exc, path.parent) from None
            self._made.add(path.parent)
        return path

    def _prepare(self, key: str) -> tuple[Path, Path]:
        path = self._place(key)
        return path, path.parent / f".{path.name}.{secrets.token_hex(6)}.tmp"

    _TEMPORARY = re.compile(r"\..+\.[0-9a-f]{12}\.tmp")
    """The name :meth:`_prepare` gives an object's temporary."""

    def remove_leftovers(self, directory: str) -> int:
        check_key(directory, str(self.root))
        removed = 0
        try:
            with os.scandir(self.root / directory) as entries:
                for entry in entries:
                    if entry.name.startswith(".") and self._TEMPORARY.fullmatch(entry.name):
                        os.unlink(entry.path)
                        removed += 1
        except FileNotFoundError:
            return removed
        except OSError as exc:
            raise write_error(exc, self.root / directory) from None
        return removed

    def _write_temp(self, temp: Path, data: Data, durable: bool = False) -> None:
        try:
            with open(temp, "xb") as handle:
                handle.writelines(self.parts(data))
                handle.flush()
                if durable:
                    os.fsync(handle.fileno())
                else:  # to the disk while the next are written: the flush's fsyncs wait for less
                    start_writeback(handle.fileno(), 0, 0)
        except BaseException as exc:
            temp.unlink(missing_ok=True)
            if isinstance(exc, OSError):
                raise write_error(exc, temp) from None
            raise

    def put(self, key: str, data: Data) -> None:
        path, temp = self._prepare(key)
        self._write_temp(temp, data)
        try:
            os.replace(temp, path)
        except OSError as exc:
            temp.unlink(missing_ok=True)
            raise write_error(exc, path) from None
        self._unsynced.append(path)  # list.append is atomic: the writer threads share it

    def put_new(self, key: str, data: bytes) -> None:
        path, temp = self._prepare(key)
        self._write_temp(temp, data, durable=True)
        try:
            os.link(temp, path)  # atomic and exclusive: fails if ``path`` exists
        except FileExistsError:
            raise AlreadyExists(f"{path}: already exists") from None
        except OSError as exc:
            if exc.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EMLINK):
                raise write_error(exc, path) from None
            self._create(path, data)  # a file system without hard links: exclusive, not atomic
        finally:
            temp.unlink(missing_ok=True)
        fsync_directory(path.parent)

    @staticmethod
    def _create(path: Path, data: bytes) -> None:
        try:
            with open(path, "xb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
        except FileExistsError:
            raise AlreadyExists(f"{path}: already exists") from None
        except OSError as exc:
            raise write_error(exc, path) from None

    def listing(self) -> dict[str, int]:
        try:
            with os.scandir(self.root) as entries:
                return {e.name: e.stat().st_size for e in entries if e.is_file(follow_symlinks=False)}
        except FileNotFoundError:
            return {}
        except OSError as exc:
            raise ZSError(f"{self.root}: cannot list: {exc.strerror}") from None

    def get(self, key: str, limit: int) -> bytes | None:
        check_key(key, str(self.root))
        path = self.root / key
        try:
            with open(path, "rb") as handle:
                data = handle.read(limit + 1)
        except (FileNotFoundError, NotADirectoryError):
            return None
        except OSError as exc:
            raise ZSError(f"{path}: cannot read: {exc.strerror}") from None
        if len(data) > limit:
            raise ZSError(f"{path}: holds more than {limit} bytes")
        return data

    def delete(self, key: str) -> None:
        check_key(key, str(self.root))
        try:
            (self.root / key).unlink(missing_ok=True)
        except OSError as exc:
            raise ZSError(f"{self.root / key}: cannot remove: {exc.strerror}") from None

    def put_file_new(self, key: str, path: Path) -> None:
        target = self._place(key)
        try:
            os.link(path, target)  # atomic and exclusive, no copy: the file was written on this file system
        except FileExistsError:
            raise AlreadyExists(f"{target}: already exists") from None
        except OSError as exc:
            if exc.errno not in (errno.EXDEV, errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EMLINK):
                raise write_error(exc, target) from None
            temp = target.parent / f".{target.name}.{secrets.token_hex(6)}.tmp"
            try:
                shutil.copyfile(path, temp)
                _fsync_file(temp)
                os.link(temp, target)
            except FileExistsError:
                raise AlreadyExists(f"{target}: already exists") from None
            except OSError as copy_failed:
                raise write_error(copy_failed, target) from None
            finally:
                temp.unlink(missing_ok=True)
        fsync_directory(target.parent)

    def modified(self, key: str) -> int | None:
        check_key(key, str(self.root))
        try:
            return os.stat(self.root / key).st_mtime_ns // 1000
        except (FileNotFoundError, NotADirectoryError):
            return None
        except OSError as exc:
            raise ZSError(f"{self.root / key}: cannot stat: {exc.strerror}") from None

    def flush(self) -> None:
        """fsync every file written by ``put`` since the last flush and their directories (not ``os.sync``,
        which would wait for every other writer's data on the machine too)."""
        paths, self._unsynced = self._unsynced, []
        with ThreadPoolExecutor(self.window, thread_name_prefix="zsarchive-sync") as pool:
            for _ in pool.map(_fsync_file, paths):
                pass
            for _ in pool.map(fsync_directory, sorted({p.parent for p in paths})):
                pass


def _fsync_file(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError as exc:
        raise write_error(exc, path) from None
    try:
        os.fsync(fd)
    except OSError as exc:
        raise write_error(exc, path) from None
    finally:
        os.close(fd)


def write_error(exc: OSError, path: Path) -> ZSError:
    """The one-line error of a failed write under ``path`` (a full disk and a quota said plainly)."""
    if exc.errno == errno.ENOSPC:
        return ZSError(f"{path}: cannot write: no space left on device")
    if exc.errno == errno.EDQUOT:
        return ZSError(f"{path}: cannot write: disk quota exceeded")
    return ZSError(f"{path}: cannot write: {exc.strerror or exc}")


_WHOLE = 8 << 20
"""A streamed object up to this size is put whole (one request); a larger one in parts."""


OBJECT_WINDOW = 64
"""Writes in flight to an object store unless told otherwise: each put waits on a round trip, not a disk."""


class ObjectSink(Directory):
    """An object-store prefix, written through obstore (whole-object puts; create-only is conditional)."""

    def __init__(self, location: Location, window: int = OBJECT_WINDOW):
        from zsarchive.io.objects import object_store

        super().__init__(location, window)
        self.store = object_store(location)

    def is_empty(self) -> bool:
        import obstore

        from zsarchive.io.objects import describe

        try:
            for batch in obstore.list(self.store, None, chunk_size=1):
                if batch:
                    return False
        except Exception as exc:
            raise describe(exc, self.location.url) from None
        return True

    def _put(
        self, key: str, data: bytes | bytearray | memoryview | Iterator, mode: Literal["create"] | None, **multipart
    ) -> None:
        import obstore
        from obstore import exceptions as oe

        from zsarchive.io.objects import describe

        check_key(key, self.location.url)
        try:
            obstore.put(self.store, key, data, mode=mode, **(multipart or {"use_multipart": False}))
        except (oe.AlreadyExistsError, oe.PreconditionError):
            raise AlreadyExists(f"{self.url(key)}: already exists") from None
        except Exception as exc:
            raise describe(exc, self.url(key)) from None

    def put(self, key: str, data: Data) -> None:
        if isinstance(data, Stream) and data.size > _WHOLE:  # in parts of at most 5 MiB, one at a time
            self._put(key, iter(data), None, use_multipart=True, max_concurrency=1)
        else:
            self._put(key, b"".join(parts_of(data)) if isinstance(data, (list, Stream)) else data, None)

    def put_new(self, key: str, data: bytes) -> None:
        self._put(key, data, "create")

    def listing(self) -> dict[str, int]:
        import obstore

        from zsarchive.io.objects import describe

        try:
            found = obstore.list_with_delimiter(self.store, None)
        except Exception as exc:
            raise describe(exc, self.location.url) from None
        return {item["path"]: int(item["size"]) for item in found["objects"]}

    def get(self, key: str, limit: int) -> bytes | None:
        from zsarchive.io.objects import get_bounded

        check_key(key, self.location.url)
        try:
            return get_bounded(self.store, key, {}, limit, self.url(key))[2]
        except ObjectMissing:
            return None

    def delete(self, key: str) -> None:
        import obstore

        from zsarchive.io.objects import describe, is_missing

        check_key(key, self.location.url)
        try:
            obstore.delete(self.store, key)
        except Exception as exc:
            if not is_missing(exc):
                raise describe(exc, self.url(key)) from None

    def put_file_new(self, key: str, path: Path) -> None:
        size = path.stat().st_size
        if size <= WHOLE_PUT:
            self._put(key, path.read_bytes(), "create")
            return
        # A create-only put is one request, so the whole object in memory and at most 5 GB on S3: a
        # larger file goes in parts, and appears whole when the upload completes, after a check that no
        # object is there (a lock of the caller's keeps other writers away meanwhile).
        if self.modified(key) is not None:
            raise AlreadyExists(f"{self.url(key)}: already exists")
        import obstore

        from zsarchive.io.objects import describe

        try:
            obstore.put(self.store, key, path, use_multipart=True, chunk_size=PART_SIZE, max_concurrency=4)
        except Exception as exc:
            raise describe(exc, self.url(key)) from None

    def modified(self, key: str) -> int | None:
        import obstore

        from zsarchive.io.objects import describe, is_missing

        check_key(key, self.location.url)
        try:
            meta = obstore.head(self.store, key)
        except Exception as exc:
            if is_missing(exc):
                return None
            raise describe(exc, self.url(key)) from None
        stamp = meta["last_modified"]
        return int(stamp.timestamp()) * 1_000_000 + stamp.microsecond


def open_sink(
    target: str | os.PathLike | Location,
    storage_options: Mapping[str, object] | None = None,
    anon: bool = False,
    window: int | None = None,
) -> Directory:
    """A Directory (a Sink read back too) for a local directory, ``file://`` URL or ``s3://``/``gs://``/``az://``
    URL (ZSError otherwise), with ``window`` writes in flight (default: 8 to a directory, :data:`OBJECT_WINDOW`
    to an object store)."""
    where = parse_location(target, storage_options, anon)
    if where.is_local:
        return LocalSink(where, window or 8)
    if where.kind == "http":
        raise ZSError(f"{where.url}: cannot write over plain HTTP (give a directory or an s3://, gs:// or az:// URL)")
    if where.kind == "gs" and where.anon:
        # obstore's GCS client signs every write even when told not to sign: it would ask the
        # instance metadata server for a token rather than send an unsigned request
        raise ZSError(
            f"{where.url}: cannot write to Google Cloud Storage anonymously (give credentials: "
            f"GOOGLE_APPLICATION_CREDENTIALS, GOOGLE_SERVICE_ACCOUNT or service_account_path=FILE)"
        )
    return ObjectSink(where, window or OBJECT_WINDOW)
