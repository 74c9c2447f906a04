"""``zs icechunk inspect``: print any file of an Icechunk repository as JSON."""

from __future__ import annotations

import json

import click

from zsarchive.cli.app import main
from zsarchive.cli.params import remote_options


@main.group("icechunk")
def icechunk() -> None:
    """Read Icechunk repositories (spec V1 and V2) without the icechunk library."""


@icechunk.command("inspect")
@click.argument("repo")
@click.option("--repo-info", "repo_info", is_flag=True, help="The repo info (refs, snapshots, ops log, config).")
@click.option("--snapshot", metavar="ID", help="A snapshot file, by id (or branch / tag name).")
@click.option("--manifest", metavar="ID", help="A manifest file, by id.")
@click.option(
    "--transaction-log",
    "transaction_log",
    metavar="ID",
    help="A transaction log, by snapshot id (or branch / tag name).",
)
@click.option("--refs", is_flag=True, help="With --manifest: also list every chunk ref.")
@remote_options
def inspect(
    repo: str,
    repo_info: bool,
    snapshot: str | None,
    manifest: str | None,
    transaction_log: str | None,
    refs: bool,
    anon: bool,
    storage_options: dict[str, str],
) -> None:
    """Print one file of the Icechunk repository REPO (a directory or a file://, s3://, gs://, az:// or
    http(s):// URL) as JSON."""
    chosen = [
        name
        for name, value in (
            ("--repo-info", repo_info),
            ("--snapshot", snapshot),
            ("--manifest", manifest),
            ("--transaction-log", transaction_log),
        )
        if value
    ]
    if len(chosen) != 1:
        raise click.UsageError("choose exactly one of --repo-info, --snapshot, --manifest, --transaction-log")
    if refs and not manifest:
        raise click.UsageError("--refs goes with --manifest")
    # Imported here: the decoders pull in numpy and flatbuffers, which `zs --help` need not.
    from zsarchive.icechunk import Repository
    from zsarchive.icechunk import inspect as views

    repository = Repository.open(repo, storage_options, anon)
    if repo_info:
        doc = views.inspect_repo_info(repository)
    elif snapshot:
        doc = views.inspect_snapshot(repository, repository.resolve(snapshot))
    elif manifest:
        doc = views.inspect_manifest(repository, manifest, with_refs=refs)
    else:
        doc = views.inspect_transaction_log(repository, repository.resolve(transaction_log))
    click.echo(json.dumps(doc, indent=2, ensure_ascii=False))
