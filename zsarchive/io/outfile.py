"""An output file that appears whole or not at all: every writer (make, export, consolidate, restore,
checkout) writes into a ``.NAME.PID.partial`` file beside the target and renames it over the target
only once complete; any failure (a full disk, permissions, an error in the input) removes it, and an
``OSError`` becomes one line naming the target.
"""

from __future__ import annotations

import collections
import contextlib
import errno
import functools
import itertools
import os
from pathlib import Path
from typing import Callable, Iterable, Iterator

from zsarchive.errors import ZSError


def check_new_target(path: str | os.PathLike, overwrite: bool) -> None:
    """Refuse, in one line, to write a file at ``path`` where a directory is, or where anything is unless
    ``overwrite``: an archive is meant to be immutable (the fragments built on it no longer open once it
    is replaced). Every writer of a file asks this first (``--force`` on the command line)."""
    name = os.fspath(path)
    if os.path.isdir(name):
        raise ZSError(f"{name}: is a directory, not a file to write")
    if os.path.lexists(name) and not overwrite:
        raise ZSError(f"{name}: exists already; give a new name, or --force (overwrite=True) to replace it")


def partial_path(target: Path) -> Path:
    """Where ``target`` is written until complete: a hidden file beside it (same filesystem, so the
    final rename is atomic)."""
    return target.parent / f".{target.name}.{os.getpid()}.partial"


@contextlib.contextmanager
def whole_file(target: str | os.PathLike, what: str, overwrite: bool = True) -> Iterator[Path]:
    """Yield the partial path to write ``target`` into; on success move it to ``target`` (durably:
    the directory is fsynced), on any failure remove it. ``what`` names the work in the one-line
    error (``export``, ``make``...); ``overwrite=False`` refuses an existing target, also one that
    appears while writing. The writer must fsync the file itself before the block ends."""
    target = Path(target)
    if not overwrite and os.path.lexists(target):
        raise ZSError(f"{target}: cannot create: {os.strerror(errno.EEXIST)}")
    tmp = partial_path(target)
    try:
        yield tmp
        if overwrite:
            os.replace(tmp, target)
        else:
            os.link(tmp, target)  # fails if the target appeared meanwhile, where a rename would clobber it
            os.unlink(tmp)
        fsync_directory(target.parent)
    except OSError as exc:  # disk full, permissions...
        _remove_quietly(tmp)
        raise ZSError(
            f"{target}: {what} failed: {exc.strerror or exc}{f' ({exc.filename})' if exc.filename else ''}"
        ) from None
    except BaseException:
        _remove_quietly(tmp)
        raise


def fsync_directory(directory: Path) -> None:
    """Make a directory's new entries durable. Nothing where the platform or the file system cannot sync a
    directory (it does not open, or its fsync is not supported); any other failure raises OSError."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError as exc:
        if exc.errno not in (errno.EINVAL, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EBADF):
            raise
    finally:
        os.close(fd)


def _remove_quietly(path: Path) -> None:
    try:
        path.unlink()
    except FileNotFoundError:
        pass


@functools.cache
def _sync_file_range() -> Callable[[int, int, int, int], int] | None:
    """Linux's ``sync_file_range`` through ctypes (loaded on first use), or None where there is none."""
    try:
        import ctypes

        function = ctypes.CDLL(None, use_errno=True).sync_file_range
    except (OSError, AttributeError):
        return None
    function.argtypes = (ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint)
    return function


_SYNC_FILE_RANGE_WRITE = 2
_IOV_MAX = 1024
"""The most buffers one ``writev`` takes on Linux and macOS."""
_HELD = 8 << 20
"""Bytes of buffers held at once past the first: a streamed file of any length (its pieces 1 MiB each) is
written in writes of about this much, its memory never its length's."""


def write_all(fd: int, parts: Iterable) -> None:
    """Write the buffers ``parts`` one after another at ``fd``'s position, in as few system calls as
    ``writev`` allows (it may write less than asked); at most ``_IOV_MAX`` of them and about ``_HELD``
    bytes held at once, so a streamed file's buffers are written as they come."""
    parts = iter(parts)
    buffers: collections.deque[memoryview] = collections.deque()
    held = 0

    def refill() -> None:
        nonlocal held
        while len(buffers) < _IOV_MAX and (not buffers or held < _HELD):
            part = next(parts, None)
            if part is None:
                return
            buffers.append(memoryview(part).cast("B"))
            held += len(buffers[-1])

    refill()
    while buffers:
        if hasattr(os, "writev"):
            written = os.writev(fd, list(itertools.islice(buffers, _IOV_MAX)))
        else:
            written = os.write(fd, buffers[0])
        held -= written
        while buffers and written >= len(buffers[0]):
            written -= len(buffers.popleft())
        if written:
            buffers[0] = buffers[0][written:]
        refill()


def start_writeback(fd: int, offset: int, length: int) -> None:
    """Ask the kernel to start writing bytes ``[offset, offset + length)`` of a file (``length`` 0: to its
    end) to the disk, without waiting (Linux ``sync_file_range(SYNC_FILE_RANGE_WRITE)``; elsewhere
    nothing). A hint, its failures ignored: the fsync or sync that follows still decides."""
    function = _sync_file_range()
    if function is not None:
        function(fd, offset, length, _SYNC_FILE_RANGE_WRITE)
