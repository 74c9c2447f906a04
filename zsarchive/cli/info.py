"""``zs info``: a ZS file's header as JSON, with the reference's keys and formats."""

from __future__ import annotations

import json

import click

from zsarchive.cli.app import main
from zsarchive.cli.dump import open_zs


@main.command("info")
@click.option(
    "-m", "--metadata-only", is_flag=True, help="Output only the file's metadata, not any general information about it."
)
@click.argument("zs_file")
def info_command(zs_file: str, metadata_only: bool) -> None:
    """Display general information from a .zs file's header, as JSON.

    ZS_FILE is a path, or a URL if it starts with "http". A repo archive also shows its header
    record; a fragment, the chain of archives it builds on (opened and checked).
    """
    with open_zs(zs_file, parallelism=0) as z:
        if metadata_only:
            info = z.metadata
        else:
            info = {
                "root_index_offset": z.root_index_offset,
                "root_index_length": z.root_index_length,
                "total_file_length": z.total_file_length,
                "codec": z.codec,
                "data_sha256": z.data_sha256.hex(),
                "metadata": z.metadata,
                "statistics": {"root_index_level": z.root_index_level},
            }
            # Imported here: the archive layer pulls in icechunk/flatbuffers/numpy, which plain ZS
            # commands should not pay for at start-up.
            from zsarchive.archive import header_summary

            archive = header_summary(z)  # repo archives also show their header record
            if archive is not None:
                info["archive"] = archive
                if isinstance(z.metadata.get("icechunk-archive", {}).get("fragment"), dict):
                    from zsarchive.archive import RepoArchive

                    with RepoArchive(z) as chain:  # opens, and checks, the bases it builds on
                        info["chain"] = chain.chain()
    click.echo(json.dumps(info, indent=4))
