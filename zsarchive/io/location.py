"""Where bytes live: a local path or an object-store URL, with what it takes to reach it.

A :class:`Location` is plain data (picklable), so worker processes and cluster workers can reopen the
same repository or archive; :mod:`zsarchive.io.objects` turns a remote one into an obstore store.
"""

from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING, Mapping

from zsarchive.errors import ZSError
from zsarchive.typedtuple import TypedTuple

if TYPE_CHECKING:
    from pathlib import Path

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")

SCHEMES = {
    "s3": "s3",
    "s3a": "s3",
    "gs": "gs",
    "gcs": "gs",
    "az": "az",
    "azure": "az",
    "abfs": "az",
    "abfss": "az",
    "http": "http",
    "https": "http",
}
"""Remote URL schemes and the kind of object store each names."""


class Location(TypedTuple):
    """A local path (``kind == "file"``) or a remote URL with its storage options and anonymity."""

    url: str
    kind: str
    options: tuple[tuple[str, str], ...] = ()
    anon: bool = False

    @property
    def is_local(self) -> bool:
        """True for a local path or ``file://`` URL."""
        return self.kind == "file"

    @property
    def path(self) -> Path:
        """The local path (only for a local location)."""
        from pathlib import Path  # imported here: a lookup in a local archive needs neither it nor urllib

        return Path(self.url)

    def child(self, key: str) -> "Location":
        """The location of ``key`` below this one (a directory or URL prefix), same options."""
        if self.is_local:
            return Location(os.path.join(self.url, key), "file")
        return Location(self.url.rstrip("/") + "/" + key, self.kind, self.options, self.anon)

    def __str__(self) -> str:
        return self.url


def scheme_of(text: str) -> str | None:
    """The URL scheme of ``text`` in lower case, or None for a plain path."""
    found = _SCHEME.match(text)
    return found.group(1).lower() if found else None


def is_url(source: object) -> bool:
    """Whether ``source`` is a URL read over the network (any scheme but ``file://``)."""
    return isinstance(source, str) and scheme_of(source) not in (None, "file")


def local_path(source: str | os.PathLike) -> str:
    """The path a local path or ``file://`` URL names (%-escapes undone); ZSError for another URL."""
    location = parse_location(source)
    if not location.is_local:
        raise ZSError(f"{os.fspath(source)}: not a local path or file:// URL")
    return location.url


def parse_location(
    source: str | os.PathLike | Location, storage_options: Mapping[str, object] | None = None, anon: bool = False
) -> Location:
    """Classify a path or URL; ZSError (one line) for a scheme no store here can read."""
    if isinstance(source, Location):
        return source
    text = os.fspath(source)
    scheme = scheme_of(text)
    if scheme is None:
        return Location(text, "file")
    import urllib.parse  # only URLs pay for it (with ipaddress): a plain path is most lookups' input

    if scheme == "file":
        url = urllib.parse.urlparse(text)
        if url.netloc not in ("", "localhost"):
            raise ZSError(f"{text}: a file:// URL names a local path (file:///dir), not host {url.netloc!r}")
        return Location(urllib.parse.unquote(url.path), "file")
    kind = SCHEMES.get(scheme)
    if kind is None:
        raise ZSError(
            f"{text}: unsupported location (a local path, or an s3://, gs://, az://, abfs://, http:// or https:// URL)"
        )
    if kind != "http" and not urllib.parse.urlparse(text).netloc:
        raise ZSError(f"{text}: names no bucket or container")
    options = tuple(sorted((str(k), str(v)) for k, v in (storage_options or {}).items()))
    return Location(text, kind, options, bool(anon))
