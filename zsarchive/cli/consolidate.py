"""``zs consolidate FRAGMENT ARCHIVE``: a chain of fragments folded into one standalone archive."""

from __future__ import annotations

import click

from zsarchive.cli.app import main
from zsarchive.cli.params import Parallelism, force_option
from zsarchive.zs.format.codecs import LEVELS_HELP, NAMES


@main.command("consolidate")
@click.argument("fragment")
@click.argument("archive")
@click.option("--codec", type=click.Choice(NAMES), default=None, help="Block compression  [default: the fragment's]")
@click.option("-z", "--compress-level", default=None, help=LEVELS_HELP)
@click.option(
    "--chunk-codec",
    type=click.Choice(("none", "same")),
    default="none",
    show_default=True,
    help="Blocks of embedded chunk bytes: stored as they are, or compressed with --codec.",
)
@click.option(
    "-j",
    "--parallelism",
    type=Parallelism(),
    default="guess",
    show_default=True,
    help="Threads compressing blocks (guess: one per core).",
)
@force_option
def consolidate_command(
    fragment: str,
    archive: str,
    codec: str | None,
    compress_level: str | None,
    chunk_codec: str,
    parallelism: int | str,
    force: bool,
) -> None:
    """Write the chain whose newest archive is FRAGMENT as one standalone ARCHIVE.

    ARCHIVE holds the records of a full export of the repository made when FRAGMENT was (its header
    aside), needs no other file, and answers every query as the chain does. FRAGMENT is a path or URL;
    the archives it builds on are opened beside it and checked against the hashes it names.
    """
    # Imported here: the exporter pulls in numpy and the Icechunk decoders, which `zs --help` need not.
    from zsarchive.archive.write.incremental import consolidate

    summary = consolidate(
        fragment,
        archive,
        codec=codec,
        compress_level=compress_level,
        chunk_codec=chunk_codec,
        parallelism=parallelism,
        overwrite=force,
    )
    total = sum(summary.counts.values())
    click.echo(f"wrote {summary.path}: {total} records, {summary.size} bytes in {summary.seconds:.2f} s", err=True)
