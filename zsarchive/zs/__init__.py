"""The ZS v0.10 engine: file format, writer, reader and validator, usable without the rest of zsarchive."""

from zsarchive.lazy import lazy_exports

__getattr__ = lazy_exports(
    __name__,
    {
        "ZS": "zsarchive.zs.reader",
        "ZSWriter": "zsarchive.zs.writer",
        "validate": "zsarchive.zs.validate",
        "ValidationReport": "zsarchive.zs.validate",
    },
)

__all__ = ["ZS", "ZSWriter", "validate", "ValidationReport"]
