"""``zs restore ARCHIVE TARGET``: the repository an archive holds, back as an Icechunk repository."""

from __future__ import annotations


import click

from zsarchive.cli.app import main
from zsarchive.cli.text import stage_bars
from zsarchive.cli.params import announce_totals, cluster, max_bytes_option, remote_options, scheduler_option

_LABELS = {
    "manifests": "encoding manifests",
    "chunks": "copying chunk files",
    "metadata": "writing metadata",
    "verify": "reading back",
}
_BYTES = {"chunks"}
"""Stages counted in bytes."""


def _shown(stage: str):
    """What a bar shows after its percentage: the bytes written, for a stage counted in bytes."""
    if stage not in _BYTES:
        return None
    return lambda done: None if done is None else f"{done / 2**20:,.1f} MiB"


@main.command("restore")
@click.argument("archive")
@click.argument("target")
@click.option(
    "--repo",
    "source",
    metavar="SOURCE",
    help="The original repository (a directory or URL, as for `zs export`): chunk files the archive "
    "does not embed are copied from it.",
)
@click.option(
    "--ref",
    "refs",
    multiple=True,
    metavar="REF",
    help="Restore only the history of this branch or tag (repeatable; `main` always comes back).",
)
@click.option(
    "--shallow",
    is_flag=True,
    help="Restore only the tips of the refs (all refs without --ref), each as a one-snapshot history.",
)
@click.option(
    "--materialize-virtual",
    is_flag=True,
    help="Write every virtual chunk the archive keeps (zs export --include-virtual) as a native chunk: "
    "the restored repository then needs none of the sources. Without it, refs stay virtual.",
)
@click.option(
    "-j",
    "--transfers",
    type=click.IntRange(1, 1024),
    default=None,
    help="Writes in flight [default: 8 to a directory, 64 to an object store].",
)
@click.option("--no-progress", is_flag=True, help="No progress bar even on a terminal.")
@scheduler_option("Make the manifests and copy the chunk files (the workers must reach ARCHIVE, TARGET and --repo)")
@max_bytes_option
@remote_options
def restore_command(
    archive: str,
    target: str,
    source: str | None,
    refs: tuple[str, ...],
    shallow: bool,
    materialize_virtual: bool,
    transfers: int | None,
    no_progress: bool,
    scheduler: str | None,
    max_bytes: int | None,
    anon: bool,
    storage_options: dict[str, str],
) -> None:
    """Write the Icechunk repository ARCHIVE holds into TARGET, which must be absent or empty.

    TARGET is a directory or an s3://BUCKET/PREFIX, gs://BUCKET/PREFIX or az://CONTAINER/PREFIX URL
    (credentials as for `zs export`; --anon and --storage-option apply to TARGET and to --repo). Every
    branch, tag, snapshot, node, chunk ref, transaction log and the ops log come back with their ids;
    chunk bytes come from the archive (`zs export --include-chunks`) or from --repo. The file that makes
    TARGET a repository is written last: an interrupted restore leaves nothing icechunk opens. Nothing is
    written before the archive's records are checked against every invariant the restore relies on, and
    the files and bytes to write are counted (and shown) against --max-bytes and the free space.
    """
    from zsarchive.heap import reuse_freed_memory
    from zsarchive.restore import restore

    reuse_freed_memory()
    with cluster(scheduler) as client, stage_bars(_LABELS, not no_progress, _shown) as progress:
        summary = restore(
            archive,
            target,
            repo=source,
            refs=refs,
            shallow=shallow,
            storage_options=storage_options,
            anon=anon,
            progress=progress,
            transfers=transfers,
            client=client,
            materialize_virtual=materialize_virtual,
            max_bytes=max_bytes,
            announce=announce_totals(target, progress is not None),
        )
    for note in summary.notes:
        click.echo(f"zs: note: {note}", err=True)
    click.echo(
        f"restored {summary.target}: spec V{summary.spec_version}, {summary.snapshots} snapshots, "
        f"{summary.branches} branches, {summary.tags} tags, {summary.manifests} manifests, "
        f"{summary.chunk_files} chunk files ({summary.chunk_bytes} bytes)",
        err=True,
    )
