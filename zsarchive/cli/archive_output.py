"""Shared plumbing of the archive query commands: open the archive, print rows as JSON lines or a table.
Without click (its ``echo`` is imported where rows are printed), so that the quick ``zs chunk`` lookup of
:mod:`zsarchive.cli.quick` shares it."""

from __future__ import annotations

import itertools
import json
from typing import Any, Iterable, Sequence

from zsarchive.archive import RepoArchive
from zsarchive.cli.text import printable

_LAYOUT_ROWS = 1000  # rows a table's column widths are taken from
CHUNK_COLUMNS = ("coords", "kind", "offset", "length", "chunk_id", "location")
"""The table columns of a chunk ref (``zs chunk``, ``zs chunks``)."""


def open_archive(source: str, authorize: dict[str, dict[str, str]] | None = None) -> RepoArchive:
    """The archive at a path or URL; ``authorize``: prefix -> storage options, as ``--authorize`` gives them."""
    return RepoArchive(source, authorize=authorize or {})


def chunk_row(arc: RepoArchive, chunk: dict) -> dict:
    """A chunk ref as ``zs chunk`` prints it: a virtual ref of an archive that may keep virtual bytes
    (format 7) says whether it does (``embedded``)."""
    if chunk["kind"] == "virtual" and arc.keeps_virtual_data:
        return dict(chunk, embedded=arc.embeds(chunk))
    return chunk


def _plain(row: dict) -> dict:
    # bytes fields (exact zarr.json, inline chunk bytes) belong to the Python API, not to JSON lines.
    return {k: _plain(v) if isinstance(v, dict) else v for k, v in row.items() if not isinstance(v, (bytes, bytearray))}


def json_line(row: dict) -> str:
    """One row as its JSON line (``--json``), without a newline."""
    return json.dumps(_plain(row), ensure_ascii=False)


def cell(value: Any) -> str:
    """One value as table text: - for null, lists comma-joined, objects as JSON, never a control character."""
    if value is None:
        return "-"
    if isinstance(value, (list, tuple)):
        return ",".join(cell(v) for v in value) if value else "()"  # a scalar's shape, a 0-d chunk's coords
    if isinstance(value, dict):
        return json.dumps(value, sort_keys=True)
    return printable(str(value))


def emit(rows: Iterable[dict], as_json: bool, columns: Sequence[str], fixed: bool = False) -> None:
    """Print rows: JSON lines with every field, or an aligned table of those ``columns`` some row fills
    (``fixed``: of every one of them, whatever the rows hold, for output read by programs).

    Both stream: a table is laid out from its first rows, so millions of chunk refs never sit in memory.
    """
    from click import echo  # imported by the command that prints: click's own ``main`` already did

    if as_json:
        for row in rows:
            echo(json_line(row))
        return
    rows = iter(rows)
    first = list(itertools.islice(rows, _LAYOUT_ROWS))
    if first and not fixed:  # a column no row fills (e.g. "from"/"to" of a diff without moves) is noise
        columns = [c for c in columns if any(row.get(c) is not None for row in first)]
    table = [[cell(row.get(c)) for c in columns] for row in first]
    widths = [max([len(c)] + [len(r[i]) for r in table]) for i, c in enumerate(columns)]
    echo("  ".join(c.upper().ljust(w) for c, w in zip(columns, widths)).rstrip())
    for r in itertools.chain(table, ([cell(row.get(c)) for c in columns] for row in rows)):
        echo("  ".join(text.ljust(w) for text, w in zip(r, widths)).rstrip())
