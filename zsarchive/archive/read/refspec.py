"""Parsing of the user's REF and TIME arguments (``main``, ``tag:v1~2``, ``main@2026-11-22T01:19:29Z``,
``main^``): git's way of naming commits, on Icechunk's refs."""

from __future__ import annotations

import datetime as _dt
import re
from typing import Any, Iterable

from zsarchive.errors import ZSError
from zsarchive.times import micros, parse_time
from zsarchive.typedtuple import TypedTuple

KINDS = ("branch", "tag", "snapshot")


TimeBound = str | int | _dt.datetime | _dt.date | None
"""A time given to a query: TIME text, a date (the whole day), an aware datetime (naive: UTC) or
microseconds since 1970 UTC."""


def time_bound(value: TimeBound, upper: bool) -> int | None:
    """A query's time bound as microseconds (``upper``: a bare date means the end of that day)."""
    if value is None or isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str):
        return parse_time(value, end_of_day=upper)
    if isinstance(value, _dt.datetime):
        return micros(value if value.tzinfo else value.replace(tzinfo=_dt.timezone.utc))
    if isinstance(value, _dt.date):  # a day, as its bare ISO text means
        return parse_time(value.isoformat(), end_of_day=upper)
    raise ZSError(f"bad time {value!r}: give TIME text, a date, a datetime or microseconds since 1970")


class RefSpec(TypedTuple):  # a typed tuple, not a frozen dataclass: far cheaper to define at every start
    """A parsed REF: optional explicit kind, the name or id, the text as given, and its suffixes in order:
    ``("~", n)`` (n parents back) and ``("@", micros)`` (as of a time)."""

    kind: str | None
    name: str
    text: str
    steps: tuple = ()

    @property
    def as_of(self) -> int | None:
        """The time of the first ``@TIME`` suffix, None without one."""
        return next((arg for op, arg in self.steps if op == "@"), None)


_SUFFIX = re.compile(r"~(\d*)|\^(\d*)|@([^@~^]+)")
"""One suffix: ``~N``, ``~``, ``^``, ``^N`` or ``@TIME`` (a TIME holds none of ``@~^``)."""
_MAX_DIGITS = 18
"""Digits of a ``~N`` read as a number; more name a depth beyond any history all the same."""


def ref_readings(text: str) -> list[tuple[str, str]]:
    """Every split of ``text`` into a NAME and suffixes (``~N``, ``^``, ``@TIME``), the whole text as
    the name first, then shorter names: ref names may hold ``~``, ``^`` and ``@`` themselves, and a
    resolver takes the first reading whose name exists (see RepoArchive.resolve)."""
    if not text:
        raise ZSError("empty REF: give a branch, a tag or a snapshot id")
    starts = {len(text)}  # where the rest of the text reads as suffixes only, found from the end
    for found in reversed(list(_SUFFIX.finditer(text))):  # every ~, ^ and @ starts the one suffix it can
        if found.end() in starts:
            starts.add(found.start())
    return [(text, "")] + [(text[:at], text[at:]) for at in sorted(starts - {0, len(text)}, reverse=True)]


def parse_ref(text: str, suffixes: str | None = None) -> RefSpec:
    """``[branch:|tag:|snapshot:]NAME`` followed by ``suffixes`` -> RefSpec. Without ``suffixes`` the
    shortest reading of :func:`ref_readings` is taken: ``main~2@2026-11-22T01:19:29Z``.

    Suffixes apply left to right: ``main@TIME~2`` is two parents before the snapshot of main at TIME,
    ``main~2@TIME`` the snapshot at TIME in the history of main's grandparent. ``^`` is ``~1`` and
    ``^0`` the snapshot itself; a snapshot has one parent, so ``^2`` and beyond name none.
    """
    if suffixes is None:
        body, suffixes = ref_readings(text)[-1]
    else:
        body = text[: len(text) - len(suffixes)]
    steps = []
    for found in _SUFFIX.finditer(suffixes):
        tilde, caret, when = found.groups()
        if when is not None:
            steps.append(("@", parse_time(when, end_of_day=True)))
            continue
        digits = tilde if tilde is not None else caret
        count = 1 if not digits else int(digits) if len(digits) <= _MAX_DIGITS else 10**_MAX_DIGITS
        if caret is not None and count > 1:
            raise ZSError(
                f"bad REF {text!r}: a snapshot has one parent, so ^{digits} names none "
                f"(~{digits} is {count} parents back)"
            )
        if count:
            steps.append(("~", count))
    kind = None
    head, sep, tail = body.partition(":")
    if sep and head in KINDS:
        kind, body = head, tail
    if not body:
        raise ZSError(f"bad REF {text!r}: no name")
    return RefSpec(kind, body, text, tuple(steps))


def chunk_coords(value: object, what: str = "coords") -> tuple[int, ...]:
    """Chunk coordinates a caller gave (a sequence of integers >= 0) as a tuple; a ZSError saying what
    is wrong otherwise (text such as ``"0,0"`` is the command line's form, not Python's)."""
    if isinstance(value, (str, bytes)):
        raise ZSError(f"{what} must be a sequence of integers such as (0, 0), not the text {value!r}")
    try:
        items: tuple[Any, ...] = tuple(value)  # type: ignore[arg-type]
    except TypeError:
        raise ZSError(f"{what} must be a sequence of integers such as (0, 0), not {type(value).__name__}") from None
    if not all(type(c) is int and c >= 0 for c in items) and not _integers(items):
        raise ZSError(f"{what} must be integers >= 0, not {value!r}")
    return tuple(int(c) for c in items)


def coords_text(coords: Iterable[int]) -> str:
    """Chunk coordinates as ``1,2,3`` (for messages)."""
    return ",".join(str(c) for c in coords)


def _integers(items: tuple[Any, ...]) -> bool:
    """Whether every item is an integer >= 0 of any integral type (numpy's too), bools excepted."""
    import numbers  # here: coordinates are nearly always Python ints, and a lookup need not import it

    return all(isinstance(c, numbers.Integral) and not isinstance(c, bool) and int(c) >= 0 for c in items)
