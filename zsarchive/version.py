"""zsarchive's version: one constant, which ``setup.cfg`` reads when the package is built, so that asking it
costs nothing (reading the installed package's metadata would import ``importlib.metadata``, ~15 ms)."""

from __future__ import annotations

VERSION = "0.1.0"
"""The version of this package."""
