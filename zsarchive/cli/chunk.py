"""``zs chunk``: one chunk ref (or its bytes), in a module of its own so that a lookup imports no other command."""

from __future__ import annotations

import sys

import click

from zsarchive.cli.app import main
from zsarchive.cli.archive_output import CHUNK_COLUMNS, chunk_row, emit, open_archive
from zsarchive.cli.params import COORDS, authorize_option, json_option, remote_options
from zsarchive.io.location import parse_location


@main.command("chunk")
@click.argument("archive")
@click.argument("ref")
@click.argument("path")
@click.argument("coords", type=COORDS)
@click.option(
    "--inner",
    type=COORDS,
    metavar="I,J",
    help="Of a sharded array: the inner chunk at this position within the shard at COORDS.",
)
@click.option("--data", is_flag=True, help="Write the chunk's bytes to stdout instead of its ref.")
@click.option(
    "--repo",
    metavar="REPO",
    help="Repository (a directory or an s3://, gs://, az://, http(s):// URL) "
    "whose chunks/ holds native chunks not embedded.",
)
@authorize_option
@remote_options
@json_option
def chunk_command(
    archive: str,
    ref: str,
    path: str,
    coords: tuple[int, ...],
    inner: tuple[int, ...] | None,
    data: bool,
    repo: str | None,
    authorize: dict[str, dict[str, str]],
    anon: bool,
    storage_options: dict[str, str],
    as_json: bool,
) -> None:
    """The chunk ref at COORDS of the array PATH at REF.

    COORDS is like 3,4 ("" for the one chunk of a 0-d array); with --inner, the inner chunk of that
    shard (its offset and length within the shard's bytes). A virtual ref whose bytes the archive keeps
    (zs export --include-virtual) reads as "virtual, embedded" ("embedded": true with --json), and --data
    reads it from the archive. Python: RepoArchive.chunk_ref (or chunk), RepoArchive.embeds."""
    where = None if repo is None else parse_location(repo, storage_options, anon)
    with open_archive(archive, authorize) as arc:
        if inner is None:
            chunk = arc.chunk_ref(ref, path, coords)
        else:
            chunk = arc.inner_chunk(ref, path, coords, inner, repo=where)
        if data:
            sys.stdout.buffer.write(b"" if chunk.get("empty") else arc.read_chunk(chunk, ref, where))
            return
        row = chunk_row(arc, chunk)
        if row.get("embedded") and not as_json:
            row["kind"] = "virtual, embedded"
        columns = ("path",) + CHUNK_COLUMNS + (("inner", "empty") if inner is not None else ())
        emit([row], as_json, columns)
