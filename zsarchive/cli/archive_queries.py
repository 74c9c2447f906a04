"""Query commands over a repo archive: refs, log, ls, chunks, chunk, diff, ops, chunk-log."""

from __future__ import annotations

import sys
from typing import Iterator

import click

from zsarchive.cli.app import main, printable
from zsarchive.cli.archive_output import cell, emit, json_option, open_archive
from zsarchive.cli.params import COORDS, authorize_option, remote_options
from zsarchive.io.location import parse_location

LOG_COLUMNS = ("id", "flushed_at", "parent_id", "message")
CHUNK_COLUMNS = ("coords", "kind", "offset", "length", "chunk_id", "location")


since_option = click.option("--since", metavar="TIME", help="Inclusive lower bound (ISO 8601 / RFC 3339 or a date).")
until_option = click.option("--until", metavar="TIME", help="Inclusive upper bound (a bare date covers that day).")


@main.command("refs")
@click.argument("archive")
@json_option
def refs_command(archive: str, as_json: bool) -> None:
    """Branches, tags and deleted tags of ARCHIVE."""
    with open_archive(archive) as arc:
        emit(arc.refs(), as_json, ("type", "name", "snapshot_id"))


@main.command("log")
@click.argument("archive")
@click.argument("ref", required=False)
@since_option
@until_option
@json_option
@click.option("--graph", is_flag=True, help="Draw the snapshot tree git style, children above parents, with the "
              "branch and tag names at their snapshots (REF's history, default main).")
@click.option("--all", "all_refs", is_flag=True, help="With --graph: the history of every branch and tag.")
def log_command(archive: str, ref: str | None, since: str | None, until: str | None, as_json: bool,
                graph: bool, all_refs: bool) -> None:
    """Snapshots newest first: REF's history, or every snapshot when REF is omitted."""
    if all_refs and not graph:
        raise click.UsageError("--all goes with --graph (without it, a log without REF lists every snapshot)")
    if graph:
        return log_graph(archive, ref, since, until, as_json, all_refs)
    with open_archive(archive) as arc:
        emit(arc.log(ref, since=since, until=until), as_json, LOG_COLUMNS)


def log_graph(archive: str, ref: str | None, since: str | None, until: str | None, as_json: bool,
              all_refs: bool) -> None:
    """``zs log --graph [--all]``: one line per snapshot (lines joining lanes too, unless --json)."""
    if since or until:
        raise click.UsageError("--graph draws whole histories: it takes no --since/--until")
    if all_refs and ref:
        raise click.UsageError("--all draws every branch and tag: give no REF")
    with open_archive(archive) as arc:
        lines = arc.graph(ref, all_refs=all_refs)
    if as_json:
        emit((line for line in lines if "id" in line), True, ())
        return
    width = max(len(line["graph"]) for line in lines)
    for line in lines:
        if "id" not in line:
            click.echo(line["graph"])
            continue
        names = f" ({', '.join(line['refs'])})" if line["refs"] else ""
        click.echo(printable(f"{line['graph'].ljust(width)} {line['id']}{names} {line['flushed_at']} "
                             f"{line['message']}"))


@main.command("show")
@click.argument("archive")
@click.argument("ref")
@json_option
def show_command(archive: str, ref: str, as_json: bool) -> None:
    """One commit, as git show --stat: id, parent, time, refs, message, metadata, and per node changed its
    change and the number of chunk refs written or removed."""
    with open_archive(archive) as arc:
        commit = arc.show(ref)
    if as_json:
        emit([commit], True, ())
        return
    for label, key in (("snapshot", "id"), ("parent", "parent_id"), ("date", "flushed_at")):
        click.echo(f"{label:<9}{cell(commit[key])}")
    if commit["refs"]:
        click.echo(f"refs     {cell(commit['refs'])}")
    if commit["metadata"]:
        click.echo(f"metadata {cell(commit['metadata'])}")
    click.echo("")
    for text in commit["message"].splitlines() or [""]:
        click.echo("    " + printable(text))
    click.echo("")
    if commit["log_missing"]:
        click.echo(" (its transaction log was no longer in the repository when it was archived)")
    width = max([len(cell(c["path"])) for c in commit["changes"]] + [0])
    for change in commit["changes"]:
        chunks = f"{change['chunks']} chunk{'s' * (change['chunks'] != 1)}" if change["chunks"] else ""
        click.echo(f" {cell(change['path']).ljust(width)} | {change['change']:<15} {chunks}".rstrip())
    for source, target in commit["moves"]:
        click.echo(f" {printable(source)} => {printable(target)}")
    total = sum(c["chunks"] for c in commit["changes"])
    click.echo(f" {len(commit['changes'])} node{'s' * (len(commit['changes']) != 1)} changed, "
               f"{total} chunk{'s' * (total != 1)}")


@main.command("ls")
@click.argument("archive")
@click.argument("ref")
@json_option
def ls_command(archive: str, ref: str, as_json: bool) -> None:
    """Groups and arrays of the snapshot REF names, a group's descendants right after it
    (paths compared component by component: /a, /a/b, /a-b)."""
    with open_archive(archive) as arc:
        rows = arc.ls(ref)
        for row in rows:
            for internal in ("manifests", "snapshot_id", "since"):
                row.pop(internal, None)
        emit(rows, as_json, ("path", "node_type", "id", "shape", "num_chunks", "dimension_names"))


@main.command("chunks")
@click.argument("archive")
@click.argument("ref")
@click.argument("path")
@json_option
def chunks_command(archive: str, ref: str, path: str, as_json: bool) -> None:
    """Every chunk ref of the array PATH at REF, in coordinate order (streamed)."""
    with open_archive(archive) as arc:
        emit(arc.chunk_refs(ref, path), as_json, CHUNK_COLUMNS)


@main.command("chunk")
@click.argument("archive")
@click.argument("ref")
@click.argument("path")
@click.argument("coords", type=COORDS)
@click.option("--inner", type=COORDS, metavar="I,J", help="Of a sharded array: the inner chunk at this position "
              "within the shard at COORDS.")
@click.option("--data", is_flag=True, help="Write the chunk's bytes to stdout instead of its ref.")
@click.option("--repo", metavar="REPO", help="Repository (a directory or an s3://, gs://, az://, http(s):// URL) "
              "whose chunks/ holds native chunks not embedded.")
@authorize_option
@remote_options
@json_option
def chunk_command(archive: str, ref: str, path: str, coords: tuple[int, ...], inner: tuple[int, ...] | None,
                  data: bool, repo: str | None, authorize: dict[str, dict[str, str]], anon: bool,
                  storage_options: dict[str, str], as_json: bool) -> None:
    """The chunk ref at COORDS (like 3,4; "" for the one chunk of a 0-d array) of the array PATH at REF;
    with --inner, the inner chunk of that shard (its offset and length within the shard's bytes)."""
    where = None if repo is None else parse_location(repo, storage_options, anon)
    with open_archive(archive, authorize) as arc:
        if inner is None:
            chunk = arc.chunk_ref(ref, path, coords)
        else:
            chunk = arc.inner_chunk(ref, path, coords, inner, repo=where)
        if data:
            sys.stdout.buffer.write(b"" if chunk.get("empty") else arc.read_chunk(chunk, ref, where))
            return
        columns = ("path",) + CHUNK_COLUMNS + (("inner", "empty") if inner is not None else ())
        emit([chunk], as_json, columns)


def _diff_rows(diff: dict) -> Iterator[dict]:
    for name in ("new_groups", "new_arrays", "deleted_groups", "deleted_arrays", "updated_groups",
                 "updated_arrays"):
        for path in diff[name]:
            yield {"change": name[:-1], "path": path}
    for path, coords_list in diff["updated_chunks"].items():
        for coords in coords_list:
            yield {"change": "updated_chunk", "path": path, "coords": coords}
    for source, target in diff["moved_nodes"]:
        yield {"change": "moved_node", "from": source, "to": target}


@main.command("diff")
@click.argument("archive")
@click.argument("from_ref", metavar="FROM")
@click.argument("to_ref", metavar="TO")
@json_option
def diff_command(archive: str, from_ref: str, to_ref: str, as_json: bool) -> None:
    """What changed from FROM to TO (FROM must be in TO's history)."""
    with open_archive(archive) as arc:
        emit(_diff_rows(arc.diff(from_ref, to_ref)), as_json, ("change", "path", "coords", "from", "to"))


@main.command("ops")
@click.argument("archive")
@since_option
@until_option
@json_option
def ops_command(archive: str, since: str | None, until: str | None, as_json: bool) -> None:
    """The repository's ops log, newest first."""
    with open_archive(archive) as arc:
        rows = arc.ops_log(since=since, until=until)
        emit(rows, as_json, ("updated_at", "type", "branch", "name", "new_snap_id", "previous_snap_id"))


@main.command("chunk-log")
@click.argument("archive")
@click.argument("path")
@click.argument("coords", type=COORDS)
@click.option("--ref", default=None, help="Whose history to follow (default main).")
@json_option
def chunk_log_command(archive: str, path: str, coords: tuple[int, ...], ref: str | None, as_json: bool) -> None:
    """The commits that changed the chunk at COORDS (like 3,4; "" for a 0-d array) of PATH, newest first."""
    with open_archive(archive) as arc:
        emit(arc.chunk_history(path, coords, ref=ref), as_json, LOG_COLUMNS)
