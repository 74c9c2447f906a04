"""The ``zs`` command: thin click wrappers over the library, one module per command."""

from zsarchive.cli.app import main

_ARCHIVE = "zsarchive.cli.archive_queries"
main.lazy = {
    "make": "zsarchive.cli.make",
    "dump": "zsarchive.cli.dump",
    "info": "zsarchive.cli.info",
    "validate": "zsarchive.cli.validate",
    "export": "zsarchive.cli.export",
    "consolidate": "zsarchive.cli.consolidate",
    "icechunk": "zsarchive.cli.icechunk",
    "checkout": "zsarchive.cli.checkout",
    "restore": "zsarchive.cli.restore",
    "serve": "zsarchive.cli.serve",
    **{name: _ARCHIVE for name in ("refs", "log", "show", "ls", "chunks", "chunk", "diff", "ops", "chunk-log",
                                          "summary")},
}

__all__ = ["main"]
