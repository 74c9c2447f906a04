"""``zs site``: the archive's web page as static files, for any static host (a bucket, any web server).

The folder holds the page ``zs serve`` serves (its HTML, style and script), the JavaScript reader it runs
in the browser (``reader/``, with its third-party decoder and that decoder's license), ``site.json`` naming
the archive the page opens, and, for a local archive, the archive itself (a fragment with the archives it
builds on, each at its place relative to the others). The page then asks no server anything but byte ranges.
"""

from __future__ import annotations

import html
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
SCRIPT = b'<script type="module" src="app.js"></script>'
"""The page's script tag in index.html: the reader's modules are named for preloading after it (asked first)."""


def _preloading(page: bytes, modules: list[str]) -> bytes:
    """index.html naming every module of the reader (``modulepreload``), so the browser asks for them all while it
    reads the page: found import by import they would cost a round trip per import level, after the page's script."""
    if page.count(SCRIPT) != 1:
        raise ZSError("index.html of the page has no single module script tag to put the reader's modules after")
    links = b"".join(f'<link rel="modulepreload" href="{html.escape(name)}">\n'.encode() for name in modules)
    return page.replace(SCRIPT, SCRIPT + b"\n" + links.rstrip(b"\n"))


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
            raise ZSError(
                f"{source}: the archives of its chain lie on different drives: publish them yourself and give "
                "the page the fragment's URL (--url)"
            ) from None
        copies = [(path, target / path.relative_to(home)) for path in files]
        named = copies[0][1].relative_to(target).as_posix()
    target.mkdir(parents=True, exist_ok=True)
    written = []
    shipped = list(page_files())
    modules = [name for name, _ in shipped if name.startswith("reader/") and name.endswith(".js")]
    for name, body in shipped:
        path = target / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(_preloading(body, modules) if name == "index.html" else body)
        written.append(path)
    for origin, copy in copies:
        copy.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(origin, copy)
        written.append(copy)
    (target / CONFIG).write_text(
        json.dumps({"archive": named, "modules": modules}, ensure_ascii=False) + "\n", encoding="utf-8"
    )
    written.append(target / CONFIG)
    return written
