"""How an array spells its chunks' store keys: zarr's chunk key encodings (``default`` and ``v2``)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from zsarchive.errors import ZSError


class ChunkKeys:
    """How one array node spells its chunk keys (zarr's chunk key encoding): the array at ``path``,
    whose zarr.json is ``zarr_json`` and chunk grid ``grid`` (chunks per dimension), keyed under ``base``."""

    __slots__ = ("path", "base", "default", "sep", "ndim", "grid")

    def __init__(self, path: str, zarr_json: dict[str, Any], grid: Sequence[int], base: str) -> None:
        encoding = zarr_json.get("chunk_key_encoding") or {"name": "default"}
        name = encoding.get("name", "default")
        if name not in ("default", "v2"):
            raise ZSError(f"array {path!r}: unknown chunk key encoding {name!r}")
        self.path = path
        self.base = base  # "" for the root array, else "path/"
        self.default = name == "default"
        self.sep = (encoding.get("configuration") or {}).get("separator", "/" if self.default else ".")
        self.ndim = len(grid)
        self.grid = grid

    def key(self, coords: Iterable[int]) -> str:
        """The store key of the chunk at ``coords``."""
        text = self.sep.join(str(c) for c in coords)
        if self.default:
            return f"{self.base}c{self.sep}{text}" if text else f"{self.base}c"
        return f"{self.base}{text or '0'}"

    def coords(self, rest: str) -> tuple[int, ...] | None:
        """Chunk coordinates spelled by the part of a key after ``base``; None if it spells none."""
        if self.default:
            if rest == "c":
                return () if self.ndim == 0 else None
            if not rest.startswith("c" + self.sep):
                return None
            rest = rest[2:]
        elif self.ndim == 0:
            return () if rest == "0" else None
        parts = rest.split(self.sep)
        if len(parts) != self.ndim:
            return None
        coords = []
        for part, n in zip(parts, self.grid):
            # only the canonical spelling is a key: "01" or "+1" name nothing, as in icechunk
            if not part.isdigit() or (len(part) > 1 and part[0] == "0") or int(part) >= n:
                return None
            coords.append(int(part))
        return tuple(coords)
