"""What to say after "not found": the closest names the user may have meant, or all of them when few."""

from __future__ import annotations

from typing import Iterable

LIST_ALL = 8
"""Up to this many candidates, a miss with no close match lists them all."""


def closest(word: str, candidates: Iterable[str], n: int = 3) -> list[str]:
    """The candidates most like ``word`` (case ignored), best first: at most ``n``, none if nothing is close."""
    import difflib  # here: only a miss needs it, and a lookup starts faster without it

    by_folded: dict[str, str] = {}
    for candidate in candidates:
        by_folded.setdefault(candidate.casefold(), candidate)
    matches = difflib.get_close_matches(word.casefold(), list(by_folded), n=n, cutoff=0.6)
    return [by_folded[m] for m in matches]


def closest_paths(path: str, candidates: Iterable[str], n: int = 3) -> list[str]:
    """The node paths most like ``path``: whole paths alike first, then paths whose last name is
    alike (``temperature`` or ``temp`` finds ``/data/temperature``)."""
    import difflib

    paths = list(candidates)
    near = closest(path, paths, n)
    last = path.rstrip("/").rsplit("/", 1)[-1].casefold()
    by_name: dict[str, list[str]] = {}
    for p in paths:
        by_name.setdefault(p.rsplit("/", 1)[-1].casefold(), []).append(p)
    named = difflib.get_close_matches(last, list(by_name), n=n, cutoff=0.6)
    named += [name for name in by_name if len(last) >= 3 and name.startswith(last) and name not in named]
    for name in named:
        near += [p for p in by_name[name] if p not in near]
    return near[:n]


def hint(word: str, candidates: Iterable[str], noun: str, paths: bool = False) -> str:
    """A clause to end a "not found" message with: ``; did you mean 'main'?``, or ``; the NOUN are: a, b``
    when there are few candidates and none is close, or nothing. ``paths``: candidates are node paths."""
    names = sorted(set(candidates))
    near = closest_paths(word, names) if paths else closest(word, names)
    if near:
        return "; did you mean " + " or ".join(repr(n) for n in near) + "?"
    if 0 < len(names) <= LIST_ALL:
        return f"; the {noun} are: " + ", ".join(names)
    return ""
