"""Icechunk node paths: validity and the component-wise order of moved nodes.

icechunk uses two orders: a snapshot's nodes follow the bytes of the whole path (``/a-b < /a/b``,
plain ``str`` order), a transaction log's moved nodes compare paths component by component
(``/a/b < /a-b``, :func:`path_key`).
"""

from __future__ import annotations


def path_key(path: str) -> list[str]:
    """Sort key comparing paths component by component (``/a < /a/b < /a-b < /b``)."""
    return [] if path == "/" else path[1:].split("/")


def is_valid_path(path: str) -> bool:
    """Absolute, ``/``-separated, canonical (no empty, ``.`` or ``..`` segments, no trailing ``/``)."""
    if path == "/":
        return True
    if not path.startswith("/"):
        return False
    return all(seg not in ("", ".", "..") for seg in path[1:].split("/"))
