"""zsarchive: a ZS v0.10 engine, and whole Icechunk histories archived as one ZS file."""

from zsarchive.errors import ZSCorrupt, ZSError
from zsarchive.reader import ZS

__all__ = ["ZSError", "ZSCorrupt", "ZS"]
