"""Test helpers: hand-built ZS files (valid or broken on purpose) and reference-made ones.

``FileBuilder`` lays blocks out one after another like a naive writer, with
correct CRCs and SHA-256 unless told otherwise, so a test can break exactly one
invariant. It uses zsarchive.zs.format, the encoders the writer uses, never the writer itself.
"""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

from zsarchive.zs.format.block import (
    MAX_LENGTH_FIELD,
    IndexEntry,
    decode_length,
    encode_block,
    encode_index,
    encode_records,
)
from zsarchive.zs.format.codecs import get_codec
from zsarchive.zs.format.header import MAGIC, Header


class FileBuilder:
    """Append blocks in file order, then ``build()`` the bytes with a finished header."""

    def __init__(self, codec: str = "none", metadata: object = None, header_extra: bytes = b"") -> None:
        self.codec = get_codec(codec)
        self.metadata = {} if metadata is None else metadata
        self.header_extra = header_extra
        self.hasher = hashlib.sha256()
        self.blocks = bytearray()
        self.root: tuple[int, int] | None = None
        self.start = len(self._header(0, 0, 0, b"\0" * 32)) + len(MAGIC)

    def _header(self, root_offset: int, root_length: int, total: int, sha: bytes) -> bytes:
        # metadata may deliberately be a non-object: Header.encode does not check it
        return Header(root_offset, root_length, total, sha, self.codec.name, self.metadata, self.header_extra).encode()

    @property
    def offset(self) -> int:
        """File offset the next block will start at."""
        return self.start + len(self.blocks)

    def raw_block(self, level: int, payload: bytes, *, compress: bool = True) -> tuple[int, int]:
        """Append a block holding ``payload`` (compressed with the file's codec); return (offset, length)."""
        offset = self.offset
        framed = encode_block(level, self.codec.compress(payload) if compress else payload)
        self.blocks += framed
        return offset, len(framed)

    def framed(self, raw: bytes) -> tuple[int, int]:
        """Append arbitrary bytes (a hand-framed block, or garbage); return (offset, length)."""
        offset = self.offset
        self.blocks += raw
        return offset, len(raw)

    def data_block(self, records: list[bytes], *, hashed: bool = True) -> tuple[int, int]:
        """Append a data block of ``records`` (in the order given) and add it to the data hash."""
        payload = encode_records(records)
        if hashed:
            self.hasher.update(payload)
        return self.raw_block(0, payload)

    def index_block(self, level: int, entries: list[tuple[bytes, int, int]]) -> tuple[int, int]:
        """Append an index block of (key, offset, length) entries."""
        return self.raw_block(level, encode_index(IndexEntry(*e) for e in entries))

    def root_block(self, level: int, entries: list[tuple[bytes, int, int]]) -> tuple[int, int]:
        """Append an index block and make it the root."""
        self.root = self.index_block(level, entries)
        return self.root

    def build(
        self,
        *,
        root: tuple[int, int] | None = None,
        total: int | None = None,
        sha: bytes | None = None,
        magic: bytes = MAGIC,
    ) -> bytes:
        """Return the whole file; keyword arguments override the true header values."""
        root_offset, root_length = root or self.root
        size = self.start + len(self.blocks)
        head = self._header(
            root_offset, root_length, size if total is None else total, self.hasher.digest() if sha is None else sha
        )
        return magic + head + bytes(self.blocks)


def minimal(builder: FileBuilder | None = None) -> FileBuilder:
    """Two data blocks under a level-1 root: [a b] [c d]."""
    b = builder or FileBuilder()
    d1 = b.data_block([b"a", b"b"])
    d2 = b.data_block([b"c", b"d"])
    b.root_block(1, [(b"a", *d1), (b"c", *d2)])
    return b


def block_extents(data: bytes, start: int) -> list[tuple[int, int, int]]:
    """(offset, length, level) of each block from ``start`` (a valid file only)."""
    out = []
    pos = start
    while pos < len(data):
        n, field = decode_length(data[pos : pos + MAX_LENGTH_FIELD], f"offset {pos}")
        out.append((pos, field + n + 8, data[pos + field]))
        pos += field + n + 8
    return out


def reference_make(zs: Path, path: Path, records: list[bytes], *args: str, metadata: str = "{}") -> Path:
    """Write ``records`` (already sorted) to ``path`` with the reference ``zs make``, length-prefixed."""
    src = path.with_suffix(".in")
    src.write_bytes(b"".join(len(r).to_bytes(8, "little") + r for r in records))
    subprocess.run(
        [str(zs), "make", "--length-prefixed=u64le", *args, metadata, str(src), str(path)],
        check=True,
        capture_output=True,
    )
    return path


REFERENCE_VALIDATE = """
import sys, zs
for path in sys.argv[1:]:
    try:
        with zs.ZS(path) as z:
            z.validate()
    except zs.ZSError as exc:
        print("REJECT", path, str(exc).replace("\\n", " | "))
    except Exception as exc:
        print("CRASH", path, type(exc).__name__, exc)
    else:
        print("ACCEPT", path)
"""


def reference_verdicts(python: Path, paths: list[Path]) -> dict[str, str]:
    """Run the reference ``ZS.validate()`` over ``paths`` in one process: {path: ACCEPT|REJECT|CRASH}."""
    out = subprocess.run(
        [str(python), "-c", REFERENCE_VALIDATE, *map(str, paths)], check=True, capture_output=True, text=True
    ).stdout
    return {line.split(" ", 2)[1]: line.split(" ", 1)[0] for line in out.splitlines()}
