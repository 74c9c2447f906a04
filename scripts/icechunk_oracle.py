"""Print, as one JSON document, everything the real icechunk says about a repository.

Run under an icechunk Python (``.peers/ic1/bin/python`` or ``.peers/ic2/bin/python``)::

    icechunk_oracle.py REPO_PATH [--virtual-prefix PREFIX=DIR ...]

The answer is the oracle that tests compare zsarchive's own reader and archive against.
"""

from __future__ import annotations

# Filled in below (the first commit only ships the helper the fixture script needs).

import os
from pathlib import Path


def link_virtual_prefix(prefix: str, directory: Path) -> None:
    """Make the ``file://`` URL ``prefix`` resolve to ``directory`` through a symlink.

    icechunk resolves ``file://`` virtual refs by their absolute path, so fixtures refer to a
    fixed path under /tmp and every clone points that path at its own committed data.
    """
    if not prefix.startswith("file:///"):
        raise SystemExit(f"icechunk_oracle: virtual prefix {prefix!r} is not a file:/// URL")
    link = Path(prefix[len("file://"):].rstrip("/"))
    target = Path(directory).resolve()
    if link.is_symlink() and Path(os.readlink(link)) == target:
        return
    if link.exists() and not link.is_symlink():
        raise SystemExit(f"icechunk_oracle: {link} exists and is not a symlink; cannot map {prefix}")
    link.parent.mkdir(parents=True, exist_ok=True)
    # Replace atomically: a concurrent run from another clone sees either link, both valid.
    tmp = link.with_name(f".{link.name}.{os.getpid()}")
    os.symlink(target, tmp)
    os.replace(tmp, link)
