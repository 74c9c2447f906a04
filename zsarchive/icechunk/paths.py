"""Icechunk node paths: validity and the spec's component-wise sort order."""

from __future__ import annotations


def path_key(path: str) -> list[str]:
    """Sort key comparing paths segment by segment (``/a < /a/b < /ab < /b``); str order is UTF-8 byte order."""
    return [] if path == "/" else path[1:].split("/")


def is_valid_path(path: str) -> bool:
    """Absolute, ``/``-separated, canonical (no empty, ``.`` or ``..`` segments, no trailing ``/``)."""
    if path == "/":
        return True
    if not path.startswith("/"):
        return False
    return all(seg not in ("", ".", "..") for seg in path[1:].split("/"))
