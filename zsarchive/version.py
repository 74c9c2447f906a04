"""The installed zsarchive's version, read from the package's metadata when asked: importing
importlib.metadata takes ~15 ms, which a command that never needs the version does not pay."""

from __future__ import annotations


def installed_version() -> str | None:
    """The version of the installed package, or None when running from a source tree never installed."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("zsarchive")
    except PackageNotFoundError:
        return None
