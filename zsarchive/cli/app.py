"""The click group every ``zs`` subcommand registers on, and its error policy."""

from __future__ import annotations

import errno
import importlib
import sys

import click

from zsarchive.cli import COMMAND_MODULES, SUMMARIES
from zsarchive.cli.text import interrupted, one_line
from zsarchive.errors import ZSError


_DISK_FULL = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)
"""Write failures that are the machine's state, not a bug: one line, like any foreseen error."""

SECTIONS = (
    (
        "Icechunk archives",
        (
            "export",
            "backup",
            "status",
            "summary",
            "refs",
            "log",
            "show",
            "ls",
            "chunks",
            "chunk",
            "diff",
            "chunk-log",
            "ops",
            "serve",
            "consolidate",
            "checkout",
            "restore",
            "icechunk",
        ),
    ),
    ("ZS files (as the reference zs)", ("make", "dump", "info", "validate")),
)
"""How ``zs --help`` groups the commands, in this order (a command in no section ends the last)."""


class _Group(click.Group):
    """Turns library errors into one line on stderr and exit status 1: never a traceback.

    Commands are imported on first use (``lazy``: name -> module that registers it), so
    ``zs dump`` does not pay for importing the Icechunk decoders.
    """

    lazy: dict[str, str] = {}
    summaries: dict[str, str] = {}
    """A lazy command's short help, so ``zs --help`` lists it without importing it (a test keeps each
    equal to the command's own first sentence; a command missing here is imported to ask it)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(self.commands) | set(self.lazy))

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in self.commands and name in self.lazy:
            importlib.import_module(self.lazy[name])
        return self.commands.get(name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The commands in sections (archives, then ZS files), each with its whole first sentence."""
        helps = {}
        for name in self.list_commands(ctx):
            if name not in self.commands and name in self.summaries:
                helps[name] = self.summaries[name]
            elif (cmd := self.get_command(ctx, name)) is not None and not cmd.hidden:
                helps[name] = cmd.get_short_help_str(limit=1000)
        placed = {name for _, names in SECTIONS for name in names}
        for i, (title, names) in enumerate(SECTIONS):
            order = list(names) + (sorted(set(helps) - placed) if i == len(SECTIONS) - 1 else [])
            rows = [(name, helps[name]) for name in order if name in helps]
            if rows:
                with formatter.section(title):
                    formatter.write_dl(rows)

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except ZSError as exc:
            click.echo(f"zs: error: {one_line(str(exc))}", err=True)
            sys.exit(1)
        except BrokenPipeError:
            sys.exit(1)
        except KeyboardInterrupt as exc:
            interrupted(exc)
        except (click.ClickException, click.exceptions.Exit, click.Abort):
            raise
        except Exception as exc:  # the last resort: a bug or a missing check must still not print a traceback
            if isinstance(exc, OSError) and exc.errno in _DISK_FULL:  # wherever it struck (spill files too)
                where = f"{exc.filename}: " if exc.filename else ""
                click.echo(f"zs: error: {one_line(where + (exc.strerror or str(exc)))}", err=True)
                sys.exit(1)
            if ctx.params.get("debug"):
                raise
            problem = "out of memory" if isinstance(exc, MemoryError) else f"{type(exc).__name__}: {exc}"
            click.echo(
                f"zs: internal error: {one_line(problem)} (please report this; `zs --debug ...` shows the traceback)",
                err=True,
            )
            sys.exit(1)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="zsarchive")
@click.option("--debug", is_flag=True, help="Show the Python traceback of an unexpected error.")
def main(debug: bool) -> None:
    """zsarchive: ZS files, and Icechunk histories archived in them."""


main.lazy = COMMAND_MODULES
main.summaries = SUMMARIES
