"""Object stores and other fsspec URLs (s3://, gs://, az://, ...) when fsspec is installed.

The object is opened once through its filesystem; for buffered remote files (s3fs, gcsfs, ...)
each read is one ranged request through the file's ``_fetch_range`` hook, which pins the version
the file was opened at (s3fs sends ``If-Match`` with the ETag it saw).
"""

from __future__ import annotations

import errno
from contextlib import contextmanager
from typing import Any, Iterator

from zsarchive.errors import ZSCorrupt, ZSError
from zsarchive.io.remote import RemoteTransport


class FsspecTransport(RemoteTransport):
    """Random access to one object behind an fsspec URL; ``storage_options`` go to the filesystem."""

    def __init__(self, url: str, *, max_workers: int = 8, **storage_options: Any) -> None:
        super().__init__(url, max_workers=max_workers)
        try:
            import fsspec
        except ImportError:
            raise ZSError(f"{url}: reading this URL needs fsspec: pip install 'zsarchive[fsspec]'") from None
        with self._errors():
            self._fs, self._path = fsspec.core.url_to_fs(url, **storage_options)
        self._file: Any = None

    @contextmanager
    def _errors(self) -> Iterator[None]:
        """Turn the many exception types of fsspec back ends into one-line zsarchive errors."""
        try:
            yield
        except ZSError:
            raise
        except ImportError as exc:
            raise ZSError(f"{self.name}: this URL needs a back end that is not installed ({exc})") from None
        except FileNotFoundError:
            raise ZSError(f"{self.name}: not found") from None
        except PermissionError as exc:
            raise ZSError(f"{self.name}: access denied ({exc})") from None
        except Exception as exc:  # back ends raise their own types (botocore, aiohttp, ...)
            text = str(exc) or type(exc).__name__
            # s3fs's FileExpired carries EBUSY; other back ends only say "precondition" in their message
            if getattr(exc, "errno", None) == errno.EBUSY or "precondition" in text.lower():
                raise ZSCorrupt(f"{self.name}: file changed while reading ({text})") from None
            raise ZSError(f"{self.name}: {text}") from None

    def _open(self, head: int, tail: int) -> tuple[int, bytes, bytes]:
        with self._errors():
            self._fs.invalidate_cache(self._path)  # a cached listing may describe an older version
            self._file = self._fs.open(self._path, "rb", cache_type="none")
            size = self._file.size
        head, tail = min(head, size), min(tail, size)
        head_bytes, tail_bytes = self._fetch_concurrently([(0, head), (size - tail, tail)], size)
        return size, head_bytes, tail_bytes

    def _fetch_concurrently(self, ranges: list[tuple[int, int]], size: int) -> list[bytes]:
        """Fetch ranges of a just-opened object concurrently, before ``size`` is published."""
        wanted = [(offset, length) for offset, length in ranges if length]
        bodies = iter(self._executor().map(lambda r: self._fetch_sized(r[0], r[1], size), wanted))
        return [next(bodies) if length else b"" for _, length in ranges]

    def _fetch(self, offset: int, length: int) -> bytes:
        return self._fetch_sized(offset, length, self.size)

    def _fetch_sized(self, offset: int, length: int, size: int) -> bytes:
        with self._errors():
            if hasattr(self._file, "_fetch_range"):
                data = self._file._fetch_range(offset, offset + length)
            else:
                data = self._fs.cat_file(self._path, offset, offset + length)
        self.stats.add(requests=1, bytes=len(data))
        if len(data) != length:
            raise ZSCorrupt(
                f"{self.name}: file changed while reading (asked for {length} bytes at "
                f"offset {offset} of {size}, got {len(data)})"
            )
        return bytes(data)

    def close(self) -> None:
        super().close()
        if self._file is not None:
            self._file.close()
