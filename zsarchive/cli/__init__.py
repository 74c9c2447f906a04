"""The ``zs`` command: thin click wrappers over the library, one module per command.

:data:`main` is the click group (imported on first use); :func:`run` is the ``zs`` program, which answers
a plain chunk ref lookup without importing click at all (:mod:`zsarchive.cli.quick`)."""

from __future__ import annotations

import os
import sys

from zsarchive.lazy import lazy_exports

_ARCHIVE = "zsarchive.cli.archive_queries"
COMMAND_MODULES = {
    "make": "zsarchive.cli.make",
    "dump": "zsarchive.cli.dump",
    "info": "zsarchive.cli.info",
    "validate": "zsarchive.cli.validate",
    "export": "zsarchive.cli.export",
    "consolidate": "zsarchive.cli.consolidate",
    "backup": "zsarchive.cli.backup",
    "status": "zsarchive.cli.backup",
    "icechunk": "zsarchive.cli.icechunk",
    "checkout": "zsarchive.cli.checkout",
    "restore": "zsarchive.cli.restore",
    "serve": "zsarchive.cli.serve",
    "site": "zsarchive.cli.site",
    "chunk": "zsarchive.cli.chunk",
    "sources": "zsarchive.cli.sources",
    **{name: _ARCHIVE for name in ("refs", "log", "show", "ls", "chunks", "diff", "ops", "chunk-log", "summary")},
}
"""The module that registers each command on the group, imported when the command is first asked for."""

SUMMARIES = {
    "backup": "Bring the backup set DEST up to date with the Icechunk repository REPO.",
    "checkout": "Write the snapshot REF (a branch, tag or snapshot id, with any ~N, ^ or @TIME) of ARCHIVE as plain Zarr v3 at "
    "TARGET.",
    "chunk": "The chunk ref at COORDS of the array PATH at REF.",
    "chunk-log": "The commits in REF's history that changed one chunk, newest first.",
    "chunks": "Every chunk ref of the array PATH at REF, in coordinate order (streamed).",
    "consolidate": "Write the chain whose newest archive is FRAGMENT as one standalone ARCHIVE.",
    "diff": "What changed from FROM to TO.",
    "dump": "Unpack some or all of the contents of a .zs file.",
    "export": "Export the Icechunk repository REPO into the ZS file ARCHIVE.",
    "icechunk": "Read Icechunk repositories (spec V1 and V2) without the icechunk library.",
    "info": "Display general information from a .zs file's header, as JSON.",
    "log": "Snapshots, newest first: REF's history, or every snapshot.",
    "ls": "Groups and arrays at REF (PATH and what is under it, if given).",
    "make": 'Create NEW_ZS_FILE from the sorted records in INPUT_FILE ("-" for stdin).',
    "ops": "The repository's ops log, newest first.",
    "refs": "Branches, tags and deleted tags of ARCHIVE.",
    "restore": "Write the Icechunk repository ARCHIVE holds into TARGET, which must be absent or empty.",
    "serve": "A local, read-only web page of ARCHIVE (a path or URL).",
    "show": "One commit and what it changed, as git show --stat.",
    "sources": "The source objects ARCHIVE's virtual chunk refs point into, and what depends on each.",
    "site": "Write the web page of ARCHIVE (a path or URL) into OUTDIR, for any static host.",
    "status": "What the Icechunk repository REPO has that ARCHIVE lacks, one line per branch and tag.",
    "summary": "What ARCHIVE holds, at a glance.",
    "validate": "Check a .zs file for errors or data corruption.",
}
"""``zs --help``'s line for each command (its docstring's first sentence), so listing them imports none."""

__getattr__ = lazy_exports(__name__, {"main": "zsarchive.cli.app"})


def run(argv: list[str] | None = None) -> None:
    """The ``zs`` program: the command line ``argv`` (by default the process's arguments)."""
    from zsarchive.cli.text import terminate_like_interrupt

    # numpy holds byte columns here, never does linear algebra: OpenBLAS threads would only spin beside the work
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    terminate_like_interrupt()  # a writer stopped by SIGTERM leaves nothing behind, as with Ctrl-C
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["chunk"]:
        from zsarchive.cli.quick import answer

        if answer(args[1:]):
            return
    from zsarchive.cli.app import main

    main(argv)


__all__ = ["main", "run"]
