"""Times as the archive and Icechunk store them, integers of non-leap microseconds since 1970-01-01
UTC, and as people write them (RFC 3339 / ISO 8601): the rendering and its inverse side by side."""

from __future__ import annotations

import datetime as _dt
import re

from zsarchive.errors import ZSError

EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)
_DATE_ONLY = re.compile(r"^\d{4}-\d{2}-\d{2}$")


def format_time(micros: int) -> str:
    """RFC 3339 UTC with microseconds and ``Z``, e.g. ``2026-11-22T01:55:20.495477Z``."""
    moment = EPOCH + _dt.timedelta(microseconds=micros)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def micros(moment: _dt.datetime) -> int:
    """Microseconds since 1970 UTC of an aware datetime."""
    delta = moment - EPOCH
    return (delta.days * 86400 + delta.seconds) * 1_000_000 + delta.microseconds


def parse_time(text: str, end_of_day: bool = False) -> int:
    """ISO 8601 / RFC 3339 text -> microseconds since 1970 UTC.

    Accepts an offset, ``Z``, or none (read as UTC), and a bare date: the day's first
    microsecond, or its last one when ``end_of_day`` (so inclusive upper bounds cover the day).
    """
    value = text.strip()
    try:
        if _DATE_ONLY.match(value):
            day = _dt.datetime.fromisoformat(value).replace(tzinfo=_dt.timezone.utc)
            if end_of_day:
                day += _dt.timedelta(days=1, microseconds=-1)
            return micros(day)
        if value.endswith(("z", "Z")):
            value = value[:-1] + "+00:00"
        moment = _dt.datetime.fromisoformat(value.replace(" ", "T", 1) if "T" not in value else value)
    except ValueError:
        raise ZSError(
            f"bad time {text!r}: expected ISO 8601 / RFC 3339, e.g. 2026-11-22T01:19:29Z or 2026-11-22"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=_dt.timezone.utc)
    return micros(moment)
