"""What the ``zs`` program prints beside its answers: text from input made safe for one line of a
terminal (error messages, tables), and the end of an interrupted command."""

from __future__ import annotations

import sys
from typing import NoReturn


def one_line(text: str, width: int = 1000) -> str:
    """``text`` as one printable line of at most ``width`` characters (input can put anything in a message)."""
    return printable(text[:width] + ("..." if len(text) > width else ""))


def printable(text: str) -> str:
    """``text`` with every character that is not printable (newlines, NUL, terminal escapes) written as
    its Python escape, so that names from input cannot break a line or drive the terminal."""
    return text if text.isprintable() else "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def interrupted() -> NoReturn:
    """Ctrl-C: one line and exit status 130, never a traceback."""
    sys.stderr.write("zs: interrupted\n")
    sys.exit(130)
