"""Click parameter types shared by several ``zs`` commands."""

from __future__ import annotations

import codecs
import contextlib
import logging
import os
from typing import Any, Iterator

import click

from zsarchive.cli.quick import JSON_FLAG, parse_coords


class EscapedBytes(click.ParamType):
    """A byte string given with Python escapes (``\\x00``, ``\\r\\n``), as the reference ``zs`` takes it."""

    name = "BYTES"

    def convert(self, value, param, ctx) -> bytes:
        if isinstance(value, bytes):
            return value
        # surrogateescape gives back the exact bytes of a non-UTF-8 POSIX argument.
        raw = os.fsencode(value) if os.name == "posix" else value.encode("utf-8")
        try:
            return codecs.escape_decode(raw)[0]
        except ValueError as exc:
            self.fail(f"bad escape in {value!r}: {exc}", param, ctx)


ESCAPED_BYTES = EscapedBytes()


class Parallelism(click.ParamType):
    """A worker count of at least ``minimum``, or ``guess`` (one per core)."""

    name = "PARALLELISM"

    def __init__(self, minimum: int = 1) -> None:
        self.minimum = minimum

    def convert(self, value, param, ctx):
        if value is None or value == "guess":
            return "guess"
        try:
            n = int(value)
        except (TypeError, ValueError):
            n = self.minimum - 1
        if n < self.minimum:
            self.fail(f"{value!r} is neither a number >= {self.minimum} nor 'guess'", param, ctx)
        return n


def max_bytes_option(func):
    """``--max-bytes SIZE``: the most a command that writes a tree of files may write, whatever the target."""
    return click.option(
        "--max-bytes",
        type=BYTE_SIZE,
        default=None,
        metavar="SIZE",
        help="Refuse, before writing anything, to write more than SIZE bytes (e.g. 500G); a "
        "local target is always refused when its free space is short.",
    )(func)


def announce_totals(what: str, shown: bool):
    """A function telling a terminal what a command is about to write (``what``: its target) before the first
    byte is written, as the first line of its progress display (``shown``: whether it is shown)."""

    def announce(totals) -> None:
        click.echo(f"writing {totals} to {what}", err=True)

    return announce if shown else None


class Coords(click.ParamType):
    """Chunk coordinates: ``3,4`` -> (3, 4); the empty text ``""`` -> () (the chunk of a 0-d array)."""

    name = "COORDS"

    def convert(self, value, param, ctx) -> tuple[int, ...]:
        if isinstance(value, tuple):
            return value
        try:
            return parse_coords(value)
        except ValueError as exc:
            self.fail(str(exc), param, ctx)


COORDS = Coords()


class ByteSize(click.ParamType):
    """A number of bytes: ``1000000``, or with a 1024-based suffix, ``500K``, ``20M``, ``1.5G``, ``2T``
    (``KiB``, ``MB`` ... read alike)."""

    name = "SIZE"
    _UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}

    def convert(self, value, param, ctx) -> int:
        if isinstance(value, int):
            return value
        text = str(value).strip().upper().removesuffix("B").removesuffix("I")
        unit = text[-1:] if text[-1:] in self._UNITS else ""
        try:
            number = float(text[: len(text) - len(unit)])
        except ValueError:
            number = -1.0
        if not number >= 0 or number * self._UNITS[unit] >= 1 << 63:
            self.fail(f"{value!r} is not a size (bytes, or a number with K, M, G or T: 500M, 1.5G)", param, ctx)
        return int(number * self._UNITS[unit])


BYTE_SIZE = ByteSize()


def _storage_options(ctx, param, value: tuple[str, ...]) -> dict[str, str]:
    options = {}
    for pair in value:
        key, sep, item = pair.partition("=")
        if not sep or not key.strip():
            raise click.BadParameter(f"{pair!r} is not KEY=VALUE", ctx, param)
        options[key.strip()] = item
    return options


def remote_options(func):
    """``--anon`` and repeatable ``--storage-option KEY=VALUE``: how to reach a repository in object storage."""
    func = click.option(
        "--storage-option",
        "storage_options",
        multiple=True,
        metavar="KEY=VALUE",
        callback=_storage_options,
        help="Passed to the object store (e.g. endpoint=http://127.0.0.1:9000, region=eu-west-1); "
        "credentials otherwise come from the usual AWS_*, GOOGLE_*, AZURE_* variables.",
    )(func)
    return click.option("--anon", is_flag=True, help="Read a public bucket anonymously (unsigned requests).")(func)


def _authorize(ctx, param, value: tuple[str, ...]) -> dict[str, dict[str, str]]:
    prefixes: dict[str, dict[str, str]] = {}
    for entry in value:
        words = entry.split()
        if not words:
            raise click.BadParameter("an empty prefix authorizes nothing", ctx, param)
        prefix, *options = words
        pairs = [option.partition("=") for option in options]
        if any(not sep or not key for key, sep, _ in pairs):
            raise click.BadParameter(f"{entry!r}: expected PREFIX [KEY=VALUE ...]", ctx, param)
        prefixes[prefix] = {key: item for key, _, item in pairs}
    return prefixes


authorize_option = click.option(
    "--authorize",
    "authorize",
    multiple=True,
    metavar="PREFIX",
    callback=_authorize,
    help="Location prefix (file:///data/, https://host/dir/, s3://bucket/dir/ ...) under which virtual chunks "
    "may be read; storage options for that prefix may follow it: 's3://b/d/ anon=true region=eu-west-1'.",
)
"""Repeatable ``--authorize 'PREFIX [KEY=VALUE ...]'``, given to the command as prefix -> storage options."""


json_option = click.option(
    JSON_FLAG,
    "as_json",
    is_flag=True,
    help="One JSON object per line (a stable contract, see docs/archive-format.rst).",
)
"""``--json``: rows as JSON lines instead of a table."""


force_option = click.option(
    "--force",
    is_flag=True,
    help="Replace the output file if it exists (by default an existing file is never "
    "overwritten: fragments built on a replaced archive no longer open).",
)
"""``--force``: the command may replace its existing output (see zsarchive.io.outfile.check_new_target)."""


class Duration(click.ParamType):
    """A length of time: seconds, or a number followed by s, min (or m), h or d (``90s``, ``10min``, ``2h``);
    ``forever`` for no limit."""

    name = "DURATION"
    UNITS = {"s": 1, "m": 60, "min": 60, "h": 3600, "d": 86400}

    def convert(self, value, param, ctx) -> float:
        if isinstance(value, (int, float)):
            return float(value)
        text = str(value).strip().lower()
        if text in ("forever", "inf"):
            return float("inf")
        number = text.rstrip("abcdefghijklmnopqrstuvwxyz")
        unit = text[len(number) :].strip() or "s"
        try:
            seconds = float(number) * self.UNITS[unit]
        except (ValueError, KeyError):
            self.fail(f"{value!r} is not a duration such as 90, 90s, 10min, 2h or 1d", param, ctx)
        if not seconds >= 0:
            self.fail(f"{value!r} is not a duration >= 0", param, ctx)
        return seconds


def scheduler_option(what: str):
    """``--scheduler ADDRESS``: run ``what`` on that dask.distributed cluster."""
    return click.option(
        "--scheduler",
        metavar="ADDRESS",
        help=f"{what} on the dask.distributed cluster of this scheduler (e.g. tcp://host:8786); needs zsarchive[dask].",
    )


@contextlib.contextmanager
def cluster(scheduler: str | None) -> Iterator[Any]:
    """A ``distributed.Client`` of the scheduler at ``scheduler`` (None without one), closed afterwards."""
    if scheduler is None:
        yield None
        return
    from zsarchive.archive.write.cluster import connect

    client = connect(scheduler)
    # the cluster's own log (configured as distributed is imported) would print tracebacks for a lost
    # connection; its failures reach the user as one line from the command
    for name in [n for n in logging.root.manager.loggerDict if n.split(".")[0] == "distributed"]:
        logging.getLogger(name).setLevel(logging.CRITICAL + 1)
    try:
        yield client
    finally:
        client.close()
