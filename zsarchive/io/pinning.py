"""Whether an answer is the version of an object that a reference pins: by ETag, by modification
time, or both (as an Icechunk virtual chunk ref's checksum does).

Requests carry the pin as preconditions (``If-Match``, ``If-Unmodified-Since``), but many servers,
caches and CDNs ignore them and answer with whatever they hold now; so every answer's own ETag and
Last-Modified are checked too.
"""

from __future__ import annotations

import os
from datetime import datetime, timezone
from typing import NamedTuple


def opaque_tag(etag: str) -> str:
    """An ETag without its weak marker and quotes: ``W/"x"``, ``"x"`` and ``x`` all give ``x``
    (refs store ETags quoted or not; a weak answer names the same opaque tag)."""
    tag = etag.strip()
    if tag.startswith("W/"):
        tag = tag[2:]
    return tag.strip('"')


def http_date(seconds: int) -> str | None:
    """``seconds`` since the epoch as an HTTP date, or None past what an HTTP date can say."""
    try:
        from email.utils import formatdate  # here: email (with socket) loads only for a pinned HTTP read

        return formatdate(seconds, usegmt=True)
    except (OverflowError, ValueError, OSError):
        return None


def http_seconds(value: str | None) -> int | None:
    """An HTTP date header (``Last-Modified``) as whole seconds since the epoch; None if absent or
    not a date."""
    if not value:
        return None
    try:
        from email.utils import parsedate_to_datetime

        moment = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    return seconds_of(moment)


def seconds_of(moment: datetime | None) -> int | None:
    """A time as whole seconds since the epoch (a naive one is UTC); Last-Modified has one-second
    resolution, and refs pin seconds."""
    if moment is None:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return int(moment.timestamp() // 1)


def _shown(seconds: int) -> str:
    try:
        return datetime.fromtimestamp(seconds, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    except (OverflowError, ValueError, OSError):
        return f"{seconds} s after 1970"


def mismatch(
    pinned_etag: str | None, pinned_modified: int | None, etag: str | None, modified: int | None
) -> str | None:
    """None if an answer with ``etag`` and ``modified`` (seconds) is the pinned version: the same
    opaque ETag (``*`` pins none), and modified at or before the pinned time. Otherwise what
    differs, naming both values, for a one-line error."""
    if pinned_etag and opaque_tag(pinned_etag) != "*":
        if not etag:
            return f"the ref's ETag is {pinned_etag}, the answer carries none"
        if opaque_tag(etag) != opaque_tag(pinned_etag):
            return f"the ref's ETag is {pinned_etag}, the answer's is {etag}"
    if pinned_modified:
        if modified is None:
            return f"the ref's checksum time is {_shown(pinned_modified)}, the answer carries no Last-Modified"
        if modified > pinned_modified:
            return (
                f"the answer's Last-Modified is {_shown(modified)}, after the ref's checksum time "
                f"{_shown(pinned_modified)}"
            )
    return None


class Version(NamedTuple):
    """The version of an object that one answer came from: its ETag, modification time in nanoseconds and
    size, as the answer gives them (None where it gives none). A local file's (``local``) ETag is the one
    icechunk's local store gives it, ``inode-mtime_us-size`` in hex, and its time is exact: icechunk
    refuses a file modified even a nanosecond after a ref's checksum time."""

    etag: str | None
    modified_ns: int | None
    size: int | None = None
    local: bool = False

    @classmethod
    def of_stat(cls, st: os.stat_result) -> Version:
        """A local file's version from its ``stat``."""
        return cls(f"{st.st_ino:x}-{st.st_mtime_ns // 1000:x}-{st.st_size:x}", st.st_mtime_ns, st.st_size, True)

    @classmethod
    def of_answer(cls, etag: str | None, modified: datetime | str | None, size: int | None = None) -> Version:
        """A remote answer's version: its ETag and its Last-Modified (an HTTP date or a datetime)."""
        seconds = http_seconds(modified) if isinstance(modified, str) else seconds_of(modified)
        return cls(etag, None if seconds is None else seconds * 10**9, size)

    def differs(self, pinned_etag: str | None, pinned_modified: int | None) -> str | None:
        """None if this is the version a ref's checksum pins (see :func:`mismatch`), else what differs."""
        if not self.local:
            return mismatch(
                pinned_etag, pinned_modified, self.etag, None if self.modified_ns is None else self.modified_ns // 10**9
            )
        wanted = pinned_etag.strip('"') if pinned_etag else None
        if wanted and wanted != "*" and wanted != self.etag:
            return f"the ref's ETag checksum is {pinned_etag!r}, the file's is {self.etag!r}"
        if pinned_modified and self.modified_ns is not None and self.modified_ns > pinned_modified * 10**9:
            from zsarchive.times import format_time

            return (
                f"modified {format_time(self.modified_ns // 1000)}, after the ref's checksum time "
                f"{format_time(pinned_modified * 10**6)}"
            )
        return None
