"""What the ``zs`` program prints beside its answers: text from input made safe for one line of a
terminal (error messages, tables), progress bars on stderr, and the end of an interrupted command."""

from __future__ import annotations

import contextlib
import sys
from typing import Any, Callable, Iterator, Mapping, NoReturn


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


@contextlib.contextmanager
def progress_bar(label: str, enabled: bool = True) -> Iterator[Callable[[int, int], None] | None]:
    """A progress bar on stderr while the block runs, when ``enabled`` and stderr is a terminal: yields the
    ``progress(done, total)`` callback a library call takes, or None when no bar is shown."""
    with stage_bars({label: label}, enabled) as staged:
        yield None if staged is None else (lambda done, total: staged(label, done, total))


def advancing(progress: Callable[[int, int], None], total: int) -> Callable[[int], None]:
    """For work that reports each step's size: a callback adding it up into ``progress(done, total)``."""
    done = 0

    def advance(step: int) -> None:
        nonlocal done
        done += step
        progress(done, total)

    return advance


@contextlib.contextmanager
def stage_bars(
    labels: Mapping[str, str],
    enabled: bool = True,
    shown: Callable[[str], Callable[[Any], str | None] | None] = lambda stage: None,
) -> Iterator[Callable[[str, int, int], None] | None]:
    """Progress bars on stderr while the block runs, one per stage of the work, each drawn from the stage's
    first report (the one before it finished then), when ``enabled`` and stderr is a terminal: yields the
    ``progress(stage, done, total)`` callback, or None. ``labels``: stage -> label; ``shown(stage)``: what a
    stage's bar shows after its percentage, given ``done``."""
    if not (enabled and sys.stderr.isatty()):
        yield None
        return
    import click  # the command that shows a bar imported it already

    bars: dict[str, Any] = {}

    def progress(stage: str, done: int, total: int) -> None:
        bar = bars.get(stage)
        if bar is None:
            for other in bars.values():
                other.render_finish()
            bar = bars[stage] = click.progressbar(
                length=max(total, 1), label=labels.get(stage, stage), file=sys.stderr, item_show_func=shown(stage)
            )
        bar.length = max(total, 1)
        bar.update(done - bar.pos, done)

    try:
        yield progress
    finally:
        for bar in bars.values():
            bar.render_finish()
