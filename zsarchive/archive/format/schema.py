"""The archive's record layout: family tags, keys, versioned values (docs/archive-format.rst).

A record is ``family tag (1 byte) + key elements (zsarchive.archive.format.tuples) + 0x00 + value``; a value is
``record version (1 byte) + value elements``. Everything here is pure byte shuffling: the exporter
builds records with these functions and the query layer splits them with them.
"""

from __future__ import annotations

from typing import Any

from zsarchive.archive.format import tuples
from zsarchive.errors import RecordFault, ZSError

FORMAT_VERSION = 7
"""Newest version of the archive format as a whole (archive header record and ZS metadata); readers
read every version up to it (format 1 stores chunk refs per manifest, format 2 as a per-chunk timeline,
format 3 adds chunk bytes in pieces and shard indexes, and is written only by archives holding either;
format 4 is a fragment, read together with the archives it builds on: zsarchive.archive.format.fragments;
format 5 is format 3 whose per-chunk history is the chunk ref timeline, with ``H`` records only where
a transaction log and the timeline disagree; format 6 is format 5 that also keeps what a restore needs to
bring each metadata file back in its form: ``Y`` records, a V1 deleted tag's snapshot, the ops log's files;
format 7 is format 6 that may also keep the bytes of virtual chunk refs: ``E`` records)."""
FULL_FORMAT = 6
"""The format version of a standalone archive exported without virtual chunk bytes (a fragment's is
FRAGMENT_FORMAT)."""
VIRTUAL_FORMAT = 7
"""The format version of a standalone archive exported to keep virtual chunk bytes (``include_virtual``)."""
FRAGMENT_FORMAT = 4
"""The format version of a fragment."""

METADATA_KEY = "icechunk-archive"
"""Key of the object in the ZS header metadata that marks a file as a repo archive."""

# One byte per family; the values fix the order of families in the file.
REFS = b"B"
CHUNK_REF = b"C"
CHUNK_DATA = b"D"
VIRTUAL_DATA = b"E"
REPO = b"G"
CHUNK_HISTORY = b"H"
SHARD_INDEX = b"I"
CHILDREN = b"L"
NODE = b"N"
OPS = b"O"
SNAPSHOT = b"S"
SNAPSHOT_TIME = b"T"
TXLOG = b"X"
FILES = b"Y"
HEADER = b"Z"

FAMILY_NAMES = {
    REFS: "refs",
    CHUNK_REF: "chunk refs",
    CHUNK_DATA: "chunk data",
    VIRTUAL_DATA: "virtual chunk data",
    FILES: "file headers",
    REPO: "repo facts",
    CHUNK_HISTORY: "chunk history",
    SHARD_INDEX: "shard indexes",
    CHILDREN: "children",
    NODE: "nodes",
    OPS: "ops log",
    SNAPSHOT: "snapshots",
    SNAPSHOT_TIME: "snapshots by time",
    TXLOG: "transaction logs",
    HEADER: "archive header",
}

RECORD_VERSIONS = {family: 1 for family in FAMILY_NAMES} | {CHUNK_REF: 2, CHUNK_DATA: 2, TXLOG: 2, CHUNK_HISTORY: 2}
"""The newest record version of each family this code reads and writes (every older one is read too:
chunk refs are record version 1 in format 1 archives, keyed by manifest, and 2 in format 2, keyed
by (node, coords, snapshot); chunk data is version 1, a whole file keyed by chunk id, in formats 1
and 2, and version 2, pieces keyed by (chunk id, offset), in format 3; a transaction-log summary is
version 2 where it merges the logs of ancestors expiration pruned, which it then names; chunk history is
version 1, one record per logged chunk change, in formats 1 to 3, and version 2, an exception to the
timeline, in format 5; virtual chunk data, format 7, is version 1)."""

SNAPSHOT_ID_LENGTH = 20
"""Characters of a snapshot, manifest or chunk id as the archive spells it (Crockford base32 text)."""
NODE_ID_LENGTH = 13
"""Characters of a node id."""

OWNER_ELEMENTS = {CHUNK_DATA: 1, VIRTUAL_DATA: 5}
"""Key elements naming what a piece belongs to: a chunk file's id (``D``), or a virtual range and its
checksum (``E``); the element after them is where the piece starts."""

# Chunk ref kinds (first value element of a CHUNK_REF record); REMOVED only in record version 2.
INLINE, NATIVE, VIRTUAL, REMOVED = 0, 1, 2, 3
KIND_NAMES = ("inline", "native", "virtual")

# Node types (second value element of a NODE record).
GROUP, ARRAY = 0, 1


def record(family: bytes, key: tuple[Any, ...], value: tuple[Any, ...] = (), version: int | None = None) -> bytes:
    """One record: family tag, encoded key, END byte, version byte (default: the newest), encoded value."""
    head = VERSION_BYTE[family] if version is None else bytes((version,))
    return b"".join((family, tuples.encode(key), b"\x00", head, tuples.encode_value(value)))


def key_prefix(family: bytes, key: tuple[Any, ...] = ()) -> bytes:
    """The bytes every record of ``family`` whose key starts with ``key`` starts with."""
    return family + tuples.encode(key)


def record_version(rec: bytes) -> int:
    """The record version byte of a well-formed record (the byte after its key)."""
    return rec[tuples.decode(rec, 1, what="record key")[1]]


def split(rec: bytes) -> tuple[bytes, tuple[Any, ...], tuple[Any, ...]]:
    """Split a record into ``(family, key, value)``; ZSError if its version is newer than ours."""
    family = rec[:1]
    if family not in VERSION_BYTE:
        raise RecordFault(f"record {bytes(rec[:40])!r}: unknown record family {family!r}")
    key, pos = tuples.decode(rec, 1, what=f"{FAMILY_NAMES[family]} record key")
    if pos >= len(rec) or rec[pos - 1] != 0:
        raise RecordFault(f"{FAMILY_NAMES[family]} record {bytes(rec[:40])!r}: key not terminated")
    version = rec[pos]
    if not 1 <= version <= RECORD_VERSIONS[family]:
        if version > RECORD_VERSIONS[family]:
            raise ZSError(
                f"{FAMILY_NAMES[family]} record {bytes(rec[:40])!r} has record version {version}, newer "
                f"than this zsarchive reads ({RECORD_VERSIONS[family]}): upgrade zsarchive"
            )
        raise RecordFault(f"{FAMILY_NAMES[family]} record {bytes(rec[:40])!r}: invalid record version {version}")
    value, _ = tuples.decode(rec, pos + 1, what=f"{FAMILY_NAMES[family]} record value")
    return family, key, value


VERSION_BYTE = {family: bytes((version,)) for family, version in RECORD_VERSIONS.items()}
"""The newest record version byte of each family."""


def path_components(path: str) -> tuple[str, ...]:
    """``/a/b`` -> ``("a", "b")``; ``/`` -> ``()``. Tuples of components sort component-wise."""
    if path in ("", "/"):
        return ()
    return tuple(path.strip("/").split("/"))


def path_of(components: tuple[Any, ...]) -> str:
    """Inverse of :func:`path_components`."""
    return "/" + "/".join(components)


def fault(family: bytes, key: Any, problem: str) -> RecordFault:
    """The one-line error about the record of ``family`` whose key is ``key``."""
    shown = repr(key)
    return RecordFault(
        f"archive {FAMILY_NAMES[family]} record {shown[:300]}{'...' if len(shown) > 300 else ''}: {problem}"
    )
