"""The invariants between an archive's records that its readers and a restore rely on (docs/archive-format.rst,
"Invariants"), in one place: ``zs validate`` checks them over the whole archive, ``zs restore`` and
``zs checkout`` over what they are about to write, before writing anything.

Every check streams, or works on what its caller holds already: records sorted by key put each repeat of a key
right after its first record, a snapshot's nodes are contiguous with each group's descendants right after it,
an array's chunk refs are one batch of rows, and the refs' reach into each embedded chunk file is one number
per file. A fault is one :class:`~zsarchive.errors.ZSCorrupt` line naming the records that disagree.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping, Sequence

from zsarchive.archive.format import schema, tuples
from zsarchive.archive.format.schema import fault
from zsarchive.archive.format.views import FAMILY_VIEWS, NodeValue, ShardIndexKey, ShardIndexValue, is_id
from zsarchive.errors import RecordFault, ZSCorrupt
from zsarchive.io.names import unportable
from zsarchive.limits import load_json
from zsarchive.walk import parent_chain

if TYPE_CHECKING:  # restore and validate hand these in: a lookup imports no numpy for them
    from zsarchive.archive.read.refrows import ChunkRefRows


def duplicate(family: bytes, key: Any) -> RecordFault:
    """Two records of one key: which of them holds is never a question a reader may answer."""
    return fault(family, key, "two records of this key (the archive is refused rather than one of them taken)")


def check_shape(family: bytes, key: tuple, value: tuple) -> None:
    """ZSCorrupt unless a record of ``family`` has the documented shape of its views
    (:data:`~zsarchive.archive.format.views.FAMILY_VIEWS`), every id in it in its canonical spelling."""
    views = FAMILY_VIEWS[family]
    if not views.well_formed(key, value):
        raise fault(family, key, f"is not {views.shape}")


class UniqueKeys:
    """Records in key order, each key once: every repeat of a key follows its first record."""

    def __init__(self) -> None:
        self._last: bytes | None = None

    def check(self, rec: bytes) -> None:
        """ZSCorrupt if ``rec``'s key is the previous record's."""
        head = bytes(rec[: tuples.key_end(rec)])
        if head == self._last:
            raise duplicate(head[:1], tuples.decode(head, 1, what="record key")[0])
        self._last = head


# -- snapshots -----------------------------------------------------------------------------------


def check_history(parents: Mapping[str, str | None]) -> None:
    """Parent links form no loop (each walk ends at a snapshot without a parent, or whose parent the archive
    lacks: expired); each snapshot is walked once, whatever the history's shape."""
    ends: set[str] = set()  # snapshots whose history is known to end
    for start in parents:
        walk = []
        for current in parent_chain(
            start,
            parents.__getitem__,
            lambda at: RecordFault(f"archive snapshots: the parent links of snapshot {start} loop at {at}"),
        ):
            if current in ends or current not in parents:
                break
            walk.append(current)
        ends.update(walk)


# -- nodes ---------------------------------------------------------------------------------------


def plain_name(component: object) -> bool:
    """Whether a node path component is one name (no ``/``, not empty, not ``.`` or ``..``), as icechunk's
    paths have them: ``("data/big",)`` beside ``("data", "big")`` would be two records of one node."""
    return isinstance(component, str) and component not in ("", ".", "..") and "/" not in component


def _num_chunks(length: Any, grid: Any) -> int | None:
    """The chunks along one dimension of ``length`` elements as icechunk counts them, None for a grid it does
    not describe: regular (``ceil(length / chunk)``, 0 for a chunk of 0), rectilinear (the sizes listed, a
    ``[size, count]`` pair standing for ``count`` of them)."""
    kind, config = grid
    if kind == "regular":
        return (-(-length // config) if config else 0) if isinstance(config, int) else None
    if not isinstance(config, list):
        return None
    count = 0
    for item in config:
        if isinstance(item, int):
            count += 1
        elif isinstance(item, list) and len(item) == 2 and isinstance(item[1], int):
            count += item[1]
        else:
            return None
    return count


def _grid(zarr_json: dict) -> list[tuple[str, Any]] | None:
    """Per dimension ``(grid name, its setting)`` of the zarr.json's chunk grid, None for an unknown grid."""
    grid = zarr_json.get("chunk_grid")
    if not isinstance(grid, dict) or not isinstance(config := grid.get("configuration"), dict):
        return None
    if grid.get("name") == "regular" and isinstance(config.get("chunk_shape"), list):
        return [("regular", c) for c in config["chunk_shape"]]
    if grid.get("name") == "rectilinear" and isinstance(config.get("chunk_shapes"), list):
        return [("rectilinear", c) for c in config["chunk_shapes"]]
    return None


def node_disagreement(node: NodeValue) -> str | None:
    """What a node record says otherwise than its zarr.json (node type; an array's shape, chunk grid and
    dimension names, as icechunk derives them: V1 files keep each dimension's chunk length, V2 files its
    number of chunks), None when they agree."""
    zarr_json = load_json(node.user_data, "its zarr.json")
    if not isinstance(zarr_json, dict):
        return "its zarr.json is not a JSON object"
    stated = zarr_json.get("node_type")
    if stated != ("array" if node.is_array else "group"):
        return f"a{'n array' if node.is_array else ' group'}, but its zarr.json says node_type {stated!r}"
    if not node.is_array:
        return None
    dims = node.dimensions
    shape = zarr_json.get("shape")
    if not isinstance(shape, list) or [d.array_length for d in dims] != shape:
        return f"shape {[d.array_length for d in dims]}, but its zarr.json says {str(shape)[:100]}"
    grid = _grid(zarr_json)
    if grid is not None:
        if len(grid) != len(dims):
            return f"{len(dims)} dimensions, but its zarr.json's chunk grid has {len(grid)}"
        for axis, (dim, (kind, config)) in enumerate(zip(dims, grid)):
            if dim.chunk_length is not None and (kind != "regular" or dim.chunk_length != config):
                return f"chunks of {dim.chunk_length} along dimension {axis}, but its zarr.json says {config!r}"
            if dim.num_chunks is not None and dim.num_chunks != _num_chunks(dim.array_length, (kind, config)):
                return (
                    f"{dim.num_chunks} chunks along dimension {axis}, but its zarr.json's {kind} chunk grid "
                    f"makes {_num_chunks(dim.array_length, (kind, config))}"
                )
    names = zarr_json.get("dimension_names")
    if (None if names is None else tuple(names) if isinstance(names, list) else names) != node.dimension_names:
        return f"dimension names {node.dimension_names!r}, but its zarr.json says {str(names)[:100]}"
    return None


class SnapshotNodes:
    """The node records of snapshots, fed in key order: each of its documented shape, each path of plain names,
    node ids unique within a snapshot, no node below an array (its descendants would follow it directly),
    and each node agreeing with its zarr.json. Verdicts on equal node values are kept (most nodes are the
    same in every snapshot)."""

    _KEPT = 4096

    def __init__(self) -> None:
        self._snapshot: str | None = None
        self._ids: set[str] = set()
        self._array: tuple | None = None
        self._agreeing: dict[tuple, None] = {}

    def check(self, snapshot_id: str, components: tuple, value: tuple) -> NodeValue:
        """The node of the record ``(snapshot_id, components) -> value``, or ZSCorrupt naming the record and
        the fault (its shape first: :func:`check_shape`)."""
        key = (snapshot_id, components)
        if snapshot_id != self._snapshot:
            check_shape(schema.NODE, key, value)  # the key's snapshot id once per snapshot
            self._snapshot, self._ids, self._array = snapshot_id, set(), None
        if type(components) is not tuple or not all(map(plain_name, components)):
            raise fault(schema.NODE, key, "its path is not a sequence of plain names (no '/', not empty, '.' or '..')")
        if value not in self._agreeing:  # its shape, and what it says beside its zarr.json
            check_shape(schema.NODE, key, value)
            node = NodeValue.decode(value)
            try:
                problem = node_disagreement(node)
            except (ZSCorrupt, TypeError, ValueError, AttributeError) as exc:
                problem = str(exc) if isinstance(exc, ZSCorrupt) else f"its shape is malformed ({exc})"
            if problem is not None:
                raise fault(schema.NODE, key, f"{schema.path_of(components)}: {problem}")
            if len(self._agreeing) >= self._KEPT:
                self._agreeing.clear()
            self._agreeing[value] = None
        node = NodeValue.decode(value)
        if node.node_id in self._ids:
            raise fault(schema.NODE, key, f"node id {node.node_id} is another node's of snapshot {snapshot_id}")
        self._ids.add(node.node_id)
        if self._array is not None and components[: len(self._array)] == self._array:
            raise fault(schema.NODE, key, f"lies below the array {schema.path_of(self._array)}")
        self._array = components if node.is_array else None
        return node


# -- the ops log's files --------------------------------------------------------------------------


def file_name_problem(name: str) -> str | None:
    """Why ``name`` cannot name a file a restore writes (None when it can): a portable name of at most
    255 bytes."""
    problem = unportable(name)
    if problem is None and len(name.encode("utf-8", "surrogatepass")) > 255:
        problem = "is longer than the 255 bytes a file name holds"
    return problem


def ops_log_file_names(counts: Sequence[int], newest_first: Sequence[tuple[tuple, str | None]]) -> list[str | None]:
    """The names of the ops log's older repo info files as ``G repo_file`` divides it (``counts``, adding up
    to the entries): the backup path of each file's first (newest) entry, given as ``(O record key,
    backup path)`` newest first; RecordFault for a backup path no file can be named."""
    names, at = [], 0
    for n in counts[:-1]:
        at += n
        key, name = newest_first[at]
        problem = None if name is None else file_name_problem(name)
        if name is not None and problem is not None:
            shown = f"{name[:80]!r}{'...' if len(name) > 80 else ''}"
            raise fault(
                schema.OPS, key, f"its backup path {shown} {problem}: it names a repo info file under overwritten/"
            )
        names.append(name)
    return names


# -- how metadata files were written (format 6) ---------------------------------------------------


def dictionary_fault(path: str, dictionary: bytes, exc: Exception) -> RecordFault:
    """The one-line error about the location dictionary of the manifest at ``path``, which zstd refuses."""
    return fault(
        schema.FILES, (path,), f"its location dictionary ({len(dictionary):,} bytes) compresses no location: {exc}"
    )


def check_location_dictionary(path: str, dictionary: bytes | None) -> None:
    """ZSCorrupt unless zstd compresses with the location dictionary of the manifest at ``path`` (a restore
    compresses the manifest's virtual locations with it; one made up, or tens of MiB, is refused)."""
    if dictionary is None:
        return
    import zstandard

    try:
        zstandard.ZstdCompressor(dict_data=zstandard.ZstdCompressionDict(dictionary)).compress(b"s3://bucket/key")
    except zstandard.ZstdError as exc:
        raise dictionary_fault(path, dictionary, exc) from None


# -- chunk refs and chunk files ------------------------------------------------------------------


class RefReach:
    """How far into each native chunk file the refs reach (the end of the furthest ref, and that ref's
    record for the message), to hold against the file's embedded copy."""

    def __init__(self) -> None:
        self.ends: dict[str, tuple[int, tuple]] = {}

    def note(self, chunk_id: str, end: int, key: tuple) -> None:
        """A ref (its record's key) reaching byte ``end`` of ``chunk_id``."""
        held = self.ends.get(chunk_id)
        if held is None or end > held[0]:
            self.ends[chunk_id] = (end, key)

    def check(self, chunk_id: str, size: int) -> None:
        """ZSCorrupt if a ref reaches past the ``size`` bytes the archive embeds of ``chunk_id``."""
        held = self.ends.get(chunk_id)
        if held is not None:
            check_reach(chunk_id, held[0], size, held[1])


def check_reach(chunk_id: str, end: int, size: int, key: tuple | None = None) -> None:
    """ZSCorrupt if a ref (its record's ``key``, when known) reaching byte ``end`` of ``chunk_id`` reaches past
    the ``size`` bytes the archive embeds of the file."""
    if end > size:
        problem = (
            f"reaches byte {end} of chunk file {chunk_id}, whose embedded copy (its chunk data records) "
            f"holds {size} bytes"
        )
        if key is None:
            raise RecordFault(f"archive chunk refs records of chunk file {chunk_id}: one {problem}")
        raise fault(schema.CHUNK_REF, key, problem)


def check_ref_rows(rows: ChunkRefRows, node_id: str, reach: RefReach | None = None) -> None:
    """An array's chunk ref rows (format 2, key order): each key once, snapshot and native chunk ids in their
    canonical spelling, kinds known; how far the refs reach into each chunk file noted in ``reach``."""
    import numpy as np

    if not len(rows):
        return

    def key(i: int) -> tuple:
        return node_id, tuple(rows.coords[i].tolist()), rows.snapshot_ids[int(rows.snapshot[i])]

    repeat = (rows.snapshot[1:] == rows.snapshot[:-1]) & (rows.coords[1:] == rows.coords[:-1]).all(axis=1)
    if repeat.any():
        raise duplicate(schema.CHUNK_REF, key(int(np.argmax(repeat)) + 1))
    bad = _misspelled(rows.snapshot_ids)
    if bad is not None:
        raise fault(schema.CHUNK_REF, key(int(np.argmax(rows.snapshot == bad))), f"snapshot id {_SPELLING}")
    unknown = ~np.isin(rows.kind, (schema.INLINE, schema.NATIVE, schema.VIRTUAL, schema.REMOVED))
    if unknown.any():
        raise fault(schema.CHUNK_REF, key(int(np.argmax(unknown))), "a chunk ref of a kind this format lacks")
    native = np.flatnonzero(rows.kind == schema.NATIVE)
    if not len(native):
        return
    codes = rows.text[native]
    used = np.unique(codes).tolist()
    bad = _misspelled([rows.texts[code] for code in used])
    if bad is not None:
        raise fault(
            schema.CHUNK_REF,
            key(int(native[np.argmax(codes == used[bad])])),
            f"chunk id {rows.texts[used[bad]]!r} {_SPELLING}: another spelling names another file",
        )
    if reach is None:
        return
    starts = rows.offset[native].astype(np.uint64)
    ends = starts + rows.length[native].astype(np.uint64)
    ends[ends < starts] = np.iinfo(np.uint64).max  # past 2**64: past every file
    furthest = np.zeros(len(rows.texts), np.uint64)
    np.maximum.at(furthest, codes, ends)
    hits = np.flatnonzero(ends == furthest[codes])[::-1]
    row = np.zeros(len(rows.texts), np.int64)
    row[codes[hits]] = native[hits]  # of equal reaches, the first ref's row is written last
    for code in used:
        reach.note(rows.texts[code], int(furthest[code]), key(int(row[code])))


_SPELLING = "is not in icechunk's spelling (upper-case Crockford base32, 20 characters, padding bits zero)"


def _misspelled(texts: list[str]) -> int | None:
    """The position of the first text that is not an id in its canonical spelling, None if all are."""
    for i, text in enumerate(texts):
        if not is_id(text):
            return i
    return None


def index_span(key: ShardIndexKey, index: ShardIndexValue) -> tuple[int, int]:
    """Where in its chunk file the shard index an ``I`` record keeps is stored: the last or first bytes of
    the shard's range."""
    start = key.offset + key.length - len(index.raw) if index.at_end else key.offset
    return start, start + len(index.raw)


def check_shard_index(
    key: ShardIndexKey, index: ShardIndexValue, stored: Callable[[str, int, int], bytes | memoryview | None]
) -> None:
    """A native shard's ``I`` record holds the index its embedded bytes hold (``stored(chunk_id, start,
    stop)``: those bytes, None when the archive does not embed the file)."""
    if key.virtual:
        return
    start, stop = index_span(key, index)
    there = stored(key.target, start, stop)
    if there is not None and bytes(there) != index.raw:
        raise fault(
            schema.SHARD_INDEX,
            tuple(key),
            f"holds another index than bytes [{start}, {stop}) of the "
            f"embedded chunk file {key.target} (its chunk data records)",
        )


def shard_indexes(
    records: Iterable[tuple[tuple, tuple]], stored: Callable[[str, int, int], bytes | memoryview | None]
) -> None:
    """Every native shard index record (key, value) checked against the embedded shard it describes."""
    for key, value in records:
        check_shard_index(ShardIndexKey.decode(key), ShardIndexValue.decode(value), stored)
