"""The click group every ``zs`` subcommand registers on, and its error policy."""

from __future__ import annotations

import importlib
import sys

import click

from zsarchive.errors import ZSError


class _Group(click.Group):
    """Turns library errors into one line on stderr and exit status 1: never a traceback.

    Commands are imported on first use (``lazy``: name -> module that registers it), so
    ``zs dump`` does not pay for importing the Icechunk decoders.
    """

    lazy: dict[str, str] = {}

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(self.commands) | set(self.lazy))

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in self.commands and name in self.lazy:
            importlib.import_module(self.lazy[name])
        return self.commands.get(name)

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except ZSError as exc:
            click.echo(f"zs: error: {exc}", err=True)
            sys.exit(1)
        except BrokenPipeError:
            sys.exit(1)
        except KeyboardInterrupt:
            click.echo("zs: interrupted", err=True)
            sys.exit(130)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="zsarchive")
def main() -> None:
    """zsarchive: ZS files, and Icechunk histories archived in them."""
