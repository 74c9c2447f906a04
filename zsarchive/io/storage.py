"""Where an Icechunk repository's objects come from: a small interface, and local directories.

Object stores (S3, HTTP ...) can follow by implementing ``Storage``; the reader never touches paths itself.
"""

from __future__ import annotations

import abc
import os
import stat
import urllib.parse
from pathlib import Path

from zsarchive.errors import ZSError


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


class LocalStorage(Storage):
    """A repository in a local directory."""

    def __init__(self, root: str | os.PathLike):
        self.root = Path(root)

    @property
    def name(self) -> str:
        return str(self.root)

    def _path(self, key: str) -> Path:
        # Keys come from repository contents (e.g. backup paths): never let one escape the root.
        if key.startswith("/") or ".." in key.split("/"):
            raise ZSError(f"{self.root}: refusing object key {key!r} outside the repository")
        return self.root / key

    def read(self, key: str) -> bytes | None:
        try:
            return read_regular(self._path(key), self.root)
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
            return None

    def list(self, prefix: str) -> list[str]:
        base = self._path(prefix)
        if not base.is_dir():
            return []
        return sorted(str(p.relative_to(base)) for p in base.rglob("*") if p.is_file())


def read_regular(path: str | os.PathLike, root: str | os.PathLike) -> bytes:
    """The bytes of the regular file at ``path``, which must resolve inside ``root``.

    Files named by input are opened without blocking and refused unless regular: a FIFO would hang
    the read, a device never end, and a symlink out of ``root`` would hand out any local file.
    FileNotFoundError and the like pass through; every other refusal is a one-line ZSError.
    """
    real, base = os.path.realpath(path), os.path.realpath(root)
    if real != base and not real.startswith(base.rstrip(os.sep) + os.sep):
        raise ZSError(f"{path}: refusing a link out of {root} (it leads to {real})")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
        raise
    except OSError as exc:
        raise ZSError(f"{path}: cannot open: {exc.strerror}") from None
    with os.fdopen(fd, "rb") as handle:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise IsADirectoryError(path)
        if not stat.S_ISREG(mode):
            raise ZSError(f"{path}: not a regular file (a FIFO or device is never read)")
        os.set_blocking(fd, True)
        try:
            return handle.read()
        except OSError as exc:
            raise ZSError(f"{path}: cannot read: {exc.strerror}") from None


def open_storage(location: str | os.PathLike) -> Storage:
    """Storage for a local directory path or a ``file://`` URL; ZSError for anything else."""
    text = os.fspath(location)
    if "://" in text:
        url = urllib.parse.urlparse(text)
        if url.scheme != "file" or url.netloc not in ("", "localhost"):
            raise ZSError(f"{text}: unsupported repository location (a local directory or file:// URL)")
        text = urllib.parse.unquote(url.path)
    path = Path(text)
    if not path.is_dir():
        raise ZSError(f"{text}: not a directory, so not an Icechunk repository")
    return LocalStorage(path)
