"""``zs site``: the archive's web page as static files, for any static host (a bucket, any web server).

The folder holds the page ``zs serve`` serves (its HTML, style and script), the JavaScript reader it runs
in the browser (``reader/``, with its third-party decoder and that decoder's license), ``site.json`` naming
the archive the page opens, and, for a local archive, the archive itself (a fragment with the archives it
builds on, each at its place relative to the others). The page then asks no server anything but byte ranges.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from zsarchive.archive import RepoArchive
from zsarchive.errors import ZSError
from zsarchive.io.location import is_url, local_path
from zsarchive.frontends.page import page_files

CONFIG = "site.json"
"""The file that names the archive the page opens and the reader's modules: ``{"archive": relative path or URL,
"modules": [paths]}``."""


def _archives(archive: str) -> list[Path]:
    """The local files an archive is read from: itself, then the bases of a fragment."""
    with RepoArchive(archive) as arc:
        return [Path(local_path(member["location"])) for member in arc.chain()]


def write_site(archive: str | os.PathLike, outdir: str | os.PathLike, url: str | None = None) -> list[Path]:
    """Write the page of ``archive`` (a path or URL) into ``outdir``; return the files written.

    A local archive is copied beside the page (a fragment with its bases, kept at their places relative
    to each other), unless ``url`` says where the page finds it (published elsewhere: a URL, or a path relative to
    the page); a URL archive is read from there. ``outdir`` must be absent, empty, or a folder ``zs site`` wrote before."""
    source = os.fspath(archive)
    target = Path(outdir)
    if target.exists() and (not target.is_dir() or (any(target.iterdir()) and not (target / CONFIG).is_file())):
        raise ZSError(f"{target}: exists and is not an empty folder or one zs site wrote; choose another OUTDIR")
    copies: list[tuple[Path, Path]] = []
    if is_url(source):
        with RepoArchive(source):  # a one-line error now, not a broken page later
            pass
        named = url or source
    elif url is not None:  # published elsewhere, perhaps not yet: the name is the page's to follow
        _archives(source)
        named = url
    else:
        files = [path.resolve() for path in _archives(source)]
        try:  # the folder holding them all: each copied at its place below it, so that every link still holds
            home = Path(os.path.commonpath([path.parent for path in files]))
        except ValueError:
            raise ZSError(f"{source}: the archives of its chain lie on different drives: publish them yourself and give "
                          "the page the fragment's URL (--url)") from None
        copies = [(path, target / path.relative_to(home)) for path in files]
        named = copies[0][1].relative_to(target).as_posix()
    target.mkdir(parents=True, exist_ok=True)
    written = []
    for name, body in page_files():
        path = target / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(body)
        written.append(path)
    for origin, copy in copies:
        copy.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(origin, copy)
        written.append(copy)
    # the reader's modules, for the page to ask for all at once: importing them in turn costs a round trip per level
    modules = [name for name, _ in page_files() if name.startswith("reader/") and name.endswith(".js")]
    (target / CONFIG).write_text(json.dumps({"archive": named, "modules": modules}, ensure_ascii=False) + "\n",
                                 encoding="utf-8")
    written.append(target / CONFIG)
    return written
