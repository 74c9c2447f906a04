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


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the program is as Ctrl-C is: every writer unwinds and removes what it had
    begun (partial files, hidden temporaries) exactly as it does for Ctrl-C."""


def terminate_like_interrupt() -> None:
    """From now on SIGTERM raises :class:`Terminated` in this process. A process forked from it (worker
    processes) is ended by SIGTERM as usual: its parent unwinds and cleans up."""
    import os
    import signal

    owner = os.getpid()

    def handle(signum: int, frame: object) -> None:
        if os.getpid() != owner:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGTERM)
            return
        raise Terminated()

    signal.signal(signal.SIGTERM, handle)


def interrupted(exc: KeyboardInterrupt | None = None) -> NoReturn:
    """Ctrl-C: one line and exit status 130 (SIGTERM: 143), never a traceback."""
    if isinstance(exc, Terminated):
        sys.stderr.write("zs: terminated\n")
        sys.exit(143)
    sys.stderr.write("zs: interrupted\n")
    sys.exit(130)
