"""Progress bars on standard error for work whose total is known only once it starts."""

from __future__ import annotations

import sys

import click


class LazyBar:
    """A bar labelled ``label``, drawn (when ``show``) from the first report on, when its total is known;
    call it as ``progress(done, total)`` and :meth:`close` it at the end."""

    def __init__(self, label: str, show: bool) -> None:
        self.label, self.show = label, show
        self.bar = None

    def __call__(self, done: int, total: int) -> None:
        if not self.show:
            return
        if self.bar is None:
            self.bar = click.progressbar(length=max(total, 1), label=self.label, file=sys.stderr)
            self.bar.__enter__()
        self.bar.update(done - self.bar.pos)

    def close(self) -> None:
        """Finish the bar's line, if it was drawn."""
        if self.bar is not None:
            self.bar.__exit__(None, None, None)
