"""The ``zs`` command: thin click wrappers over the library, one module per command."""

from zsarchive.cli.app import main

__all__ = ["main"]
