"""``zs serve``: a local, read-only web page of an archive."""

from __future__ import annotations

import click

from zsarchive.cli.app import main
from zsarchive.cli.archive_output import open_archive
from zsarchive.errors import ZSError


@main.command("serve")
@click.argument("archive")
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="Address to listen on (another than loopback shows the archive to the network).",
)
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=8000,
    show_default=True,
    help="Port to listen on (0: any free port).",
)
@click.option(
    "--allow-host",
    "allowed",
    multiple=True,
    metavar="NAME",
    help="A name the page is reached by besides 127.0.0.1, localhost and the --host address (e.g. "
    "this machine's name on the network; repeatable). Requests naming any other host are "
    "refused, so a site whose name was made to point here (DNS rebinding) reads nothing.",
)
def serve_command(archive: str, host: str, port: int, allowed: tuple[str, ...]) -> None:
    """A local, read-only web page of ARCHIVE (a path or URL).

    The branch graph, commits by date, each commit's changes, the node tree at any snapshot, a heatmap
    of each array's chunk changes by commit, and one chunk's history. Works offline; Ctrl-C stops it.

    Python: zsarchive.frontends.webserver.ArchiveServer."""
    from zsarchive.frontends.webserver import ArchiveServer

    with open_archive(archive) as arc:
        try:
            server = ArchiveServer(arc, host, port, allowed)
        except OSError as exc:
            raise ZSError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
        with server:
            click.echo(f"Serving {arc.name} at {server.url} (Ctrl-C stops)")
            try:
                server.serve_forever()
            except KeyboardInterrupt:
                pass
