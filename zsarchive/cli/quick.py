"""``zs chunk ARCHIVE REF PATH COORDS --json`` answered without importing click.

A cold lookup is mostly start-up time, and importing click would be a third of it (docs/benchmarks.rst,
"the cold lookup"). The click command of :mod:`zsarchive.cli.chunk` defines the command line; this reads
only its plainest form (its four arguments and ``--json``, no other option) and leaves every other
command line, and every lookup that fails, to click, which then answers it (or says what is wrong) as
for any command. ``tests/cli/test_quick.py`` holds both answers equal."""

from __future__ import annotations

import codecs
import sys

from zsarchive.cli.text import interrupted

JSON_FLAG = "--json"
"""The name of ``--json`` (``params.json_option``), the one option read here."""


def parse_coords(text: str) -> tuple[int, ...]:
    """Chunk coordinates from ``3,4`` (``""``: the chunk of a 0-d array); ValueError saying what is wrong."""
    if text == "":
        return ()
    try:
        coords = tuple(int(part) for part in text.split(","))
    except ValueError:
        raise ValueError(
            f"{text!r} is not a comma-separated list of chunk coordinates (e.g. 3,4; \"\" for a 0-d array)"
        ) from None
    if any(c < 0 for c in coords):
        raise ValueError(f"{text!r}: chunk coordinates are never negative")
    return coords


def answer(args: list[str]) -> bool:
    """Print the chunk ref that ``args`` (the words after ``chunk``) ask for as a JSON line and say True;
    False, having printed nothing, when they are not of that plain form or the lookup fails."""
    words = [word for word in args if word != JSON_FLAG]
    if len(words) != 4 or len(args) != 5 or any(word.startswith("-") for word in words) or not _plain_stdout():
        return False
    archive, ref, path, coords = words
    try:
        try:
            from zsarchive.cli.archive_output import chunk_row, json_line, open_archive

            with open_archive(archive) as arc:
                line = json_line(chunk_row(arc, arc.chunk_ref(ref, path, parse_coords(coords))))
        except Exception:  # click's command says what is wrong, as for any command line
            return False
        sys.stdout.write(line + "\n")
        sys.stdout.flush()
    except KeyboardInterrupt as exc:
        interrupted(exc)
    except BrokenPipeError:  # as the click group: whoever read the output has gone
        sys.exit(1)
    return True


def _plain_stdout() -> bool:
    """Whether standard output takes the line as click's ``echo`` would write it (click re-encodes a
    stream set to ASCII, and writes nothing where there is no stream)."""
    try:
        return codecs.lookup(getattr(sys.stdout, "encoding", None) or "ascii").name != "ascii"
    except LookupError:
        return True
