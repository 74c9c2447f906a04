"""``zs export REPO ARCHIVE``: an Icechunk repository's whole history into one ZS archive."""

from __future__ import annotations

import click

from zsarchive.cli.app import main
from zsarchive.cli.params import (
    BYTE_SIZE,
    Parallelism,
    authorize_option,
    cluster,
    force_option,
    remote_options,
    scheduler_option,
)
from zsarchive.cli.text import progress_bar
from zsarchive.errors import ZSError
from zsarchive.icechunk.kinds import REPOSITORY, local_kind
from zsarchive.io.outfile import check_new_target
from zsarchive.zs.format.codecs import LEVELS_HELP, NAMES


@main.command("export")
@click.argument("repo")
@click.argument("archive")
@click.option(
    "--codec",
    type=click.Choice(NAMES),
    default="deflate",
    show_default=True,
    help="Block compression (deflate/lzma/none read with any ZS reader; zstd is a zsarchive extension).",
)
@click.option("-z", "--compress-level", default=None, help=LEVELS_HELP)
@click.option("--include-chunks", is_flag=True, help="Embed native chunk bytes: the archive becomes self-contained.")
@click.option(
    "--include-virtual",
    is_flag=True,
    help="Keep the bytes of every virtual chunk ref under an --authorize'd prefix (format 7): each "
    "range read once, checked against the ref's checksum; history then reads without its sources.",
)
@click.option(
    "--max-virtual-bytes",
    type=BYTE_SIZE,
    metavar="SIZE",
    help="With --include-virtual: refuse, before reading any, an export that would keep more than SIZE "
    "bytes of virtual chunks (500M, 20G ...).",
)
@click.option(
    "--chunk-codec",
    type=click.Choice(("none", "same")),
    default="none",
    show_default=True,
    help="Blocks of embedded chunk bytes: none stores them as they are (zarr compressed them "
    "already; local reads need no copy with --codec none), same compresses them with --codec.",
)
@click.option(
    "-j",
    "--parallelism",
    type=Parallelism(),
    default="guess",
    show_default=True,
    help="Worker processes decoding manifests and threads compressing blocks (guess: one per core). "
    "From object storage, fewer than 500,000 chunk refs are decoded in this process (a worker "
    "started afresh costs more).",
)
@click.option("--no-progress", is_flag=True, help="No progress bar even on a terminal.")
@scheduler_option("Decode and compress (the workers must reach REPO)")
@click.option(
    "--base",
    metavar="OLD.zs",
    help="Write a fragment: only what the archive OLD.zs (itself full or a fragment) lacks. "
    "Readers open ARCHIVE with OLD.zs beside it, at the same relative path.",
)
@force_option
@authorize_option
@remote_options
def export_command(
    repo: str,
    archive: str,
    codec: str,
    compress_level: str | None,
    include_chunks: bool,
    include_virtual: bool,
    max_virtual_bytes: int | None,
    chunk_codec: str,
    parallelism: int | str,
    no_progress: bool,
    scheduler: str | None,
    base: str | None,
    authorize: dict[str, dict[str, str]],
    anon: bool,
    storage_options: dict[str, str],
    force: bool,
) -> None:
    """Export the Icechunk repository REPO into the ZS file ARCHIVE.

    REPO is a directory, or a file://, s3://BUCKET/PREFIX, gs://BUCKET/PREFIX, az://CONTAINER/PREFIX
    (abfs://) or http(s):// URL. Credentials and endpoints come from the standard environment variables
    (AWS_ACCESS_KEY_ID, AWS_ENDPOINT_URL, GOOGLE_APPLICATION_CREDENTIALS, AZURE_STORAGE_ACCOUNT_NAME ...).

    With --base, ARCHIVE is a fragment of the chain OLD.zs starts: every query of ARCHIVE answers as a
    full export made now would; `zs consolidate` folds a chain into one archive.

    With --authorize, the index of every virtual shard under those prefixes whose ref carries a
    checksum is read and kept, so that a reader fetches an inner chunk of it in one request. With
    --include-virtual too, the bytes of every virtual chunk ref under them are kept (each distinct range
    once): readers take them from the archive, and the history reads after its sources change or vanish.
    A ref whose source no longer matches its checksum is listed and not kept; with --base, only the
    ranges the chain lacks are read.
    """
    if max_virtual_bytes is not None and not include_virtual:
        raise click.UsageError("--max-virtual-bytes limits --include-virtual, which is not given")
    if local_kind(archive) == REPOSITORY:
        raise ZSError(
            f"{archive}: is an Icechunk repository, not a file to write; the archive is a new file: "
            "zs export REPO OUT.zs"
        )
    check_new_target(archive, force)  # before a cluster starts; the library asks again
    # Imported here: the exporter pulls in numpy and the Icechunk decoders, which `zs --help` need not.
    from zsarchive.archive import export as export_repository

    if include_chunks or include_virtual:
        from zsarchive.heap import reuse_freed_memory

        reuse_freed_memory()  # pieces of a MiB each, read and dropped in turn: 1 GiB kept in 15% less time

    with (
        cluster(scheduler) as client,
        progress_bar("exporting", not no_progress) as progress,
        progress_bar("keeping virtual chunks (bytes)", include_virtual and not no_progress) as byte_progress,
    ):
        summary = export_repository(
            repo,
            archive,
            codec=codec,
            compress_level=compress_level,
            include_chunks=include_chunks,
            chunk_codec=chunk_codec,
            parallelism=parallelism,
            progress=progress,
            storage_options=storage_options,
            anon=anon,
            client=client,
            base=base,
            authorize=authorize,
            include_virtual=include_virtual,
            max_virtual_bytes=max_virtual_bytes,
            virtual_progress=byte_progress,
            overwrite=force,
        )
    for sid, why in summary.left_out.items():
        click.echo(f"zs: note: snapshot {sid} left out: {why}", err=True)
    if summary.unindexed.count:
        click.echo(
            f"zs: note: {summary.unindexed.count} virtual shards' indexes not kept (readers read them "
            f"from the objects); the first: {summary.unindexed.first}",
            err=True,
        )
    if summary.virtual is not None:
        report_virtual(summary.virtual)
    total = sum(summary.counts.values())
    click.echo(f"wrote {summary.path}: {total} records, {summary.size} bytes in {summary.seconds:.2f} s", err=True)


def report_virtual(report) -> None:
    """What the export did with virtual chunk bytes: a line of totals, and a warning per source whose
    ranges it could not keep (with the first reason) and per prefix it was not authorized to read."""
    for location, (count, why) in sorted(report.failed.items()):
        click.echo(
            f"zs: warning: {location}: {count} virtual range{'s' if count != 1 else ''} not kept: {why}", err=True
        )
    for prefix, count in sorted(report.outside.items()):
        click.echo(
            f"zs: note: {count} virtual range{'s' if count != 1 else ''} under {prefix} stay references "
            f"(not under an --authorize'd prefix)",
            err=True,
        )
    click.echo(
        f"kept {report.kept:,} virtual ranges ({report.kept_bytes:,} bytes) and {report.aliases:,} aliases"
        + (f"; {report.held:,} already in the base" if report.held else "")
        + (f"; {report.failed_ranges:,} not kept (their sources changed or failed)" if report.failed else "")
        + (f"; {sum(report.outside.values()):,} outside the authorized prefixes" if report.outside else ""),
        err=True,
    )
