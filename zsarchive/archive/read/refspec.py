"""Parsing of the user's REF and TIME arguments (``main``, ``tag:v1``, ``main@2026-11-22T01:19:29Z``)."""

from __future__ import annotations

import datetime as _dt
from typing import Iterable

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
    """A parsed REF: optional explicit kind, the name or id, and an optional as-of time (micros)."""

    kind: str | None
    name: str
    as_of: int | None
    text: str


def parse_ref(text: str, with_time: bool = True) -> RefSpec:
    """``[branch:|tag:|snapshot:]NAME[@TIME]`` -> RefSpec (the last ``@`` starts the time).

    ``with_time=False`` reads every ``@`` as part of NAME: ref names may hold ``@`` too, and a
    resolver tries that reading first (see RepoArchive.resolve).
    """
    if not text:
        raise ZSError("empty REF: give a branch, a tag or a snapshot id")
    body, as_of = text, None
    if "@" in text and with_time:
        body, when = text.rsplit("@", 1)
        as_of = parse_time(when, end_of_day=True)
    kind = None
    head, sep, tail = body.partition(":")
    if sep and head in KINDS:
        kind, body = head, tail
    if not body:
        raise ZSError(f"bad REF {text!r}: no name")
    return RefSpec(kind, body, as_of, text)


def chunk_coords(value: object, what: str = "coords") -> tuple[int, ...]:
    """Chunk coordinates a caller gave (a sequence of integers >= 0) as a tuple; a ZSError saying what
    is wrong otherwise (text such as ``"0,0"`` is the command line's form, not Python's)."""
    if isinstance(value, (str, bytes)):
        raise ZSError(f"{what} must be a sequence of integers such as (0, 0), not the text {value!r}")
    try:
        items = tuple(value)  # type: ignore[arg-type]
    except TypeError:
        raise ZSError(f"{what} must be a sequence of integers such as (0, 0), not {type(value).__name__}") from None
    if not all(type(c) is int and c >= 0 for c in items) and not _integers(items):
        raise ZSError(f"{what} must be integers >= 0, not {value!r}")
    return tuple(int(c) for c in items)


def coords_text(coords: Iterable[int]) -> str:
    """Chunk coordinates as ``1,2,3`` (for messages)."""
    return ",".join(str(c) for c in coords)


def _integers(items: tuple) -> bool:
    """Whether every item is an integer >= 0 of any integral type (numpy's too), bools excepted."""
    import numbers  # here: coordinates are nearly always Python ints, and a lookup need not import it

    return all(isinstance(c, numbers.Integral) and not isinstance(c, bool) and c >= 0 for c in items)
