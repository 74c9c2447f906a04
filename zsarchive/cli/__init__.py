"""The ``zs`` command: thin click wrappers over the library, one module per command."""

from zsarchive.cli.app import main
from zsarchive.cli import dump, info  # noqa: F401
from zsarchive.cli import make  # noqa: F401
from zsarchive.cli import validate  # noqa: F401
from zsarchive.cli import archive_queries, export  # noqa: F401
from zsarchive.cli import icechunk  # noqa: F401

__all__ = ["main"]
