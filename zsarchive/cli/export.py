"""``zs export REPO ARCHIVE``: an Icechunk repository's whole history into one ZS archive."""

from __future__ import annotations

import sys

import click

from zsarchive.cli.app import main
from zsarchive.cli.params import Parallelism, authorize_option, cluster, force_option, remote_options, scheduler_option
from zsarchive.icechunk.kinds import check_new_target
from zsarchive.zs.format.codecs import LEVELS_HELP, NAMES


@main.command("export")
@click.argument("repo")
@click.argument("archive")
@click.option("--codec", type=click.Choice(NAMES), default="deflate", show_default=True,
              help="Block compression (deflate/lzma/none read with any ZS reader; zstd is a zsarchive extension).")
@click.option("-z", "--compress-level", default=None, help=LEVELS_HELP)
@click.option("--include-chunks", is_flag=True, help="Embed native chunk bytes: the archive becomes self-contained.")
@click.option("--chunk-codec", type=click.Choice(("none", "same")), default="none", show_default=True,
              help="Blocks of embedded chunk bytes: none stores them as they are (zarr compressed them "
                   "already; local reads need no copy with --codec none), same compresses them with --codec.")
@click.option("-j", "--parallelism", type=Parallelism(), default="guess", show_default=True,
              help="Worker processes decoding manifests and threads compressing blocks (guess: one per core). "
                   "From object storage, fewer than 500,000 chunk refs are decoded in this process (a worker "
                   "started afresh costs more).")
@click.option("--no-progress", is_flag=True, help="No progress bar even on a terminal.")
@scheduler_option("Decode and compress (the workers must reach REPO)")
@click.option("--base", metavar="OLD.zs",
              help="Write a fragment: only what the archive OLD.zs (itself full or a fragment) lacks. "
                   "Readers open ARCHIVE with OLD.zs beside it, at the same relative path.")
@force_option
@authorize_option
@remote_options
def export_command(repo: str, archive: str, codec: str, compress_level: str | None, include_chunks: bool,
                   chunk_codec: str, parallelism: int | str, no_progress: bool, scheduler: str | None,
                   base: str | None, authorize: dict[str, dict[str, str]], anon: bool,
                   storage_options: dict[str, str], force: bool) -> None:
    """Export the Icechunk repository REPO into the ZS file ARCHIVE.

    REPO is a directory, or a file://, s3://BUCKET/PREFIX, gs://BUCKET/PREFIX, az://CONTAINER/PREFIX
    (abfs://) or http(s):// URL. Credentials and endpoints come from the standard environment variables
    (AWS_ACCESS_KEY_ID, AWS_ENDPOINT_URL, GOOGLE_APPLICATION_CREDENTIALS, AZURE_STORAGE_ACCOUNT_NAME ...).

    With --base, ARCHIVE is a fragment of the chain OLD.zs starts: every query of ARCHIVE answers as a
    full export made now would; `zs consolidate` folds a chain into one archive.

    With --authorize, the index of every virtual shard under those prefixes whose ref carries a
    checksum is read and kept, so that a reader fetches an inner chunk of it in one request.
    """
    check_new_target(archive, force)
    # Imported here: the exporter pulls in numpy and the Icechunk decoders, which `zs --help` need not.
    from zsarchive.archive import export as export_repository

    show = not no_progress and sys.stderr.isatty()
    bar = click.progressbar(length=1, label="exporting", file=sys.stderr) if show else None

    def progress(done: int, total: int) -> None:
        if bar is not None:
            bar.length = max(total, 1)
            bar.update(done - bar.pos)

    with cluster(scheduler) as client:
        if bar is not None:
            bar.__enter__()
        try:
            summary = export_repository(repo, archive, codec=codec, compress_level=compress_level,
                                        include_chunks=include_chunks, chunk_codec=chunk_codec,
                                        parallelism=parallelism, progress=progress, storage_options=storage_options,
                                        anon=anon, client=client, base=base, authorize=authorize)
        finally:
            if bar is not None:
                bar.__exit__(None, None, None)
    for sid, why in summary.left_out.items():
        click.echo(f"zs: note: snapshot {sid} left out: {why}", err=True)
    if summary.unindexed.count:
        click.echo(f"zs: note: {summary.unindexed.count} virtual shards' indexes not kept (readers read them "
                   f"from the objects); the first: {summary.unindexed.first}", err=True)
    total = sum(summary.counts.values())
    click.echo(f"wrote {summary.path}: {total} records, {summary.size} bytes in {summary.seconds:.2f} s", err=True)
