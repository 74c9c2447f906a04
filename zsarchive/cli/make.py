"""``zs make``: build a ZS file from sorted records in a file (or stdin), like the reference's."""

from __future__ import annotations

import json
import os
import stat
import sys

import click

from zsarchive.cli.app import main
from zsarchive.cli.text import advancing, progress_bar
from zsarchive.cli.params import ESCAPED_BYTES, Parallelism, force_option
from zsarchive.errors import ZSError
from zsarchive.io.outfile import check_new_target, whole_file
from zsarchive.zs.format import codecs
from zsarchive.zs.writer import DEFAULT_APPROX_BLOCK_SIZE, DEFAULT_BRANCHING_FACTOR, ZSWriter


class _Progress:
    """A binary input whose reads advance a progress callback (``advance(bytes read)``)."""

    def __init__(self, file, advance):
        self._file = file
        self._advance = advance
        self.name = getattr(file, "name", "input")

    def read(self, n: int = -1) -> bytes:
        data = self._file.read(n)
        if self._advance is not None:
            self._advance(len(data))
        return data

    def close(self) -> None:
        self._file.close()


def _input_size(file) -> int:
    """Bytes in a regular input file, 0 when unknown (pipes, terminals)."""
    try:
        st = os.fstat(file.fileno())
    except (OSError, ValueError):
        return 0
    return st.st_size if stat.S_ISREG(st.st_mode) else 0


def _metadata(ctx, param, value: str) -> dict:
    try:
        metadata = json.loads(value)
    except ValueError as exc:
        raise click.BadParameter(f"not valid JSON: {exc}") from None
    if not isinstance(metadata, dict):
        raise click.BadParameter(f"must be a JSON object ({{...}}), not a JSON {type(metadata).__name__}")
    return metadata


@main.command("make")
@click.argument("metadata", callback=_metadata)
@click.argument("input_file", type=click.Path(dir_okay=False, allow_dash=True))
@click.argument("new_zs_file")
@click.option(
    "--terminator",
    type=ESCAPED_BYTES,
    default=None,
    help=r"Records end with TERMINATOR (Python escapes, e.g. '\x00' or '\r\n').  [default: \n]",
)
@click.option(
    "--length-prefixed",
    type=click.Choice(["uleb128", "u64le"]),
    default=None,
    help="Records are binary, each preceded by its length in this encoding.",
)
@click.option(
    "-j",
    "--parallelism",
    type=Parallelism(),
    default="guess",
    show_default=True,
    help="Number of threads compressing blocks.",
)
@click.option("--no-spinner", is_flag=True, help="Do not show the progress bar.")
@click.option(
    "--branching-factor",
    type=click.IntRange(min=2),
    default=DEFAULT_BRANCHING_FACTOR,
    show_default=True,
    help="Number of entries in each index block.",
)
@click.option(
    "--approx-block-size",
    type=click.IntRange(min=1),
    default=DEFAULT_APPROX_BLOCK_SIZE,
    show_default=True,
    help="Approximate uncompressed size of each data block, in bytes.",
)
@click.option(
    "--codec",
    type=click.Choice(codecs.NAMES),
    default="lzma",
    show_default=True,
    help="Compression; zstd is a zsarchive extension other ZS readers cannot read.",
)
@click.option("-z", "--compress-level", default=None, help=codecs.LEVELS_HELP)
@click.option(
    "--no-default-metadata",
    is_flag=True,
    help="Do not add the 'build-info' key (time, host, user, version) to the metadata.",
)
@force_option
def make(
    metadata: dict,
    input_file: str,
    new_zs_file: str,
    terminator: bytes | None,
    length_prefixed: str | None,
    parallelism,
    no_spinner: bool,
    branching_factor: int,
    approx_block_size: int,
    codec: str,
    compress_level: str | None,
    no_default_metadata: bool,
    force: bool,
) -> None:
    """Create NEW_ZS_FILE from the sorted records in INPUT_FILE ("-" for stdin).

    METADATA is a JSON object stored in the file's header, e.g. '{}'.
    """
    if terminator is not None and length_prefixed is not None:
        raise click.UsageError("--terminator and --length-prefixed cannot be used together")
    try:
        source = sys.stdin.buffer if input_file == "-" else open(input_file, "rb")
    except OSError as exc:
        raise ZSError(f"{input_file}: cannot open: {exc.strerror}") from None
    check_new_target(new_zs_file, force)
    # written beside the target and renamed over it once complete: a failure (a full disk) leaves no
    # file, and a replaced file stays whole until then
    with source, whole_file(new_zs_file, "make", overwrite=force) as partial:
        writer = ZSWriter(
            partial,
            metadata,
            branching_factor,
            approx_block_size=approx_block_size,
            codec=codec,
            compress_level=compress_level,
            parallelism=parallelism,
            include_default_metadata=not no_default_metadata,
            name=new_zs_file,
        )
        with writer:
            size = _input_size(source)
            # Without a known size (a pipe) a bar could only guess: show none.
            with progress_bar("zs make", bool(size) and not no_spinner) as progress:
                advance = None if progress is None else advancing(progress, size)
                writer.add_file_contents(
                    _Progress(source, advance),
                    terminator=b"\n" if terminator is None else terminator,
                    length_prefixed=length_prefixed,
                )
            writer.finish()
