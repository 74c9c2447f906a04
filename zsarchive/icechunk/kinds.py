"""What a local path holds at a glance (an Icechunk repository, a ZS file), so that a path given in
the wrong place is answered with what to do instead of "Is a directory" or "bad magic"."""

from __future__ import annotations

import os

from zsarchive.errors import ZSError
from zsarchive.io.local import open_regular
from zsarchive.zs.format.header import MAGIC, PARTIAL_MAGIC

REPOSITORY = "repository"
ZS_FILE = "zs"


def local_kind(path: str | os.PathLike) -> str | None:
    """``REPOSITORY`` for an Icechunk repository's directory (spec V2 ``repo`` file, or V1 ``refs/`` and
    ``snapshots/``) or its ``repo`` file, ``ZS_FILE`` for a file starting with a ZS magic, else None."""
    path = os.fspath(path)
    if os.path.isdir(path):
        if os.path.isfile(os.path.join(path, "repo")) or (
            os.path.isdir(os.path.join(path, "refs")) and os.path.isdir(os.path.join(path, "snapshots"))
        ):
            return REPOSITORY
        return None
    if os.path.basename(path) == "repo" and os.path.isdir(os.path.join(os.path.dirname(path) or ".", "snapshots")):
        return REPOSITORY
    try:
        with open_regular(path) as file:
            magic = file.read(len(MAGIC))
    except (OSError, ZSError):
        return None
    return ZS_FILE if magic in (MAGIC, PARTIAL_MAGIC) else None


def repository_not_archive(name: str) -> ZSError:
    """The error for an Icechunk repository given where an archive belongs."""
    repo = os.path.dirname(name) if os.path.basename(name.rstrip("/")) == "repo" and not os.path.isdir(name) else name
    return ZSError(
        f"{name}: is an Icechunk repository, not an archive; make an archive of it first: "
        f"zs export {repo or '.'} OUT.zs"
    )


def archive_not_repository(name: str) -> ZSError:
    """The error for a ZS file (an archive, most likely) given where an Icechunk repository belongs."""
    return ZSError(
        f"{name}: is a ZS file (an archive?), not an Icechunk repository; give the directory or URL "
        "of the repository (an archive is read by zs log, ls, chunk ... and open_store)"
    )
