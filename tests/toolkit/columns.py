"""Run a batch decoding with the C column decoder or with the numpy one it stands in for."""

from __future__ import annotations

import contextlib
from typing import Iterator

from zsarchive.archive.format import tuples

BACKENDS = ["c", "numpy"]


@contextlib.contextmanager
def column_backend(name: str) -> Iterator[None]:
    """Within the block, tuples.Columns decodes with ``name`` ("c" or "numpy")."""
    assert tuples.c_columns is not None, "zsarchive.archive.format._columns did not build: see the pip install log"
    saved = tuples.c_columns
    tuples.c_columns = saved if name == "c" else None
    try:
        yield
    finally:
        tuples.c_columns = saved
