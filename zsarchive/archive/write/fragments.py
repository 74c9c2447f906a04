"""Writing fragments: the records a fragment holds beyond its base, and how it names its base
(docs/archive-format.rst, "Fragments")."""

from __future__ import annotations

import os
from typing import Iterable, Iterator

from zsarchive.archive.format import tuples
from zsarchive.archive.format.fragments import tombstone
from zsarchive.errors import ZSError


def diff(new: Iterable[bytes], old: Iterable[bytes], replaced: dict[bytes, int] | None = None) -> Iterator[bytes]:
    """Records of ``new`` that ``old`` lacks or holds with another value, and a tombstone for each key
    only ``old`` has; both sorted. ``replaced`` counts, per family tag, keys both hold, differently."""
    new, old = iter(new), iter(old)
    a, b = next(new, None), next(old, None)
    while a is not None or b is not None:
        ka = a[: tuples.key_end(a)] if a is not None else None
        kb = b[: tuples.key_end(b)] if b is not None else None
        if a is not None and (kb is None or (ka is not None and ka < kb)):
            yield a
            a = next(new, None)
        elif kb is not None and (ka is None or kb < ka):
            yield tombstone(kb)
            b = next(old, None)
        else:
            assert a is not None and b is not None  # both keys are there, and equal
            if a != b:
                if replaced is not None:
                    replaced[a[:1]] = replaced.get(a[:1], 0) + 1
                yield a
            a, b = next(new, None), next(old, None)


def base_link(fragment_path: str | os.PathLike, base_path: str | os.PathLike) -> str:
    """How a fragment names its base: the base's path relative to the fragment's directory, with ``/``."""
    rel = os.path.relpath(os.path.abspath(base_path), os.path.dirname(os.path.abspath(fragment_path)))
    return rel.replace(os.sep, "/")


def checked_link(link: str) -> str:
    """A base link a caller gave, if it is a relative path with ``/`` (as a reader requires); else ZSError."""
    if not link or "\\" in link or link.startswith("/") or "://" in link or "\x00" in link or link[1:2] == ":":
        raise ZSError(f"base link {link!r}: give the base's path relative to the fragment's directory, with /")
    return link
