"""One named view per record family's key and value (docs/archive-format.rst, "Families"): code outside
``format/`` reads ``key.snapshot_id`` and ``snapshot.parent_id``, never ``key[0]`` or ``value[0]``, and
which record version holds which element is decided here. Each view has ``decode`` (from a record's
key or value elements) and ``encode`` (to them); ``well_formed`` says whether elements have the view's
shape. The archive header's view is :class:`~zsarchive.archive.format.header.ArchiveHeader`."""

from __future__ import annotations

from typing import Any, Callable, Self

from zsarchive.archive.format import schema
from zsarchive.errors import ZSCorrupt
from zsarchive.icechunk import ids
from zsarchive.icechunk.nodekinds import NodeType, RefKind
from zsarchive.typedtuple import TypedTuple

NODE_TYPE_CODES = {NodeType.GROUP: schema.GROUP, NodeType.ARRAY: schema.ARRAY}
"""The code of each node type in an ``N`` record's value (:attr:`NodeValue.node_type`) and a move's."""
NODE_TYPES = {code: node_type for node_type, code in NODE_TYPE_CODES.items()}
REF_KIND_CODES = {RefKind.INLINE: schema.INLINE, RefKind.NATIVE: schema.NATIVE, RefKind.VIRTUAL: schema.VIRTUAL}
"""The code of each kind of chunk ref in a ``C`` record's value (:attr:`ChunkRefValue.kind`)."""
REF_KINDS = {code: kind for kind, code in REF_KIND_CODES.items()}


_SPELLED = {schema.SNAPSHOT_ID_LENGTH: ids.CANONICAL[12].fullmatch, schema.NODE_ID_LENGTH: ids.CANONICAL[8].fullmatch}


def is_id(value: object, length: int = schema.SNAPSHOT_ID_LENGTH) -> bool:
    """Whether ``value`` is an id as the archive spells it: icechunk's canonical spelling (Crockford base32,
    upper case, padding bits zero: :mod:`zsarchive.icechunk.ids`), 20 characters for a snapshot, manifest
    or chunk id, 13 for a node id."""
    return type(value) is str and _SPELLED[length](value) is not None


def _count(value: object) -> bool:
    """Whether ``value`` is an integer >= 0 (not a bool)."""
    return type(value) is int and value >= 0


class ValueView(TypedTuple):
    """A record value's named view: ``decode`` takes a value's elements (later ones, extensions this reader
    does not know, are left out), ``encode`` gives the elements a record's value holds, ``well_formed``
    says whether elements have the view's shape (here: at least as many as its fields)."""

    @classmethod
    def decode(cls, value: tuple[Any, ...]) -> Any:
        """The view of ``value``'s first elements."""
        return cls(*value[: len(cls._fields)])

    def encode(self) -> tuple[Any, ...]:
        """The value's elements, as a record's value holds them."""
        return tuple(self)

    @classmethod
    def well_formed(cls, value: tuple[Any, ...]) -> bool:
        return len(value) >= len(cls._fields)


class RefValue(ValueView):
    """A ``B`` record: the snapshot a branch or tag names; for a deleted tag None, or (format 6, spec V1)
    the snapshot its ``ref.json`` still names."""

    snapshot_id: str | None

    @staticmethod
    def well_formed(value: tuple[Any, ...]) -> bool:
        return len(value) >= 1


def _header_name(name: Any) -> bool:
    """``name`` fits an Icechunk file header's implementation name."""
    from zsarchive.icechunk.header import NAME_BYTES  # validation's and restore's: a lookup never asks

    return isinstance(name, str) and len(name.encode("utf-8", "surrogatepass")) <= NAME_BYTES


class FileValue(ValueView):
    """A ``Y`` record (format 6): how one metadata file was written: the implementation name of its
    header and, for a V2 manifest, its location compression (0 plain, 1 zstd with the dictionary)."""

    implementation: str
    compression_algorithm: int | None
    location_dictionary: bytes | None

    @staticmethod
    def well_formed(value: tuple[Any, ...]) -> bool:
        return (
            len(value) >= 3
            and _header_name(value[0])
            and (value[1] is None or (isinstance(value[1], int) and not isinstance(value[1], bool)))
            and (value[2] is None or isinstance(value[2], bytes))
        )


class RepoFile(TypedTuple):
    """The ``repo_file`` fact (format 6, spec V2): the implementation name in the ``repo`` file's header,
    and how many ops-log entries (``O`` records) each repo info file holds, ``repo`` first."""

    implementation: str
    ops_log_files: tuple[int, ...]

    @staticmethod
    def well_formed(fact: Any, entries: int) -> bool:
        """``fact`` (the parsed JSON) has this shape, a name a file header holds and counts that add up to
        the ``entries`` of the ops log."""
        if not isinstance(fact, dict) or not isinstance(fact.get("implementation"), str):
            return False
        counts = fact.get("ops_log_files")
        return (
            _header_name(fact["implementation"])
            and isinstance(counts, list)
            and all(type(n) is int and n >= 0 for n in counts)
            and sum(counts) == entries
        )

    @classmethod
    def decode(cls, fact: dict[str, Any]) -> RepoFile:
        return cls(fact["implementation"], tuple(fact["ops_log_files"]))


class RepoFactValue(ValueView):
    """A ``G`` record: one repository-level fact (spec_version, metadata, config...) as JSON text."""

    json: str


class OpsValue(ValueView):
    """An ``O`` record: one ops-log entry's type, backup path and details (JSON text); later elements
    are extensions this reader ignores."""

    type: str
    backup_path: str | None
    details: str


class SnapshotValue(ValueView):
    """An ``S`` record: a snapshot's parent, flush time, message, metadata (JSON text) and manifest
    files (``(id, size_bytes, num_chunk_refs)`` each)."""

    parent_id: str | None
    flushed_at: int
    message: str
    metadata: str
    manifests: tuple[Any, ...]

    @staticmethod
    def well_formed(value: tuple[Any, ...]) -> bool:
        return (
            len(value) >= 5
            and (value[0] is None or is_id(value[0]))
            and isinstance(value[1], int)
            and isinstance(value[2], str)
            and isinstance(value[3], str)
            and isinstance(value[4], tuple)
            and all(
                isinstance(m, tuple) and len(m) >= 3 and is_id(m[0]) and _count(m[1]) and _count(m[2]) for m in value[4]
            )
        )

    @staticmethod
    def manifest_file(item: object) -> tuple[str, int] | None:
        """``(manifest id, number of chunk refs)`` of one of :attr:`manifests`, None when malformed."""
        if isinstance(item, tuple) and len(item) >= 3 and isinstance(item[2], int):
            return item[0], item[2]
        return None


class Dimension(TypedTuple):
    """One dimension of an array's shape as an ``N`` record keeps it (V1 files store the chunk length,
    V2 files the number of chunks; the other is None)."""

    array_length: int
    chunk_length: int | None
    num_chunks: int | None

    @property
    def chunks(self) -> int:
        """The number of chunks along the dimension, stored or derived from the chunk length."""
        if self.num_chunks is not None:
            return self.num_chunks
        return -(-self.array_length // self.chunk_length) if self.chunk_length else 0


class NodeValue(ValueView):
    """An ``N`` record: a group's or array's id, type, zarr.json bytes and, for an array, its shape
    (``(array_length, chunk_length, num_chunks)`` per dimension), dimension names, manifests
    (``(id, extents)`` each) and ``since``, the snapshot its chunk ref timeline starts at (format 2 on)."""

    node_id: str
    node_type: int
    user_data: bytes
    shape: tuple[Any, ...] | None
    dimension_names: tuple[Any, ...] | None
    manifests: tuple[Any, ...]
    since: str | None = None

    @property
    def is_array(self) -> bool:
        return self.node_type == schema.ARRAY

    @property
    def dimensions(self) -> tuple[Dimension, ...]:
        """An array's :attr:`shape`, one named :class:`Dimension` each."""
        return tuple(Dimension(*dim[:3]) for dim in self.shape or ())

    @staticmethod
    def well_formed(value: tuple[Any, ...]) -> bool:
        if not (
            len(value) >= 6
            and is_id(value[0], schema.NODE_ID_LENGTH)
            and value[1] in (schema.GROUP, schema.ARRAY)
            and isinstance(value[2], bytes)
        ):
            return False
        if value[1] == schema.GROUP:
            return True
        shape, names, manifests = value[3:6]
        return (
            isinstance(shape, tuple)
            and all(
                isinstance(d, tuple) and len(d) >= 3 and _count(d[0]) and all(n is None or _count(n) for n in d[1:3])
                for d in shape
            )
            and (names is None or isinstance(names, tuple) and all(n is None or isinstance(n, str) for n in names))
            and isinstance(manifests, tuple)
            and all(
                isinstance(m, tuple)
                and len(m) >= 2
                and is_id(m[0])
                and isinstance(m[1], tuple)
                and all(isinstance(e, tuple) and len(e) == 2 and _count(e[0]) and _count(e[1]) for e in m[1])
                for m in manifests
            )
            and (len(value) < 7 or is_id(value[6]))
        )

    @staticmethod
    def holds_since(value: tuple[Any, ...]) -> bool:
        """Whether an array's value names its ``since`` snapshot (format 2 on)."""
        return len(value) >= 7

    @classmethod
    def decode(cls, value: tuple[Any, ...]) -> NodeValue:
        return cls(*value[:6], value[6] if len(value) > 6 else None)

    def encode(self) -> tuple[Any, ...]:
        """A group's value has six elements, an array's seven (``since`` last)."""
        return tuple(self) if self.is_array else tuple(self)[:6]


class TxlogValue(ValueView):
    """An ``X`` record: what a snapshot changed since its parent. Record version 2 adds the ancestors
    whose logs it merges (expiration pruned them), those whose logs were no longer stored, and the
    moves of the merged logs, which then replace the snapshot's own."""

    new_groups: tuple[Any, ...]
    new_arrays: tuple[Any, ...]
    deleted_groups: tuple[Any, ...]
    deleted_arrays: tuple[Any, ...]
    updated_groups: tuple[Any, ...]
    updated_arrays: tuple[Any, ...]
    updated_chunks: tuple[Any, ...]
    """``(node id, number of chunks)`` per array whose chunks changed."""
    own_moves: tuple[Any, ...]
    merged: tuple[Any, ...] | None = None
    missing: tuple[Any, ...] | None = None
    merged_moves: tuple[Any, ...] | None = None

    @property
    def sets(self) -> tuple[Any, ...]:
        """The six node id sets, in the order of :data:`NODE_SETS`."""
        return tuple(self)[:6]

    @property
    def moves(self) -> tuple[Any, ...]:
        """``(from, to, node id, node type)`` of every move the snapshot's change holds."""
        return self.own_moves if self.merged_moves is None else self.merged_moves

    @property
    def lost_logs(self) -> tuple[Any, ...]:
        """Snapshots whose transaction logs the repository no longer held when it was archived."""
        return self.missing or ()

    @property
    def version(self) -> int:
        """The record version that holds this value."""
        return 1 if self.merged is None else 2

    @staticmethod
    def well_formed(value: tuple[Any, ...]) -> bool:
        return (
            len(value) in (8, 11)
            and all(isinstance(v, tuple) for v in value)
            and all(is_id(i, schema.NODE_ID_LENGTH) for ids in value[:6] for i in ids)
            and all(is_id(i) for ids in value[8:10] for i in ids)
        )

    def encode(self) -> tuple[Any, ...]:
        return tuple(self) if self.merged is not None else tuple(self)[:8]

    def record(self, snapshot_id: str) -> bytes:
        """The ``X`` record of ``snapshot_id``, in the record version its value needs."""
        return schema.record(schema.TXLOG, (snapshot_id,), self.encode(), version=self.version)


class HistoryValue(TypedTuple):
    """An ``H`` record. Record version 1 (formats 1 to 3): the chunk's ref changed in the commit
    (``in_log`` true). Record version 2 (format 5): an exception to the chunk ref timeline, true where
    the commit's log names a chunk without a ``C`` record of the commit, false where it has a ``C``
    record the log does not name."""

    in_log: bool

    @staticmethod
    def well_formed(value: tuple[Any, ...], version: int) -> bool:
        return version == 1 or (len(value) >= 1 and isinstance(value[0], bool))

    @classmethod
    def decode(cls, value: tuple[Any, ...], version: int) -> HistoryValue:
        return cls(True if version == 1 else value[0])

    def encode(self) -> tuple[Any, ...]:
        return tuple(self)


class ChunkRefValue(ValueView):
    """A ``C`` record: where one chunk's bytes are, by kind: inline bytes, a native chunk file's id
    and range, or a virtual location and range with its checksums; ``REMOVED`` (record version 2)
    holds nothing more. (An export encodes these a batch at a time: ``write/records.batch_records``.)"""

    kind: int
    inline: bytes | None = None
    chunk_id: str | None = None
    location: str | None = None
    offset: int = 0
    length: int = 0
    checksum_etag: str | None = None
    checksum_last_modified: int | None = None

    @staticmethod
    def kind_of(value: tuple[Any, ...]) -> int | None:
        """The kind of a chunk ref value, None when it has none this format knows."""
        known = len(value) >= 1 and value[0] in (schema.INLINE, schema.NATIVE, schema.VIRTUAL, schema.REMOVED)
        return value[0] if known else None

    @staticmethod
    def well_formed(value: tuple[Any, ...]) -> bool:
        """Whether a value of a known kind holds what its kind needs (see :data:`CHUNK_REF_SHAPES`)."""
        kind = value[0]
        if kind == schema.INLINE:
            return len(value) >= 2 and isinstance(value[1], bytes)
        if kind == schema.NATIVE:
            return len(value) >= 4 and is_id(value[1]) and all(isinstance(v, int) and v >= 0 for v in value[2:4])
        if kind == schema.VIRTUAL:
            return (
                len(value) >= 6 and isinstance(value[1], str) and all(isinstance(v, int) and v >= 0 for v in value[2:4])
            )
        return True

    @classmethod
    def decode(cls, value: tuple[Any, ...]) -> ChunkRefValue:
        kind = value[0]  # every field given by position: the quickest call of a typed tuple
        if kind == schema.INLINE:
            return cls(kind, value[1], None, None, 0, len(value[1]), None, None)
        if kind == schema.NATIVE:
            chunk_id, offset, length = value[1:4]
            return cls(kind, None, chunk_id, None, offset, length, None, None)
        if kind == schema.VIRTUAL:
            location, offset, length, etag, last_modified = value[1:6]
            return cls(kind, None, None, location, offset, length, etag, last_modified)
        return cls(kind)

    def encode(self) -> tuple[Any, ...]:
        if self.kind == schema.INLINE:
            return (self.kind, self.inline)
        if self.kind == schema.NATIVE:
            return (self.kind, self.chunk_id, self.offset, self.length)
        if self.kind == schema.VIRTUAL:
            return (self.kind, self.location, self.offset, self.length, self.checksum_etag, self.checksum_last_modified)
        return (self.kind,)


class ShardIndexValue(ValueView):
    """An ``I`` record: whether a shard's index is at its end, and the index's raw bytes."""

    at_end: bool
    raw: bytes

    def fits(self, length: int) -> bool:
        """Whether the raw index has the size of some index (16 bytes per inner chunk [+ 4 for its
        checksum]) within a shard of ``length`` bytes."""
        return len(self.raw) % 16 in (0, 4) and len(self.raw) <= length

    @classmethod
    def decode(cls, value: tuple[Any, ...]) -> ShardIndexValue:
        """ValueError when malformed (readers name the shard)."""
        if len(value) < 2 or not isinstance(value[0], bool) or not isinstance(value[1], bytes):
            raise ValueError("malformed shard index record")
        return cls(value[0], value[1])


class ChunkBytesValue(ValueView):
    """A ``D`` record: a whole chunk file's bytes (record version 1, formats 1 and 2) or one piece of
    it (version 2, keyed by offset; :mod:`pieces <zsarchive.archive.format.pieces>` writes and reads
    those a block at a time)."""

    data: bytes

    @staticmethod
    def well_formed(value: tuple[Any, ...]) -> bool:
        return len(value) >= 1 and isinstance(value[0], bytes)


CHUNK_REF_SHAPES = {
    schema.INLINE: "(0, data)",
    schema.NATIVE: "(1, chunk_id, offset, length)",
    schema.VIRTUAL: "(2, location, offset, length, etag, last_modified)",
}
"""Each chunk ref kind's value, as messages about a malformed one spell it."""

NODE_SETS = ("new_groups", "new_arrays", "deleted_groups", "deleted_arrays", "updated_groups", "updated_arrays")
"""The names of a transaction log's node id sets, as icechunk's ``diff`` spells them."""


class KeyView(TypedTuple):
    """A record key's named view: ``decode`` takes a key of the view's length (TypeError otherwise: readers
    turn it into ZSCorrupt naming the archive); ``well_formed`` (each view's own) checks the elements'
    types too."""

    @classmethod
    def decode(cls, key: tuple[Any, ...]) -> Self:
        """The view of ``key``. Made directly rather than through the constructor: one call less for each
        record a query reads."""
        view = tuple.__new__(cls, key)
        if len(view) != len(cls._fields):
            raise TypeError(f"a key of {len(cls._fields)} elements, not {len(view)}")
        return view

    def encode(self) -> tuple[Any, ...]:
        """The key's elements, as a record's key holds them."""
        return tuple(self)

    @classmethod
    def well_formed(cls, key: tuple[Any, ...]) -> bool:
        """Whether ``key`` has the view's shape (here: as many elements as its fields)."""
        return fits(cls, key)


def fits(view: type[KeyView], key: tuple[Any, ...]) -> bool:
    """Whether ``key`` has as many elements as a key of ``view`` (a key view class)."""
    return len(key) == len(view._fields)


def starts_with(key: tuple[Any, ...], prefix: tuple[Any, ...]) -> bool:
    """Whether the key's first elements are ``prefix`` (the bytes of text "a" start those of "a\\0b",
    so a search by a key prefix's bytes also finds keys that do not start with its elements)."""
    return key[: len(prefix)] == prefix


class RefKey(KeyView):
    """A ``B`` record's key: the kind of ref and its name."""

    kind: str
    name: str

    KINDS = ("branch", "tag", "deleted_tag")

    @property
    def deleted(self) -> bool:
        """Whether the ref is a deleted tag (its value names no snapshot)."""
        return self.kind == "deleted_tag"

    @classmethod
    def well_formed(cls, key: tuple[Any, ...]) -> bool:
        return len(key) == 2 and key[0] in cls.KINDS and isinstance(key[1], str)


class RepoFactKey(KeyView):
    """A ``G`` record's key: the fact's name (``spec_version``, ``metadata``, ...)."""

    name: str


class FileKey(KeyView):
    """A ``Y`` record's key (format 6): a metadata file's path (``snapshots/ID``, ``manifests/ID``,
    ``transactions/ID``)."""

    path: str

    @classmethod
    def well_formed(cls, key: tuple[Any, ...]) -> bool:
        return len(key) == 1 and isinstance(key[0], str)


class OpsKey(KeyView):
    """An ``O`` record's key: when the entry was made, and its number among entries (0 = oldest)."""

    updated_at: int
    seq: int


class SnapshotKey(KeyView):
    """An ``S`` record's key (and an ``X`` record's: :data:`TxlogKey`): the snapshot's id."""

    snapshot_id: str

    @staticmethod
    def well_formed(key: tuple[Any, ...]) -> bool:
        return len(key) == 1 and is_id(key[0])


TxlogKey = SnapshotKey
"""An ``X`` record's key: the id of the snapshot whose change it summarises."""


class SnapshotTimeKey(KeyView):
    """A ``T`` record's key: a snapshot's flush time and id."""

    flushed_at: int
    snapshot_id: str

    @staticmethod
    def well_formed(key: tuple[Any, ...]) -> bool:
        return len(key) == 2 and isinstance(key[0], int) and is_id(key[1])


class ChildKey(KeyView):
    """An ``L`` record's key: a parent snapshot and one of its children."""

    parent_id: str
    child_id: str

    @staticmethod
    def well_formed(key: tuple[Any, ...]) -> bool:
        return len(key) == 2


class NodeKey(KeyView):
    """An ``N`` record's key: the snapshot and the node's path as components (``("a", "b")`` for ``/a/b``)."""

    snapshot_id: str
    components: tuple[Any, ...]

    @property
    def path(self) -> str:
        """The node's path as text (``/a/b``)."""
        return schema.path_of(self.components)

    @staticmethod
    def well_formed(key: tuple[Any, ...]) -> bool:
        return len(key) == 2 and is_id(key[0]) and isinstance(key[1], tuple)


class ChunkRefKey(KeyView):
    """A ``C`` record's key in format 2 on: the snapshot ``snapshot_id`` changed the ref of chunk
    ``coords`` of array ``node_id`` (the per-chunk timeline)."""

    node_id: str
    coords: tuple[Any, ...]
    snapshot_id: str

    @staticmethod
    def well_formed(key: tuple[Any, ...]) -> bool:
        return len(key) == 3 and isinstance(key[2], str)

    @staticmethod
    def well_formed_of(key: tuple[Any, ...], ndim: int) -> bool:
        """Whether ``key`` is a timeline key of an array of ``ndim`` dimensions, coordinates below 2**63."""
        return (
            len(key) == 3
            and isinstance(key[1], tuple)
            and len(key[1]) == ndim
            and all(type(c) is int and 0 <= c < 1 << 63 for c in key[1])
            and is_id(key[2])
            and key[2].isascii()
        )


class ManifestRefKey(KeyView):
    """A ``C`` record's key in format 1: chunk ``coords`` of array ``node_id`` in manifest ``manifest_id``."""

    manifest_id: str
    node_id: str
    coords: tuple[Any, ...]

    @staticmethod
    def well_formed(key: tuple[Any, ...]) -> bool:
        return len(key) == 3 and isinstance(key[0], str)


class HistoryKey(KeyView):
    """An ``H`` record's key: the commit ``snapshot_id`` (flushed at ``flushed_at``) changed chunk
    ``coords`` of array ``node_id`` (record version 1), or is an exception to the timeline there (2)."""

    node_id: str
    coords: tuple[Any, ...]
    flushed_at: int
    snapshot_id: str

    @staticmethod
    def well_formed(key: tuple[Any, ...]) -> bool:
        return len(key) == 4

    @classmethod
    def of_chunk_ref(cls, key: tuple[Any, ...], flushed_at: Callable[[str], int]) -> HistoryKey:
        """The element of the history a ``C`` record's key gives in format 5: its node, coordinates and
        snapshot, and when that snapshot was flushed (``flushed_at`` of its id). This runs for every change
        of an array: the tuple is made directly, without the generated ``__new__``'s call."""
        node_id, coords, snapshot_id = key
        return tuple.__new__(cls, (node_id, coords, flushed_at(snapshot_id), snapshot_id))


class ChunkBytesKey(KeyView):
    """A ``D`` record's key: a chunk file's id and, for a piece (record version 2), where it starts
    (None in record version 1, whose key is the id alone)."""

    chunk_id: str
    start: int | None = None

    @staticmethod
    def well_formed(key: tuple[Any, ...], pieces: bool = True) -> bool:
        """``pieces``: whether the archive keeps files in pieces (format 3 on)."""
        if pieces:
            return len(key) == 2 and is_id(key[0]) and isinstance(key[1], int)
        return len(key) == 1 and is_id(key[0])

    @classmethod
    def decode(cls, key: tuple[Any, ...]) -> ChunkBytesKey:
        return cls(*key)

    def encode(self) -> tuple[Any, ...]:
        return tuple(self) if self.start is not None else (self.chunk_id,)


class ShardIndexKey(KeyView):
    """An ``I`` record's key: a native shard's chunk id, offset and length, or a virtual shard's
    location, offset, length and checksum (null where its ref has none)."""

    target: str
    """A chunk id, or a location (which holds ``://``, as a chunk id never does)."""
    offset: int
    length: int
    checksum_etag: str | None = None
    checksum_last_modified: int | None = None

    @property
    def virtual(self) -> bool:
        return "://" in self.target

    @staticmethod
    def well_formed(key: tuple[Any, ...]) -> bool:
        native = len(key) == 3 and is_id(key[0])
        virtual = (
            len(key) == 5
            and isinstance(key[0], str)
            and "://" in key[0]
            and (key[3] is None or isinstance(key[3], str))
            and (key[4] is None or isinstance(key[4], int))
            and (key[3], key[4]) != (None, None)
        )
        return (native or virtual) and all(isinstance(k, int) and k >= 0 for k in key[1:3])

    @classmethod
    def decode(cls, key: tuple[Any, ...]) -> ShardIndexKey:
        return cls(*key)

    def encode(self) -> tuple[Any, ...]:
        return tuple(self) if self.virtual else tuple(self)[:3]


def _pin(etag: object, last_modified: object) -> bool:
    """Whether ``etag`` and ``last_modified`` have the types of a virtual chunk ref's checksum (each
    may be null)."""
    return (etag is None or isinstance(etag, str)) and (
        last_modified is None or (isinstance(last_modified, int) and not isinstance(last_modified, bool))
    )


class VirtualRangeKey(KeyView):
    """An ``E`` alias record's key, and the range part of an ``E`` piece's (format 7): bytes
    ``[offset, offset + length)`` of the object at ``location`` that a virtual chunk ref names, with
    the ref's checksum (null where it has none), which pins the version of the object they come from."""

    location: str
    offset: int
    length: int
    checksum_etag: str | None
    checksum_last_modified: int | None

    @property
    def stop(self) -> int:
        """The offset just past the range."""
        return self.offset + self.length

    @property
    def span(self) -> tuple[str, int, int]:
        """``(location, offset, length)``: the range whatever its checksum."""
        return self.location, self.offset, self.length

    @property
    def pin(self) -> tuple[str | None, int | None]:
        """``(checksum_etag, checksum_last_modified)``: the checksum the range is kept under."""
        return self.checksum_etag, self.checksum_last_modified

    def under(self, pin: tuple[str | None, int | None]) -> VirtualRangeKey:
        """The same range under another checksum."""
        return VirtualRangeKey(*self.span, *pin)

    @staticmethod
    def well_formed(key: tuple[Any, ...]) -> bool:
        return (
            len(key) == 5
            and isinstance(key[0], str)
            and bool(key[0])
            and all(type(v) is int and v >= 0 for v in key[1:3])
            and _pin(key[3], key[4])
        )


class VirtualPieceKey(KeyView):
    """An ``E`` piece record's key (format 7): a virtual range's key and where in the object the
    piece's first byte is (the range's own offset for its first piece)."""

    location: str
    offset: int
    length: int
    checksum_etag: str | None
    checksum_last_modified: int | None
    start: int

    @property
    def range(self) -> VirtualRangeKey:
        """The key of the range the piece belongs to."""
        return VirtualRangeKey(self.location, self.offset, self.length, self.checksum_etag, self.checksum_last_modified)

    @staticmethod
    def well_formed(key: tuple[Any, ...]) -> bool:
        return (
            len(key) == 6
            and VirtualRangeKey.well_formed(key[:5])
            and type(key[5]) is int
            and key[1] <= key[5] <= key[1] + key[2]
        )


class VirtualAliasValue(ValueView):
    """An ``E`` alias record's value (format 7): the checksum of the same range whose pieces hold the
    bytes (one read of the object satisfied both checksums, or the bytes were found equal)."""

    checksum_etag: str | None
    checksum_last_modified: int | None

    @staticmethod
    def well_formed(value: tuple[Any, ...]) -> bool:
        return len(value) >= 2 and _pin(value[0], value[1])

    @classmethod
    def decode(cls, value: tuple[Any, ...], where: str = "archive") -> VirtualAliasValue:
        """The alias; ZSCorrupt naming ``where`` when the value is not a checksum."""
        if not cls.well_formed(value):
            raise ZSCorrupt(f"{where}: its alias {value!r:.100} is not a checksum (etag or null, time or null)")
        return cls(value[0], value[1])


class FamilyViews(TypedTuple):
    """The named views of one family's records, and their shape as messages about a malformed record spell it."""

    key: type[KeyView]
    value: type[ValueView] | None
    shape: str

    def well_formed(self, key: tuple[Any, ...], value: tuple[Any, ...]) -> bool:
        """Whether a record's key and value have the views' shapes."""
        return self.key.well_formed(key) and (self.value is None or self.value.well_formed(value))


FAMILY_VIEWS = {
    schema.REFS: FamilyViews(RefKey, RefValue, "(kind, name) -> (snapshot_id)"),
    schema.REPO: FamilyViews(RepoFactKey, RepoFactValue, "(name) -> (json)"),
    schema.FILES: FamilyViews(
        FileKey, FileValue, "(path) -> (implementation, compression_algorithm, location_dictionary)"
    ),
    schema.OPS: FamilyViews(OpsKey, OpsValue, "(updated_at, seq) -> (type, backup_path, details)"),
    schema.SNAPSHOT: FamilyViews(
        SnapshotKey, SnapshotValue, "(snapshot_id) -> (parent_id, flushed_at, message, metadata, manifest_files)"
    ),
    schema.SNAPSHOT_TIME: FamilyViews(SnapshotTimeKey, None, "(flushed_at, snapshot_id)"),
    schema.CHILDREN: FamilyViews(ChildKey, None, "(parent_snapshot_id, child_snapshot_id)"),
    schema.NODE: FamilyViews(
        NodeKey, NodeValue, "(snapshot_id, path) -> (node_id, node_type, zarr_json, shape, dimension_names, manifests)"
    ),
    schema.TXLOG: FamilyViews(
        TxlogKey,
        TxlogValue,
        "(snapshot_id) -> (six node id sets, updated_chunks, moved_nodes[, merged, missing, moves])",
    ),
    schema.CHUNK_REF: FamilyViews(ChunkRefKey, ChunkRefValue, "(node_id, coords, snapshot_id) -> (kind, ...)"),
    schema.SHARD_INDEX: FamilyViews(
        ShardIndexKey,
        ShardIndexValue,
        "(chunk_id, offset, length) or (location, offset, length, etag, last_modified) -> "
        "(at_end, index of 16 bytes per inner chunk [+ 4])",
    ),
}
"""Family tag -> the views of its records (the newest format's; format 1's chunk refs are keyed by
:class:`ManifestRefKey`). ``H`` and ``D`` records are read by the record version and the format
(:class:`HistoryValue`, :class:`ChunkBytesKey`), ``E`` records by their key's length (a piece,
:class:`VirtualPieceKey`, or an alias, :class:`VirtualRangeKey` and :class:`VirtualAliasValue`); the header's view is
:class:`~zsarchive.archive.format.header.ArchiveHeader`."""
