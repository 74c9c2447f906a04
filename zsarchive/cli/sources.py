"""``zs sources ARCHIVE [--check]``: which of the history depends on which source objects, and whether
they are still there."""

from __future__ import annotations

import json
import sys

import click

from zsarchive.cli.app import main
from zsarchive.cli.archive_output import emit, open_archive
from zsarchive.cli.params import authorize_option, json_option
from zsarchive.cli.text import progress_bar

AT_RISK = 3
"""The exit status when a checked source that some ref not kept in the archive needs changed or vanished."""


@main.command("sources")
@click.argument("archive")
@click.option(
    "--check",
    is_flag=True,
    help="Ask each object under an --authorize'd prefix for its current ETag, Last-Modified and size "
    "(once, concurrently) and compare them with the checksums its refs pin.",
)
@click.option("--no-progress", is_flag=True, help="No progress bar even on a terminal.")
@authorize_option
@json_option
def sources_command(
    archive: str, check: bool, no_progress: bool, authorize: dict[str, dict[str, str]], as_json: bool
) -> None:
    """The source objects ARCHIVE's virtual chunk refs point into, and what depends on each.

    Per object: the refs, distinct ranges and bytes that name it, the first and last snapshot using it,
    and whether the archive keeps those bytes (zs export --include-virtual); then totals per prefix. With
    --check, each object under an --authorize'd prefix is asked for its current version and reported as
    unchanged, changed or missing, with the refs and snapshots depending on it and how many of those refs
    are safe because the archive keeps their bytes. Exit status: 0 when nothing at risk changed, 3 when a
    changed or missing object has refs the archive does not keep (1: an error). Python: RepoArchive.sources.
    """
    with open_archive(archive, authorize) as arc, progress_bar("checking sources", check and not no_progress) as bar:
        found = arc.sources(check=check, progress=bar)
    if as_json:
        click.echo(json.dumps({k: v for k, v in found.items() if k != "sources"}, ensure_ascii=False))
        for row in found["sources"]:
            click.echo(json.dumps(row, ensure_ascii=False))
    else:
        _table(found, check)
    if found["at_risk"]:
        sys.exit(AT_RISK)


def _table(found: dict, check: bool) -> None:
    rows = [
        dict(
            row,
            first=(row["first"] or {}).get("flushed_at"),
            last=(row["last"] or {}).get("flushed_at"),
            kept=f"{row['kept_ranges']}/{row['ranges']}",
        )
        for row in found["sources"]
    ]
    columns = ("location", "refs", "ranges", "bytes", "kept", "first", "last") + (("status",) if check else ())
    emit(rows, False, columns)
    if found["prefixes"]:
        click.echo("")
        emit(found["prefixes"], False, ("prefix", "objects", "refs", "bytes", "kept_refs"))
    click.echo("")
    click.echo(
        f"{found['objects']} objects, {found['refs']} virtual refs, {found['kept_refs']} of them kept in the archive"
    )
    if check:
        click.echo(
            f"checked: {found['unchanged']} unchanged, {found['changed']} changed, {found['missing']} missing; "
            f"{found['safe_refs']} refs to changed or missing objects are safe (kept)"
        )
        for row in found["sources"]:
            if row.get("status") in ("changed", "missing"):
                click.echo(
                    f"{row['status']}: {row['location']} ({row['why']}): {row['refs'] - row['kept_refs']} refs "
                    f"not kept, used by {len(row['snapshots'])} snapshots: {', '.join(row['snapshots'])}"
                )
        if found["at_risk"]:
            click.echo(
                f"at risk: {len(found['at_risk_snapshots'])} snapshots read {found['at_risk_refs']} refs that "
                "no longer read as written"
            )
