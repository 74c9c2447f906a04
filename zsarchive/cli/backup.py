"""``zs backup REPO DEST``: keep a backup set up to date, one line for cron; ``zs status ARCHIVE REPO``."""

from __future__ import annotations

import sys

import click

from zsarchive.cli.app import main
from zsarchive.cli.text import progress_bar
from zsarchive.cli.archive_output import emit, open_archive
from zsarchive.cli.params import Duration, Parallelism, authorize_option, json_option, remote_options
from zsarchive.zs.format.codecs import LEVELS_HELP, NAMES


@main.command("backup")
@click.argument("repo")
@click.argument("dest")
@click.option(
    "--include-chunks/--no-include-chunks",
    default=None,
    help="Embed native chunk bytes (remembered; a change starts a new chain).",
)
@click.option(
    "--codec", type=click.Choice(NAMES), default=None, help="Block compression (remembered; default deflate)."
)
@click.option("-z", "--compress-level", default=None, help=LEVELS_HELP)
@click.option(
    "--chunk-codec",
    type=click.Choice(("none", "same")),
    default=None,
    help="Blocks of embedded chunk bytes, as for zs export (remembered; default none).",
)
@click.option(
    "--max-chain",
    type=click.IntRange(1, 62),
    default=None,
    help="Consolidate a chain of more fragments than this into one full archive (remembered; default 16).",
)
@click.option(
    "--max-fragments-size",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    metavar="RATIO",
    help="Consolidate when the fragments' bytes exceed RATIO times their full archive's (remembered; default 1.0).",
)
@click.option(
    "-j",
    "--parallelism",
    type=Parallelism(),
    default="guess",
    show_default=True,
    help="Worker processes and threads, as for zs export.",
)
@click.option(
    "--wait",
    type=Duration(),
    is_flag=False,
    flag_value="forever",
    default=None,
    metavar="[DURATION]",
    help="When another run holds the lock, wait for it (at most DURATION: 90s, 10min, 2h; --wait "
    "without one, given last, waits as long as it takes) instead of refusing.",
)
@click.option(
    "--break-lock",
    is_flag=True,
    help="Break a stale lock: its run is gone from this machine, or it is older than --stale-after by "
    "DEST's own clock.",
)
@click.option(
    "--stale-after",
    type=Duration(),
    default="24h",
    show_default=True,
    help="The age, by DEST's clock, beyond which --break-lock breaks another machine's lock.",
)
@click.option(
    "--no-lock",
    is_flag=True,
    help="Run without the lock (only where nothing else can run at the same time: a store that "
    "ignores create-only writes cannot hold one).",
)
@click.option(
    "--workdir",
    metavar="DIR",
    help="Where archives for an object-store DEST are written before their upload (default: the "
    "system's temporary directory).",
)
@click.option(
    "--prune",
    is_flag=True,
    help="Then list, one per line on stdout, the archives no chain of DEST needs (deleting them is yours to do).",
)
@click.option("--no-progress", is_flag=True, help="No progress bar even on a terminal.")
@authorize_option
@remote_options
def backup_command(
    repo: str,
    dest: str,
    include_chunks: bool | None,
    codec: str | None,
    compress_level: str | None,
    chunk_codec: str | None,
    max_chain: int | None,
    max_fragments_size: float | None,
    parallelism: int | str,
    wait: float | None,
    break_lock: bool,
    stale_after: float,
    no_lock: bool,
    workdir: str | None,
    prune: bool,
    no_progress: bool,
    authorize: dict[str, dict[str, str]],
    anon: bool,
    storage_options: dict[str, str],
) -> None:
    """Bring the backup set DEST up to date with the Icechunk repository REPO.

    DEST is a directory or an s3://BUCKET/PREFIX, gs://BUCKET/PREFIX or az://CONTAINER/PREFIX URL. The
    first run writes a full archive; later runs a fragment of what is new, or nothing when nothing
    changed. Archives are named by their time and kind (2026-11-28T061230Z-full.zs, ...-fragment.zs),
    never rewritten; a chain grown past --max-chain or --max-fragments-size is consolidated into a new
    full archive, validated before any later run builds on it. The options are remembered in
    DEST/zsbackup.json. One run at a time: DEST/zsbackup.lock. Every command reads DEST as an archive
    (its newest chain). Prints one line: "wrote ..." or "up to date ..." (exit 0), or the reason (exit 1).
    """
    # Imported here: the exporter pulls in numpy and the Icechunk decoders, which `zs --help` need not.
    from zsarchive.archive.backup import backup

    with progress_bar("backing up", not no_progress) as progress:
        result = backup(
            repo,
            dest,
            include_chunks=include_chunks,
            codec=codec,
            compress_level=compress_level,
            chunk_codec=chunk_codec,
            authorize=authorize or None,
            max_chain=max_chain,
            max_fragments_size=max_fragments_size,
            parallelism=parallelism,
            storage_options=storage_options,
            anon=anon,
            wait=wait,
            break_lock=break_lock,
            stale_after=stale_after,
            lock=not no_lock,
            workdir=workdir,
            prune=prune,
            progress=progress,
            report=(lambda line: click.echo(f"zs: {line}", err=True)) if progress else None,
        )
    click.echo(result.describe(), err=True)
    for location in result.prunable:
        click.echo(location)


@main.command("status")
@click.argument("archive")
@click.argument("repo")
@json_option
@remote_options
def status_command(archive: str, repo: str, as_json: bool, anon: bool, storage_options: dict[str, str]) -> None:
    """What the Icechunk repository REPO has that ARCHIVE lacks, one line per branch and tag.

    ARCHIVE is an archive, a fragment or a backup set (zs backup's DEST). Each ref is up to date, ahead
    (NEW snapshots since the archived one, the NEWEST flushed then), moved (the branch was reset), new or
    deleted; the last line counts the ops-log entries the archive lacks and the archived snapshots the
    repository has expired since. Only the repository's refs and repo file are read. Exit status 0 when
    the archive is up to date, 1 when it is behind. Python: RepoArchive.status.
    """
    from zsarchive.archive.read.status import behind

    with open_archive(archive) as arc:
        rows = arc.status(repo, storage_options, anon)
    if as_json:
        emit(rows, True, ())
    else:
        emit(
            ({**row, "ref": f"{row['type']}:{row['name']}", "new": row["new_snapshots"]} for row in rows[:-1]),
            False,
            ("ref", "state", "new", "newest", "archived", "current"),
            fixed=True,
        )
        ops = rows[-1]
        kinds = ", ".join(f"{n} {kind}" for kind, n in ops["entries"].items())
        click.echo(
            f"ops log: {ops['state']}"
            + (
                f", {ops['new_entries']} new entries ({kinds}), the newest at {ops['newest']}"
                if ops["new_entries"]
                else ""
            )
            + (f"; {ops['expired_snapshots']} archived snapshots expired since" if ops["expired_snapshots"] else "")
        )
    if behind(rows):
        sys.exit(1)
