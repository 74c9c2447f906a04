"""``zs validate``: check a ZS file for errors or data corruption."""

from __future__ import annotations


import click

from zsarchive.cli.app import main
from zsarchive.cli.text import progress_bar
from zsarchive.cli.params import Parallelism


@main.command("validate")
@click.option(
    "-j",
    "parallelism",
    type=Parallelism(),
    default="guess",
    show_default=True,
    help="The number of CPUs to use for decompression.",
)
@click.option("--no-spinner", is_flag=True, help="Do not show a progress bar on stderr.")
@click.argument("zs_file")
def validate_command(zs_file: str, parallelism: int | str, no_spinner: bool) -> None:
    """Check a .zs file for errors or data corruption.

    ZS_FILE is a path or URL (a backup set: the newest archive of its newest chain). Every rule of the ZS
    format is checked; a repo archive's records are
    then checked for their meaning too (shapes, counts, history, references); a fragment's links to
    the archives it builds on are checked, and its chain's records as one archive's. Prints "looks good!" when
    every check passes; otherwise one error line naming the offset or record and the problem, and exit
    status 1.
    """
    from zsarchive.archive.read.validate import validate_file  # here: `zs --help` need not import it

    with progress_bar("validating", not no_spinner) as progress:
        validate_file(zs_file, parallelism=parallelism, progress=progress)
    click.echo("looks good!")
