"""``zs dump``: write some or all records of a ZS file to a flat file."""

from __future__ import annotations

import sys

import click

from zsarchive.cli.app import main
from zsarchive.cli.text import advancing, progress_bar
from zsarchive.cli.params import ESCAPED_BYTES, Parallelism
from zsarchive.errors import ZSError
from zsarchive.zs.reader import ZS


def open_zs(zs_file: str, **kwargs) -> ZS:
    """Open a path, or a URL for arguments starting with "http" (the reference's rule)."""
    if zs_file.startswith("http"):
        return ZS(url=zs_file, **kwargs)
    return ZS(zs_file, **kwargs)


@main.command("dump")
@click.option("--start", type=ESCAPED_BYTES, help="Output only records which are >= START.")
@click.option("--stop", type=ESCAPED_BYTES, help="Do not output any records which are >= STOP.")
@click.option("--prefix", type=ESCAPED_BYTES, help="Output only records which begin with PREFIX.")
@click.option(
    "--terminator",
    type=ESCAPED_BYTES,
    default=None,
    help=r"String written after each record (Python escapes allowed).  [default: \n]",
)
@click.option(
    "--length-prefixed",
    type=click.Choice(["uleb128", "u64le"]),
    help="Prefix each record with its length in this encoding instead of a terminator.",
)
@click.option(
    "-j",
    "parallelism",
    type=Parallelism(minimum=0),
    default="guess",
    show_default=True,
    help="The number of CPUs to use for decompression (0: none besides this one).",
)
@click.option("-o", "--output", metavar="FILE", default="-", show_default=True, help='Output file, or "-" for stdout.')
@click.option("--no-spinner", is_flag=True, help="Do not show a progress bar on stderr.")
@click.argument("zs_file")
def dump_command(
    zs_file: str,
    start: bytes | None,
    stop: bytes | None,
    prefix: bytes | None,
    terminator: bytes | None,
    length_prefixed: str | None,
    parallelism: int | str,
    output: str,
    no_spinner: bool,
) -> None:
    """Unpack some or all of the contents of a .zs file.

    ZS_FILE is a path, or a URL if it starts with "http". --start, --stop and --prefix select
    records (ASCIIbetical order, Python string escapes such as "\\x00" allowed); records are
    written one per line, or ended by --terminator, or prefixed by their length.
    """
    if terminator is not None and length_prefixed is not None:
        raise click.UsageError("--terminator and --length-prefixed exclude each other")
    if terminator is None:
        terminator = b"\n"
    with open_zs(zs_file, parallelism=parallelism) as z:
        owned = output != "-"
        if not owned:
            out = sys.stdout.buffer
        else:
            try:
                out = open(output, "wb")
            except OSError as exc:
                raise ZSError(f"{output}: cannot write: {exc.strerror or exc}") from None
        try:
            with progress_bar("dumping", not no_spinner) as progress:
                z.dump(
                    out,
                    start,
                    stop,
                    prefix,
                    terminator,
                    length_prefixed,
                    progress=None if progress is None else advancing(progress, z.total_file_length),
                )
                if progress is not None:
                    progress(z.total_file_length, z.total_file_length)  # progress counts data blocks; the rest is index
            out.flush()
        finally:
            if owned:
                out.close()
