"""The walk from a snapshot through its parents, shared by the repository and the archive readers."""

from __future__ import annotations

from typing import Callable, Iterator


def parent_chain(
    start: str | None, parent_of: Callable[[str], str | None], loop: Callable[[str], Exception] | None = None
) -> Iterator[str]:
    """``start``, its parent, its parent's parent... (``parent_of`` is called on an id only after the
    caller has taken it) to the first None. Parent links may loop in hostile input: at an id seen
    before, raise ``loop(id)``, or end the walk when ``loop`` is None."""
    seen: set[str] = set()
    current = start
    while current is not None:
        if current in seen:
            if loop is None:
                return
            raise loop(current)
        seen.add(current)
        yield current
        current = parent_of(current)
