"""Names that read alike everywhere: a key's components as file names on every system and entry names in
every zip reader (no path separator, drive letter, NUL or control character). Checkout's targets and a
restore's file names keep to them; readers of archive records ask without importing the sinks."""

from __future__ import annotations

import re

from zsarchive.errors import ZSError

_DRIVE = re.compile(r"[A-Za-z]:")


def unportable(name: str) -> str | None:
    """Why ``name``, one component of a key, is not a file name that reads alike on every system and in
    every zip reader (None when it is one)."""
    if name in ("", ".", ".."):
        return "is empty, '.' or '..'"
    if "/" in name or "\\" in name:
        return "holds a path separator ('/' or '\\')"
    if any(ord(c) < 32 or ord(c) == 127 for c in name):
        return "holds NUL or a control character"
    if _DRIVE.match(name):
        return "starts with a drive letter"
    return None


def check_portable(key: str, where: str) -> None:
    """ZSError unless every component of ``key`` is a portable name (:func:`unportable`)."""
    for part in key.split("/"):
        problem = unportable(part)
        if problem is not None:
            raise ZSError(f"{where}: refusing the name {key!r}: its component {part!r} {problem}")
