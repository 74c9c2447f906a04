"""Run a batch decoding with the C column decoder or with the numpy one it stands in for."""

from __future__ import annotations

import contextlib
from typing import Iterator

from zsarchive.archive.format import tuplecolumns

BACKENDS = ["c", "numpy"]


@contextlib.contextmanager
def column_backend(name: str) -> Iterator[None]:
    """Within the block, tuplecolumns.Columns decodes with ``name`` ("c" or "numpy")."""
    assert tuplecolumns.c_columns is not None, (
        "zsarchive.archive.format._columns did not build: see the pip install log"
    )
    saved = tuplecolumns.c_columns
    tuplecolumns.c_columns = saved if name == "c" else None
    try:
        yield
    finally:
        tuplecolumns.c_columns = saved
