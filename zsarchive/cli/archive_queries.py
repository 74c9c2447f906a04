"""Query commands over a repo archive: summary, refs, log, ls, chunks, diff, ops, chunk-log (``chunk``: its own module)."""

from __future__ import annotations

import json
from typing import Any, Iterator

import click

from zsarchive.archive import NotFound
from zsarchive.cli.app import main
from zsarchive.cli.archive_output import CHUNK_COLUMNS, cell, emit, open_archive
from zsarchive.cli.params import COORDS, json_option
from zsarchive.cli.text import printable

LOG_COLUMNS = ("id", "flushed_at", "parent_id", "message")


since_option = click.option("--since", metavar="TIME", help="Inclusive lower bound (ISO 8601 / RFC 3339 or a date).")
until_option = click.option("--until", metavar="TIME", help="Inclusive upper bound (a bare date covers that day).")


@main.command("summary")
@click.argument("archive")
@click.option("--json", "as_json", is_flag=True, help="The summary as one JSON object.")
def summary_command(archive: str, as_json: bool) -> None:
    """What ARCHIVE holds, at a glance.

    The source repository, branches (commits, dates) and tags, the arrays at each branch tip, the chunk
    bytes embedded, the virtual chunk bytes kept (and where the refs that stay references point), the
    archive's size, format and fragment chain. Python: RepoArchive.summary."""
    with open_archive(archive) as arc:
        facts = arc.summary()
    if as_json:
        click.echo(json.dumps(facts, ensure_ascii=False, indent=2))
        return
    about, source = facts["archive"], facts["source"]
    chunks, snapshots = facts["chunk_bytes"], facts["snapshots"]
    click.echo(
        f"archive      {about['location']}: {about['size']:,} bytes, format version {about['format_version']}, "
        f"exported {about['export_time']} by {about['exporter']}"
    )
    for i, member in enumerate(about["chain"]):
        role = "full archive" if "covers" not in member else f"fragment covering {' to '.join(member['covers'])}"
        click.echo(f"{'chain' if i == 0 else '':<12} {member['location']} ({role}, {member['size']:,} bytes)")
    click.echo(
        f"source       Icechunk repository, spec version {source['spec_version']}; metadata "
        f"{json.dumps(source['metadata'], ensure_ascii=False, sort_keys=True)}"
    )
    for prefix in source["virtual_chunk_containers"]:
        click.echo(f"             virtual chunks under {prefix}")
    click.echo(f"snapshots    {snapshots['total']} ({snapshots['unreachable']} reached by no branch or tag)")
    click.echo(
        "chunk bytes  "
        + (
            f"embedded: {chunks['records']} records in {chunks['bytes']:,} bytes of the archive"
            if chunks["embedded"]
            else "not embedded (native chunks are read from the repository: --repo)"
        )
    )
    virtual = facts["virtual_bytes"]
    if virtual is not None:
        click.echo(
            f"virtual      {virtual['kept_refs']:,} of {virtual['refs']:,} virtual refs kept: "
            f"{virtual['kept_ranges']:,} ranges in {virtual['bytes']:,} bytes of the archive"
        )
        for item in virtual["not_kept"]:
            click.echo(f"             {item['refs']:,} refs under {item['prefix']} stay references")
    click.echo()
    emit(
        ({**b, "branch": b["name"]} for b in facts["branches"]),
        False,
        ("branch", "commits", "first", "last", "snapshot_id"),
        fixed=True,
    )
    click.echo()
    tags = facts["tags"] + [{"name": name, "snapshot_id": "(deleted)"} for name in facts["deleted_tags"]]
    emit(({**t, "tag": t["name"]} for t in tags), False, ("tag", "snapshot_id", "flushed_at"), fixed=True)
    for branch, arrays in facts["arrays"].items():
        click.echo(f"\narrays at {branch}:")
        emit(arrays, False, ("path", "shape", "dtype", "chunk_shape"), fixed=True)


@main.command("refs")
@click.argument("archive")
@json_option
def refs_command(archive: str, as_json: bool) -> None:
    """Branches, tags and deleted tags of ARCHIVE.

    Python: RepoArchive.refs."""
    with open_archive(archive) as arc:
        emit(arc.refs(), as_json, ("type", "name", "snapshot_id"))


@main.command("log")
@click.argument("archive")
@click.argument("ref", required=False)
@since_option
@until_option
@click.option(
    "-n",
    "--max-count",
    type=click.IntRange(min=0),
    default=None,
    metavar="N",
    help="Show at most N snapshots (the newest).",
)
@json_option
@click.option(
    "--graph",
    is_flag=True,
    help="Draw the snapshot tree git style, children above parents, with the "
    "branch and tag names at their snapshots (REF's history, default main).",
)
@click.option("--all", "all_refs", is_flag=True, help="With --graph: the history of every branch and tag.")
def log_command(
    archive: str,
    ref: str | None,
    since: str | None,
    until: str | None,
    max_count: int | None,
    as_json: bool,
    graph: bool,
    all_refs: bool,
) -> None:
    """Snapshots, newest first: REF's history, or every snapshot.

    Without REF, each snapshot comes with the branches and tags whose history holds it (REFS;
    "(unreachable)": none does). With --graph, the tree of REF's history (--all: of every branch and
    tag). Python: RepoArchive.log, RepoArchive.graph."""
    if all_refs and not graph:
        raise click.UsageError("--all goes with --graph (without it, a log without REF lists every snapshot)")
    if graph:
        return log_graph(archive, ref, since, until, max_count, as_json, all_refs)
    with open_archive(archive) as arc:
        rows = arc.log(ref, since=since, until=until, max_count=max_count)
        if ref is not None:
            emit(rows, as_json, LOG_COLUMNS)
            return
        reached = arc.reached_by()
        for row in rows:
            row["refs"] = reached.get(row["id"], [])
        emit(
            ({**row, "refs": row["refs"] or "(unreachable)"} if not as_json else row for row in rows),
            as_json,
            LOG_COLUMNS[:-1] + ("refs",) + LOG_COLUMNS[-1:],
            fixed=True,
        )


def log_graph(
    archive: str,
    ref: str | None,
    since: str | None,
    until: str | None,
    max_count: int | None,
    as_json: bool,
    all_refs: bool,
) -> None:
    """``zs log --graph [--all]``: one line per snapshot (lines joining lanes too, unless --json)."""
    if since or until:
        raise click.UsageError("--graph draws whole histories: it takes no --since/--until (-n cuts it)")
    if all_refs and ref:
        raise click.UsageError("--all draws every branch and tag: give no REF")
    with open_archive(archive) as arc:
        lines = arc.graph(ref, all_refs=all_refs, max_count=max_count)
    if as_json:
        emit((line for line in lines if "id" in line), True, ())
        return
    width = max((len(line["graph"]) for line in lines), default=0)
    for line in lines:
        if "id" not in line:
            click.echo(line["graph"])
            continue
        names = f" ({', '.join(line['refs'])})" if line["refs"] else ""
        click.echo(
            printable(f"{line['graph'].ljust(width)} {line['id']}{names} {line['flushed_at']} {line['message']}")
        )


@main.command("show")
@click.argument("archive")
@click.argument("ref")
@json_option
def show_command(archive: str, ref: str, as_json: bool) -> None:
    """One commit and what it changed, as git show --stat.

    Its id, parent, time, refs, message and metadata, then per node changed its change and the number of
    chunk refs written or removed, and the moves.

    Python: RepoArchive.show."""
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
    click.echo(
        f" {len(commit['changes'])} node{'s' * (len(commit['changes']) != 1)} changed, "
        f"{total} chunk{'s' * (total != 1)}"
    )


@main.command("ls")
@click.argument("archive")
@click.argument("ref")
@click.argument("path", required=False)
@json_option
def ls_command(archive: str, ref: str, path: str | None, as_json: bool) -> None:
    """Groups and arrays at REF (PATH and what is under it, if given).

    A group's descendants come right after it (paths compared component by component: /a, /a/b, /a-b).

    CHUNK_SHAPE is the shape of one chunk (of a shard, for a sharded array), CHUNK_GRID the number of chunks
    along each dimension; () is a scalar's shape. Python: RepoArchive.ls."""
    with open_archive(archive) as arc:
        rows = arc.ls(ref, path)
        for row in rows:
            for internal in ("manifests", "snapshot_id", "since"):
                row.pop(internal, None)
            if not as_json:
                row["chunk_grid"] = row.get("num_chunks")
        emit(
            rows,
            as_json,
            ("path", "node_type", "shape", "dtype", "chunk_shape", "chunk_grid", "dimension_names", "id"),
            fixed=True,
        )


@main.command("chunks")
@click.argument("archive")
@click.argument("ref")
@click.argument("path")
@json_option
def chunks_command(archive: str, ref: str, path: str, as_json: bool) -> None:
    """Every chunk ref of the array PATH at REF, in coordinate order (streamed).

    Python: RepoArchive.chunk_refs (or chunks)."""
    with open_archive(archive) as arc:
        emit(arc.chunk_refs(ref, path), as_json, CHUNK_COLUMNS)


def chunk_text(chunk: dict | None) -> str:
    """One chunk ref in a table cell: its kind and where its bytes are (``none``: no chunk, the fill value)."""
    if chunk is None:
        return "none"
    if chunk["kind"] == "inline":
        return f"inline {chunk['length']} B"
    where = chunk["chunk_id"] if chunk["kind"] == "native" else chunk["location"]
    return f"{chunk['kind']} {where} [{chunk['offset']}+{chunk['length']}]"


class _Sides:
    """The array nodes of a diff's two snapshots, looked up once each, and a chunk's ref on either side."""

    def __init__(self, arc, from_ref: str, to_ref: str):
        self.arc, self.refs = arc, (from_ref, to_ref)
        self.nodes: dict[tuple[int, str], Any] = {}

    def chunk(self, side: int, path: str, coords: tuple[int, ...]) -> dict | None:
        key = (side, path)
        if key not in self.nodes:
            try:
                node = self.arc.node(self.refs[side], path)
            except NotFound:
                node = None
            self.nodes[key] = node if node is not None and node["node_type"] == "array" else None
        node = self.nodes[key]
        return None if node is None else self.arc.node_chunk_ref(node, coords)


def _diff_rows(arc, diff: dict, from_ref: str, to_ref: str) -> Iterator[dict]:
    for name in ("new_groups", "new_arrays", "deleted_groups", "deleted_arrays", "updated_groups", "updated_arrays"):
        for path in diff[name]:
            yield {"change": name[:-1], "path": path}
    sides = _Sides(arc, from_ref, to_ref)
    for path, coords_list in diff["updated_chunks"].items():
        for coords in coords_list:
            yield {
                "change": "updated_chunk",
                "path": path,
                "coords": coords,
                "from": sides.chunk(0, path, tuple(coords)),
                "to": sides.chunk(1, path, tuple(coords)),
            }
    for source, target in diff["moved_nodes"]:
        yield {"change": "moved_node", "path": target, "from": source, "to": target}


def _diff_stat(arc, diff: dict, from_ref: str, to_ref: str) -> list[dict]:
    """Per array, how many chunks the diff adds, changes and removes."""
    sides = _Sides(arc, from_ref, to_ref)
    out = []
    for path, coords_list in diff["updated_chunks"].items():
        row = {"path": path, "added": 0, "changed": 0, "removed": 0}
        for coords in coords_list:
            old, new = (sides.chunk(side, path, tuple(coords)) is not None for side in (0, 1))
            row["added" if not old else "changed" if new else "removed"] += 1
        out.append(row)
    return out


@main.command("diff")
@click.argument("archive")
@click.argument("from_ref", metavar="FROM")
@click.argument("to_ref", metavar="TO")
@click.option("--stat", is_flag=True, help="Per array, the counts of chunks added, changed and removed.")
@json_option
def diff_command(archive: str, from_ref: str, to_ref: str, stat: bool, as_json: bool) -> None:
    """What changed from FROM to TO.

    FROM must be in TO's history (the same snapshot: nothing changed).

    An updated chunk shows its ref at FROM and at TO (kind, and chunk id or location with [offset+length],
    or the size of an inline chunk; none: no chunk there). Python: RepoArchive.diff."""
    with open_archive(archive) as arc:
        diff = arc.diff(from_ref, to_ref)
        if stat:
            emit(_diff_stat(arc, diff, from_ref, to_ref), as_json, ("path", "added", "changed", "removed"), fixed=True)
            return
        rows = _diff_rows(arc, diff, from_ref, to_ref)
        if not as_json:
            rows = (
                {**row, "from": chunk_text(row["from"]), "to": chunk_text(row["to"])}
                if row["change"] == "updated_chunk"
                else row
                for row in rows
            )
        emit(rows, as_json, ("change", "path", "coords", "from", "to"), fixed=True)


@main.command("ops")
@click.argument("archive")
@since_option
@until_option
@json_option
def ops_command(archive: str, since: str | None, until: str | None, as_json: bool) -> None:
    """The repository's ops log, newest first.

    Python: RepoArchive.ops_log (or ops)."""
    with open_archive(archive) as arc:
        rows = arc.ops_log(since=since, until=until)
        emit(rows, as_json, ("updated_at", "type", "branch", "name", "new_snap_id", "previous_snap_id"))


@main.command("chunk-log")
@click.argument("archive")
@click.argument("ref")
@click.argument("path")
@click.argument("coords", type=COORDS)
@json_option
def chunk_log_command(archive: str, ref: str, path: str, coords: tuple[int, ...], as_json: bool) -> None:
    """The commits in REF's history that changed one chunk, newest first.

    COORDS is like 3,4 ("" for a 0-d array). Python: RepoArchive.chunk_log (or chunk_history)."""
    with open_archive(archive) as arc:
        emit(arc.chunk_log(ref, path, coords), as_json, LOG_COLUMNS)
