"""The archive's web page as files: one page for ``zs serve`` (which answers its API) and ``zs site`` (whose
copy reads the archive in the browser with the JavaScript reader under ``reader/``)."""

from __future__ import annotations

from importlib import resources
from importlib.resources.abc import Traversable
from typing import Iterator

CONTENT_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".json": "application/json; charset=utf-8",
    ".LICENSE": "text/plain; charset=utf-8",
}
"""The page's files by suffix: every file of zsarchive/frontends/static with one of these is served."""


def page_files() -> Iterator[tuple[str, bytes]]:
    """The page's files (``zsarchive/frontends/static``: the page, its style, the reader): (relative path, bytes)."""

    def walk(folder: Traversable, prefix: str) -> Iterator[tuple[str, bytes]]:
        for item in sorted(folder.iterdir(), key=lambda i: i.name):
            if item.is_dir():
                yield from walk(item, f"{prefix}{item.name}/")
            elif any(item.name.endswith(suffix) for suffix in CONTENT_TYPES):
                yield f"{prefix}{item.name}", item.read_bytes()

    return walk(resources.files("zsarchive.frontends").joinpath("static"), "")


def content_type(name: str) -> str:
    """The Content-Type of one of the page's files."""
    return next(kind for suffix, kind in CONTENT_TYPES.items() if name.endswith(suffix))
