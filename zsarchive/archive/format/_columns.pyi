"""The optional C column decoder (_columns.c) behind tuplecolumns.Columns."""

from typing import Any

import numpy as np

def decode(
    buf: bytes,
    starts: np.ndarray[Any, Any],
    ends: np.ndarray[Any, Any],
    layout: str,
    outputs: list[np.ndarray[Any, Any]],
    /,
) -> bool: ...
def intern(
    buf: bytes, begins: np.ndarray[Any, Any], ends: np.ndarray[Any, Any], codes: np.ndarray[Any, Any], /
) -> list[str]: ...
