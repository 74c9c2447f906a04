"""``zs validate``: check a ZS file for errors or data corruption."""

from __future__ import annotations

import sys

import click

from zsarchive.cli.app import main
from zsarchive.cli.dump import open_zs
from zsarchive.cli.params import Parallelism
from zsarchive.errors import ZSCorrupt
from zsarchive.zs.validate import validate


class _Bar:
    """A click progress bar on stderr, created on the first report (when the size is known)."""

    def __init__(self) -> None:
        self.bar = None
        self.done = 0

    def __call__(self, done: int, total: int) -> None:
        if self.bar is None:
            self.bar = click.progressbar(length=total, label="validating", file=sys.stderr)
            self.bar.__enter__()
        self.bar.update(done - self.done)
        self.done = done

    def close(self) -> None:
        if self.bar is not None:
            self.bar.__exit__(None, None, None)


@main.command("validate")
@click.option("-j", "parallelism", type=Parallelism(), default="guess", show_default=True,
              help="The number of CPUs to use for decompression.")
@click.option("--no-spinner", is_flag=True, help="Do not show a progress bar on stderr.")
@click.argument("zs_file")
def validate_command(zs_file: str, parallelism: int | str, no_spinner: bool) -> None:
    """Check a .zs file for errors or data corruption.

    ZS_FILE is a path or URL. Every rule of the ZS format is checked; a repo archive's records are
    then checked for their meaning too (shapes, counts, history, references); a fragment's links to
    the archives it builds on are checked, and its chain's records as one archive's. Prints "looks good!" when
    every check passes; otherwise one error line naming the offset or record and the problem, and exit
    status 1.
    """
    bar = _Bar() if not no_spinner and sys.stderr.isatty() else None
    try:
        validate(zs_file, parallelism=parallelism, progress=bar)
    finally:
        if bar is not None:
            bar.close()
    with open_zs(zs_file) as z:
        # Imported here: plain ZS files need nothing of the archive layer.
        from zsarchive.archive import archive_metadata
        from zsarchive.archive.read.chain import open_chain
        from zsarchive.archive.read.validate import validate_archive, validate_fragments

        marker = archive_metadata(z)
        if marker is not None:
            version = marker.get("format_version")
            if not isinstance(version, int):
                raise ZSCorrupt(f"{zs_file}: the archive marker has no format_version")
            view = open_chain(z, zs_file) if marker.get("fragment") is not None else z
            try:
                if view is not z:
                    validate_fragments(view)
                validate_archive(view, version)
            except ZSCorrupt as exc:
                raise ZSCorrupt(f"{zs_file}: {exc}") from None
            finally:
                if view is not z:
                    view.close()
    click.echo("looks good!")
