"""``zs checkout ARCHIVE REF TARGET``: one snapshot of an archive as a plain Zarr v3 hierarchy."""

from __future__ import annotations

import click

from zsarchive.cli.app import main
from zsarchive.cli.params import (
    announce_totals,
    authorize_option,
    cluster,
    max_bytes_option,
    remote_options,
    scheduler_option,
)
from zsarchive.cli.text import progress_bar


@main.command("checkout")
@click.argument("archive")
@click.argument("ref")
@click.argument("target")
@click.option(
    "--group",
    metavar="PATH",
    help="Write only this group (or array) and what lies below it; it becomes the root of TARGET.",
)
@click.option(
    "--repo",
    metavar="SOURCE",
    help="The original repository (a directory or an s3://, gs://, az://, "
    "http(s):// URL), for native chunks the archive does not embed.",
)
@click.option(
    "-j",
    "--transfers",
    type=click.IntRange(1, 1024),
    default=None,
    help="Chunk transfers in flight [default: 8 to a directory or zip, 64 to an object store].",
)
@click.option("--no-progress", is_flag=True, help="No progress bar even on a terminal.")
@scheduler_option(
    "Write the chunks (the workers must reach ARCHIVE, TARGET and --repo; TARGET a directory they "
    "share or an object store)"
)
@max_bytes_option
@authorize_option
@remote_options
def checkout_command(
    archive: str,
    ref: str,
    target: str,
    group: str | None,
    repo: str | None,
    transfers: int | None,
    no_progress: bool,
    scheduler: str | None,
    max_bytes: int | None,
    authorize: dict[str, dict[str, str]],
    anon: bool,
    storage_options: dict[str, str],
) -> None:
    """Write the snapshot REF (a branch, tag or snapshot id, with any ~N, ^ or @TIME) of ARCHIVE as plain Zarr v3 at TARGET.

    TARGET is a directory, a path ending in .zip (read with zarr's ZipStore), or an s3://BUCKET/PREFIX,
    gs://BUCKET/PREFIX or az://CONTAINER/PREFIX URL; it must be absent or empty. Every zarr.json is
    written as the repository stored it and every chunk as stored (shards stay shards); chunks never
    written stay absent. --storage-option and --anon apply to TARGET and to --repo, as for zs restore. Every
    chunk is walked before anything is written: the files and bytes to write are shown and held against
    --max-bytes and the free space, and records that break an invariant are refused.
    Python: zsarchive.checkout.
    """
    # Imported here: `zs --help` need not load the archive reader.
    from zsarchive.restore.checkout import checkout

    with cluster(scheduler) as client, progress_bar("checking out", not no_progress) as progress:
        summary = checkout(
            archive,
            ref,
            target,
            group=group,
            repo=repo,
            authorize=authorize,
            storage_options=storage_options,
            anon=anon,
            window=transfers,
            progress=progress,
            client=client,
            max_bytes=max_bytes,
            announce=announce_totals(target, progress is not None),
        )
    click.echo(
        f"wrote {summary.target}: snapshot {summary.snapshot_id}, {summary.nodes} nodes, {summary.chunks} "
        f"chunks, {summary.bytes} bytes in {summary.seconds:.2f} s",
        err=True,
    )
