"""``zs site``: the archive's web page as static files, for any static host."""

from __future__ import annotations

import click

from zsarchive.cli.app import main


@main.command("site")
@click.argument("archive")
@click.argument("outdir", type=click.Path(file_okay=False))
@click.option(
    "--url",
    metavar="URL",
    help="Where the page finds the archive, when it is published elsewhere (a URL, "
    "or a path relative to the page; nothing is copied); by default a local ARCHIVE is copied beside the page.",
)
def site_command(archive: str, outdir: str, url: str | None) -> None:
    """Write the web page of ARCHIVE (a path or URL) into OUTDIR, for any static host.

    The page shows what zs serve shows (branch graph, commits, changes, node tree, chunk-change heatmap,
    chunk history), read in the browser by range requests: publish OUTDIR on a bucket or any web server
    (README: "The archive in a browser"). Python: zsarchive.frontends.site.write_site."""
    from zsarchive.frontends.site import write_site

    write_site(archive, outdir, url)
    click.echo(
        f"wrote the page of {archive} to {outdir}: publish the folder on any web server or bucket "
        "(browsers run its scripts over HTTP, not from the disk)"
    )
