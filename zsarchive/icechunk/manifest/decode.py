"""Decode manifest files (``manifests/<id>``). Chunk refs are read straight from the little-endian
FlatBuffer with numpy gathers, a batch of refs per step (the generated accessors cost ~20 calls per
ref), every offset bounds-checked. Refs read as numbers to be compared (:meth:`ManifestBuffer.identified_columns`)
go through the optional C extension ``_refscan`` where it is built, which reads a batch in one pass
and leaves anything unusual to the numpy code.
"""

from __future__ import annotations

import functools
import itertools
import operator
import threading
from typing import Any, Callable, Iterator, NamedTuple

import numpy as np
import zstandard

from zsarchive.icechunk import ids
from zsarchive.icechunk.common import decoding, id8, id12
from zsarchive.icechunk.flatbuf import FlatBufferError, byte_vector, check_sorted, root, vtable_slots
from zsarchive.icechunk.gather import BYTE, distinct, first, first_unsorted, gather, offset_vector, uint32_vectors
from zsarchive.icechunk.generated.Manifest import Manifest as FbManifest
from zsarchive.icechunk.header import open_file
from zsarchive.icechunk.manifest.refs import KINDS as _KINDS, RefBatch
from zsarchive.icechunk.model import ArrayManifestInfo, ChunkRef, FileType, Manifest, NodeId, RefKind
from zsarchive.limits import LOCATION_LIMIT, unzstd

try:
    from zsarchive.icechunk.manifest import _refscan
except ImportError:  # built where a C compiler was at hand; the numpy code reads the same refs
    _refscan = None

_N_SLOTS = 10  # fields of the ChunkRef table
_WIDTHS = (4, 4, 8, 8, 12, 4, 4, 4, 4, 4)  # bytes of each ChunkRef field inside the table
_BATCH = 65536  # refs decoded per step: bounds the temporary arrays
_LOCATION_CACHE = 65536  # distinct locations remembered across steps (they repeat: many chunks per file)
# Random odd multipliers hashing strings of <= 256 bytes (numpy's default_rng(2026), written out: importing
# numpy.random costs every export a few milliseconds)
_MIX = np.array(
    [
        0x16E756026D097CD5,
        0x51E8ACB38361A65F,
        0x3BCF7372AEC7F8F5,
        0x2F6C8FAF8A37CE3B,
        0x2D6DEE63D25C9B0D,
        0x652FB3AE6A603595,
        0x73DBC0D45A2AADAF,
        0x16B382675C50900D,
        0x538E73D16DE1D9A7,
        0x262EC8FB0C9A8E87,
        0x7BC56AD91534CA19,
        0x75BDA66A5D2DCB39,
        0x516436EA2428EE8D,
        0x6059867DCD559481,
        0x41F08E6B0F1B2831,
        0x69B6EF925280649B,
        0x396488A153FAA48B,
        0x2B5E34DB3AE5AF0F,
        0x2392339514206D87,
        0x1CF87B4A92B44BCD,
        0x434DF760ED493BED,
        0x3728205C0BB9913B,
        0x54E31A4222A9198D,
        0x01A4C1C5EA473FBB,
        0x394E4BC0BB9FEF21,
        0x2EBE3E96FECF4B5F,
        0x1902C9DE9525E3AD,
        0x4C24909ABD206B51,
        0x37B8576C29CCECF5,
        0x26661F20D4E65C03,
        0x1ACE25BFFB7C6BCF,
        0x6FF3AE5CF7B6192D,
        0x66133EC27A7E88B3,
    ],
    np.uint64,
)
# Columns of _Layout.row: where each value sits in a table (0 = absent), or what the layout is.
_SIZE, _INDEX, _OFFSET, _LENGTH, _PAYLOAD, _ETAG, _MODIFIED, _CODE, _COMPRESSED = range(9)


class _Layout:
    """One validated ChunkRef vtable: where each field sits in the tables that use it."""

    __slots__ = ("kind", "row")

    def __init__(self, buf, vtable: int, where: str):
        table_size, slots = vtable_slots(buf, vtable, _N_SLOTS, where)
        end = 0
        for off, s in sorted((off, s) for s, off in enumerate(slots) if off):
            if off < 4 or off < end or off + _WIDTHS[s] > table_size:
                raise FlatBufferError(
                    f"{where}: field {s} at {off} overlaps another or lies outside its {table_size}-byte table"
                )
            end = off + _WIDTHS[s]
        index, inline, offset, length, chunk_id, location, etag, modified, compressed, _extra = slots
        if not index:
            raise FlatBufferError(f"{where}: required field index is missing")
        kinds = [bool(inline), bool(chunk_id), bool(location or compressed)]
        if sum(kinds) != 1:
            raise FlatBufferError(
                f"{where}: exactly one of inline, chunk_id, location/compressed_location must be present"
            )
        code = kinds.index(True)
        self.kind = _KINDS[code]
        payload = (inline, chunk_id, location or compressed)[code]
        if code == 0:  # inline refs have no offset or length, whatever the table holds
            offset = length = 0
        if code != 2:
            etag = modified = 0
        self.row = (
            table_size,
            index,
            offset,
            length,
            payload,
            etag,
            modified,
            code,
            int(not location and bool(compressed)),
        )


class RefColumns(NamedTuple):
    """Consecutive refs of one array as the numbers a decoder starts from, no Python object per ref:
    what :meth:`ManifestBuffer.ref_identities` reads and :meth:`ManifestBuffer.refs_of` decodes."""

    coords: np.ndarray
    """(refs, ndim) uint32 chunk coordinates, strictly ascending."""
    numbers: np.ndarray
    """int64 position of each ref in the array's refs vector."""
    pos: np.ndarray
    """int64 position of each ref's table in the manifest."""
    table: np.ndarray
    """(9, layouts) int64: the _Layout.row of each layout the refs have, a column."""
    layouts: np.ndarray | None
    """Each ref's column of ``table``; None when it has one column."""

    @property
    def fields(self) -> np.ndarray:
        """(9, refs) int64: each ref's _Layout.row, a column."""
        if self.layouts is None:
            return np.broadcast_to(self.table, (9, len(self.pos)))
        return np.take(self.table, self.layouts, axis=1)

    def field(self, column: int) -> np.ndarray:
        """Row ``column`` of :attr:`fields` alone."""
        if self.layouts is None:
            return np.broadcast_to(self.table[column], (len(self.pos),))
        return np.take(self.table[column], self.layouts)

    def take(self, rows: np.ndarray) -> RefColumns:
        """The refs ``rows`` (indices, in that order)."""
        return RefColumns(
            self.coords[rows],
            self.numbers[rows],
            self.pos[rows],
            self.table,
            None if self.layouts is None else self.layouts[rows],
        )


class RefIdentities(NamedTuple):
    """Refs as numbers (:meth:`ManifestBuffer.ref_identities`), each field a value per ref or one int for
    every ref; the texts and byte strings they name as indices into ``objects``, until :meth:`numbered`."""

    numbers: tuple
    """Kind code, offset, length, a chunk id's bytes as two words, last-modified (0 where absent)."""
    named: tuple
    """Etag, then location or inline bytes: ``1 +`` its index in ``objects`` (0: none)."""
    objects: list
    """The texts and byte strings the refs name (etags, each distinct location, inline bytes)."""

    def take(self, refs: np.ndarray) -> RefIdentities:
        """The refs ``refs`` (indices, in that order)."""
        return RefIdentities(
            *(tuple(v if isinstance(v, int) else v[refs] for v in fields) for fields in (self.numbers, self.named)),
            self.objects,
        )

    def numbered(self, texts: dict) -> tuple:
        """The fields, ``named``'s with each object numbered by ``texts`` (object -> number, filled as it goes):
        refs of any manifests numbered with one ``texts`` are equal exactly when every field is."""
        index = np.zeros(1 + len(self.objects), np.intp)
        index[1:] = [1 + texts.setdefault(o, len(texts)) for o in self.objects]
        return (*self.numbers, *(v if isinstance(v, int) else np.take(index, v) for v in self.named))

    def same(self, other: RefIdentities, texts: dict) -> np.ndarray:
        """Whether ref i here equals ref i of ``other``, for each i (``texts`` as for :meth:`numbered`)."""
        out = np.ones(len(self.numbers[1]), bool)  # the offsets: a value per ref
        for mine, theirs in zip(self.numbered(texts), other.numbered(texts)):
            if isinstance(mine, int) and isinstance(theirs, int):  # one value each side: no pass over the refs
                if mine != theirs:
                    out[:] = False
            else:
                out &= mine == theirs
        return out


class _Texts(dict):
    """Location bytes -> text, decoding (and decompressing, for compressed locations) each once."""

    def __init__(self, decode: Callable[[bytes], str]):
        super().__init__()
        self.decode = decode

    def __missing__(self, raw: bytes) -> str:
        text = self[raw] = self.decode(raw)
        return text


class _BadText(Exception):
    def __init__(self, raw: bytes, reason: str):
        super().__init__(reason)
        self.raw = raw


class ManifestBuffer:
    """The decompressed payload of one manifest, decoding refs per array on demand.

    Refs are decoded a batch at a time with numpy gathers over the little-endian FlatBuffer; every
    offset is bounds-checked before it is followed, so a corrupt file raises ZSCorrupt naming the ref.
    """

    def __init__(
        self,
        payload: bytes,
        name: str,
        arrays: dict[NodeId, tuple[int, int]],
        dictionary: bytes | None,
        compression_algorithm: int,
    ):
        self.payload = payload
        self.name = name
        self.arrays = arrays
        self.layouts: dict[int, _Layout] = {}
        self.dictionary = dictionary
        self.compression_algorithm = compression_algorithm
        self._bytes = np.frombuffer(payload, np.uint8)
        self._dctx: zstandard.ZstdDecompressor | None = None
        self._dctx_lock = threading.Lock()  # a decompressor decodes one frame at a time
        self._plain = _Texts(self._plain_location)
        self._packed = _Texts(self._decompress_location)
        self._counts: dict[NodeId, tuple[int, int, int, int]] = {}
        self._known: tuple[np.ndarray, ...] | None = None  # self.layouts as arrays, for the C extension

    def _locate(self, node_id: NodeId, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        """(table positions, the _Layout.rows of their layouts as columns, each ref's column or None when
        there is one) of refs ``lo`` to ``hi`` of one array, checked."""
        buf, size = self.payload, len(self.payload)
        start, _count = self.arrays[node_id]
        pos = offset_vector(buf, start, lo, hi)
        if (j := first(pos + 4 > size)) is not None:
            raise FlatBufferError(f"array {node_id} ref {lo + j}: an offset points outside the {size}-byte buffer")
        vtables = pos - gather(self._bytes, pos, "<i4")
        unique, inverse = _few_distinct(vtables)
        rows = []
        for vtable in unique.tolist():
            layout = self.layouts.get(vtable)
            if layout is None:
                where = f"array {node_id} ref {lo + int((vtables == vtable).argmax())}"
                layout = self.layouts[vtable] = _Layout(buf, vtable, where)
            rows.append(layout.row)
        table = np.ascontiguousarray(np.array(rows, dtype=np.int64).reshape(-1, 9).T)  # a row per field
        sizes = table[_SIZE, 0] if inverse is None else np.take(table[_SIZE], inverse)
        if (j := first(pos + sizes > size)) is not None:
            raise FlatBufferError(f"array {node_id} ref {lo + j}: table at {int(pos[j])} runs past the buffer end")
        return pos, table, inverse

    def _count(self, node_id: NodeId) -> tuple[int, int, int, int]:
        """(inline, native, virtual, compressed-location) counts of one array, from the ref vtables alone."""
        counts = self._counts.get(node_id)
        if counts is None:
            tally = np.zeros(4, dtype=np.int64)
            total = self.arrays[node_id][1] if node_id in self.arrays else 0
            with decoding(self.name):
                for lo in range(0, total, _BATCH):
                    _pos, table, inverse = self._locate(node_id, lo, min(lo + _BATCH, total))
                    fields = (
                        np.broadcast_to(table, (9, len(_pos))) if inverse is None else np.take(table, inverse, axis=1)
                    )
                    tally[:3] += np.bincount(fields[_CODE], minlength=3)
                    tally[3] += int(fields[_COMPRESSED].sum())
            counts = self._counts[node_id] = tuple(tally.tolist())
        return counts

    def kind_counts(self, node_id: NodeId) -> tuple[int, int, int]:
        """(inline, native, virtual) counts of one array."""
        return self._count(node_id)[:3]

    def compressed_locations(self, node_id: NodeId) -> int:
        """How many virtual refs of one array store a compressed location."""
        return self._count(node_id)[3]

    def _plain_location(self, raw: bytes) -> str:
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            raise _BadText(raw, "location is not UTF-8") from None

    def _decompress_location(self, raw: bytes) -> str:
        if self.compression_algorithm == 0:
            return self._plain_location(raw)
        if self.dictionary is None:
            raise _BadText(raw, "compressed_location present but the manifest has no location_dictionary")
        try:
            with self._dctx_lock:
                if self._dctx is None:
                    self._dctx = zstandard.ZstdDecompressor(dict_data=zstandard.ZstdCompressionDict(self.dictionary))
                data = unzstd(raw, LOCATION_LIMIT, "", self._dctx)
        except (zstandard.ZstdError, ValueError) as exc:  # TooLarge and Malformed are ValueErrors
            raise _BadText(raw, f"compressed_location does not decompress: {exc}") from None
        return self._plain_location(data)

    def chunk_refs(self, node_id: NodeId, first: int = 0, stop: int | None = None) -> Iterator[ChunkRef]:
        """Refs ``first`` to ``stop`` (default: all) of one array in ascending coordinate order; ZSCorrupt
        on any inconsistency. Ranges let several processes share one large array."""
        return itertools.chain.from_iterable(batch.refs() for batch in self.ref_batches(node_id, first, stop))

    def ref_batches(self, node_id: NodeId, first: int = 0, stop: int | None = None) -> Iterator[RefBatch]:
        """Like :meth:`chunk_refs`, as columns a batch at a time (the exporter's fast path)."""
        for columns in self.ref_columns(node_id, first, stop):
            yield self.refs_of(node_id, columns)

    def ref_columns(self, node_id: NodeId, first: int = 0, stop: int | None = None) -> Iterator[RefColumns]:
        """Like :meth:`ref_batches`, the refs located and their order checked, nothing decoded further."""
        return self._in_batches(node_id, first, stop, functools.partial(self._columns, node_id), lambda got: got)

    def identified_columns(
        self, node_id: NodeId, first: int = 0, stop: int | None = None
    ) -> Iterator[tuple[RefColumns, RefIdentities]]:
        """Like :meth:`ref_columns`, each batch with its :meth:`ref_identities`: read in one pass by the C
        extension where it is built and the batch holds only native refs and virtual refs without an etag,
        of layouts seen before; else by the numpy code. The same answer either way."""
        scratch = np.empty(0, np.uint8)  # the C reader's hash table, grown to the first batch's size

        def read(lo: int, hi: int, previous: np.ndarray | None) -> tuple[RefColumns, RefIdentities]:
            nonlocal scratch
            if _refscan is not None and len(scratch) < 80 * (hi - lo):
                scratch = np.empty(80 * (hi - lo), np.uint8)
            got = None if _refscan is None else self._read_refs(node_id, lo, hi, previous, scratch)
            if got is None:
                columns = self._columns(node_id, lo, hi, previous)
                got = columns, self.ref_identities(node_id, columns)
            return got

        return self._in_batches(node_id, first, stop, read, operator.itemgetter(0))

    def _in_batches(
        self,
        node_id: NodeId,
        first: int,
        stop: int | None,
        read: Callable[[int, int, np.ndarray | None], Any],
        columns_of: Callable[[Any], RefColumns],
    ) -> Iterator:
        """``read(lo, hi, previous)`` of each batch of refs ``first`` to ``stop`` (default: all) of one array,
        in order; ``previous``: the coordinates of the ref before the batch, which it must come after
        (``columns_of(read(...))``: the batch's columns)."""
        if node_id not in self.arrays:
            return
        total = self.arrays[node_id][1]
        stop = total if stop is None else max(min(stop, total), 0)
        first = min(first, stop)  # a range past the end is empty, not an offset outside the buffer
        with decoding(self.name):
            # A range after the first is also checked against the ref before it.
            previous = self._columns(node_id, first - 1, first, None).coords[0] if 0 < first < stop else None
            for lo in range(first, stop, _BATCH):
                got = read(lo, min(lo + _BATCH, stop), previous)
                previous = columns_of(got).coords[-1]
                yield got

    def _read_refs(
        self, node_id: NodeId, lo: int, hi: int, previous: np.ndarray | None, scratch: np.ndarray
    ) -> tuple[RefColumns, RefIdentities] | None:
        """Refs ``lo`` to ``hi`` of one array read by the C extension, or None where it leaves them to numpy."""
        if not self.layouts:
            self._locate(node_id, lo, hi)  # learns (and checks) the layouts, as the numpy code would first
        if len(self.layouts) > 255:  # the extension numbers layouts in a byte
            return None
        if self._known is None or len(self._known[0]) != len(self.layouts):
            rows = np.array([layout.row for layout in self.layouts.values()], np.int64).reshape(-1, 9)
            self._known = np.array(list(self.layouts), np.int64), rows, np.ascontiguousarray(rows.T)
        vtables, rows, table = self._known
        if previous is None:
            try:  # the first ref's number of coordinates (the numpy code names what is wrong with it)
                ndim = len(self._columns(node_id, lo, lo + 1, None).coords[0])
            except (FlatBufferError, IndexError, ValueError, OverflowError):
                return None
        else:
            ndim = len(previous)
        n = hi - lo
        if n * 4 * (ndim + 1) > len(self.payload):  # such refs cannot all fit the buffer: numpy says so
            return None
        coords, ids = np.empty((n, ndim), np.uint32), np.empty((2, n), np.uint64)
        pos, layouts, offset, length = (
            np.empty(n, np.int64),
            np.empty(n, np.uint8),
            np.empty(n, np.uint64),
            np.empty(n, np.uint64),
        )
        modified, location, firsts = np.empty(n, np.uint32), np.empty(n, np.intp), np.empty(n, np.intp)
        got = _refscan.read_refs(
            self.payload,
            self.arrays[node_id][0],
            lo,
            n,
            ndim,
            vtables,
            rows,
            None if previous is None else np.ascontiguousarray(previous, np.uint32),
            coords,
            pos,
            layouts,
            offset,
            length,
            ids,
            modified,
            location,
            firsts,
            scratch,
        )
        if got is None:
            return None
        distinct, natives, stamped = got
        columns = RefColumns(coords, np.arange(lo, hi, dtype=np.int64), pos, table, layouts)
        firsts = firsts[:distinct]
        where = lambda j: f"array {node_id} ref {lo + int(firsts[j])}"  # noqa: E731
        first_rows = columns.take(firsts)
        starts, ends = self._spans(first_rows.pos + first_rows.field(_PAYLOAD), where, "location")
        texts = self._texts(self._slices(starts, ends, where, "location"), first_rows.field(_COMPRESSED), where)
        kind = (
            _KINDS.index(RefKind.NATIVE)
            if n == natives
            else _KINDS.index(RefKind.VIRTUAL)
            if not natives
            else columns.field(_CODE)
        )  # only these two kinds are read here
        return columns, RefIdentities(
            (kind, offset, length, *(ids if natives else (0, 0)), modified if stamped else 0), (0, location), texts
        )

    def _columns(self, node_id: NodeId, lo: int, hi: int, previous: np.ndarray | None) -> RefColumns:
        """Refs ``lo`` to ``hi`` of one array located, checked against each other and against ``previous``."""
        b = self._bytes
        pos, table, inverse = self._locate(node_id, lo, hi)
        at = pos + (table[_INDEX, 0] if inverse is None else np.take(table[_INDEX], inverse))
        coords = uint32_vectors(
            b,
            at + gather(b, at, "<u4"),
            lambda j: f"array {node_id} ref {lo + j} index",
            None if previous is None else len(previous),
        )
        if (j := first_unsorted(coords, previous)) is not None:
            before = coords[j - 1] if j else previous
            raise FlatBufferError(
                f"array {node_id} refs MUST be sorted by index, but ref {lo + j} "
                f"{coords[j].tolist()} does not come after {before.tolist()}"
            )
        return RefColumns(coords, np.arange(lo, hi, dtype=np.int64), pos, table, inverse)

    def refs_of(self, node_id: NodeId, columns: RefColumns) -> RefBatch:
        """The refs of ``columns`` (from :meth:`ref_columns`, or part of them) decoded."""
        b, n, pos, fields, numbers = self._bytes, len(columns.pos), columns.pos, columns.fields, columns.numbers
        where = lambda j: f"array {node_id} ref {int(numbers[j])}"  # noqa: E731
        with decoding(self.name):
            codes = fields[_CODE]
            uniform = int(codes[0]) if n and (codes == codes[0]).all() else None
            kind = [_KINDS[uniform]] * n if uniform is not None else [_KINDS[c] for c in codes.tolist()]
            nothing = [None] * n
            offset = self._numbers(pos, fields[_OFFSET], "<u8")
            length = self._numbers(pos, fields[_LENGTH], "<u8")
            columns_out = {
                "inline": nothing,
                "chunk_id": nothing,
                "location": nothing,
                "etag": nothing,
                "modified": nothing,
            }
            for code, picked in _by_code(codes, uniform):
                p = pos if picked is None else pos[picked]
                f = fields if picked is None else fields[:, picked]
                at_ref = where if picked is None else (lambda j, picked=picked: where(int(picked[j])))  # noqa: E731
                if code == 1:
                    values = {"chunk_id": _chunk_ids(b[(p + f[_PAYLOAD])[:, None] + BYTE[:12]])}
                elif code == 0:
                    values = {"inline": self._vectors(p + f[_PAYLOAD], at_ref, "inline")}
                else:
                    values = self._virtual(p, f, at_ref)
                for name, column in values.items():
                    columns_out[name] = column if picked is None else _scatter(columns_out[name], picked, column)
        return RefBatch(
            columns.coords,
            kind,
            columns_out["inline"],
            columns_out["chunk_id"],
            columns_out["location"],
            offset,
            length,
            columns_out["etag"],
            columns_out["modified"],
        )

    def ref_identities(self, node_id: NodeId, columns: RefColumns) -> RefIdentities:
        """The refs of ``columns`` as numbers, texts aside (:class:`RefIdentities`); safe to call while other
        threads read other manifests, or this one."""
        b, n, pos, fields, numbers = self._bytes, len(columns.pos), columns.pos, columns.fields, columns.numbers
        where = lambda j: f"array {node_id} ref {int(numbers[j])}"  # noqa: E731
        named = np.zeros((2, n), np.intp)
        objects: list = []
        with decoding(self.name):
            codes = fields[_CODE]
            uniform = int(codes[0]) if n and (codes == codes[0]).all() else None
            offset = self._numbers(pos, fields[_OFFSET], "<u8")
            length = self._numbers(pos, fields[_LENGTH], "<u8")
            words: list = [0, 0]  # a chunk id's 12 bytes as two words
            modified = 0
            for code, picked in _by_code(codes, uniform):
                cells = slice(None) if picked is None else picked
                p, f = pos[cells], fields[:, cells]
                at_ref = where if picked is None else (lambda j, picked=picked: where(int(picked[j])))  # noqa: E731
                if code == 1:
                    raw = np.zeros((len(p), 16), np.uint8)
                    raw[:, :12] = b[(p + f[_PAYLOAD])[:, None] + BYTE[:12]]
                    raw = raw.view("<u8")
                    if picked is None:
                        words = [raw[:, 0], raw[:, 1]]
                    else:
                        words = [np.zeros(n, np.uint64), np.zeros(n, np.uint64)]
                        words[0][cells], words[1][cells] = raw[:, 0], raw[:, 1]
                    continue
                if code == 0:
                    distinct, inverse = self._vectors(p + f[_PAYLOAD], at_ref, "inline"), None
                else:
                    distinct, inverse = self._location_texts(p + f[_PAYLOAD], f[_COMPRESSED], at_ref)
                    etags, stamps = self._virtual_checksums(p, f, at_ref)
                    if stamps.any():
                        if picked is None:
                            modified = stamps
                        else:
                            modified = np.zeros(n, np.uint32)
                            modified[cells] = stamps
                    if etags is not None:
                        seen: dict[str, int] = {}
                        named[0, cells] = [
                            0 if e is None else 1 + len(objects) + seen.setdefault(e, len(seen)) for e in etags
                        ]
                        objects += seen
                found = np.arange(1 + len(objects), 1 + len(objects) + len(distinct))
                named[1, cells] = found if inverse is None else np.take(found, inverse)
                objects += distinct
        return RefIdentities(
            (codes if uniform is None else uniform, offset, length, *words, modified),
            (named[0] if named[0].any() else 0, named[1] if named[1].any() else 0),
            objects,
        )

    def _numbers(self, pos: np.ndarray, at: np.ndarray, dtype: str) -> np.ndarray:
        """The field at table offset ``at`` of each table (0 where absent: ``at`` == 0)."""
        if not at.any():
            return np.zeros(len(pos), dtype)
        # Absent fields read the table's first bytes (always inside it), then become 0.
        values = gather(self._bytes, pos + at, dtype)
        if not at.all():
            values[at == 0] = 0
        return values

    def _spans(self, slots: np.ndarray, where: Callable[[int], str], what: str) -> tuple[np.ndarray, np.ndarray]:
        """(start, end) of the byte vector each uoffset at ``slots`` points to, bounds-checked."""
        size = len(self.payload)
        vec = slots + gather(self._bytes, slots, "<u4")
        if (j := first(vec + 4 > size)) is not None:
            raise FlatBufferError(f"{where(j)}: {what} vector at {int(vec[j])} outside the buffer")
        ends = vec + 4 + gather(self._bytes, vec, "<u4")
        if (j := first(ends > size)) is not None:
            raise FlatBufferError(f"{where(j)}: {what} vector at {int(vec[j])} runs past the buffer end")
        return vec + 4, ends

    def _vectors(self, slots: np.ndarray, where: Callable[[int], str], what: str) -> list[bytes]:
        """The byte vector each uoffset at ``slots`` points to, bounds-checked."""
        return self._slices(*self._spans(slots, where, what), where, what)

    def _slices(self, starts: np.ndarray, ends: np.ndarray, where: Callable[[int], str], what: str) -> list[bytes]:
        """``payload[start:end]`` for each span; spans that start together (one vector that several refs
        point at) are copied once, and more distinct bytes than the buffer holds is a corrupt file."""
        size = len(self.payload)
        if int((ends - starts).sum()) <= size:
            return list(map(self.payload.__getitem__, map(slice, starts.tolist(), ends.tolist())))
        _unique, first_at, inverse = np.unique(starts, return_index=True, return_inverse=True)
        if int((ends[first_at] - starts[first_at]).sum()) > size:
            raise FlatBufferError(f"{where(0)}: the {what} vectors of these refs overlap")
        once = list(map(self.payload.__getitem__, map(slice, starts[first_at].tolist(), ends[first_at].tolist())))
        return [once[j] for j in inverse.tolist()]

    def _location_texts(
        self, slots: np.ndarray, compressed: np.ndarray, where: Callable[[int], str]
    ) -> tuple[list[str], np.ndarray | None]:
        """(the distinct locations, which of them each virtual ref whose location uoffset is at ``slots``
        has), or (every ref's location, None) where they are not deduplicated."""
        starts, ends = self._spans(slots, where, "location")
        # Locations repeat (many chunks per file): decode the distinct ones only.
        distinct = _distinct(self._bytes, starts, ends)
        if distinct is None:
            return self._texts(self._slices(starts, ends, where, "location"), compressed, where), None
        firsts, inverse = distinct
        texts = self._texts(
            self._slices(starts[firsts], ends[firsts], where, "location"),
            compressed[firsts],
            lambda j: where(int(firsts[j])),
        )
        return texts, inverse

    def _texts(self, raws: list[bytes], packed: np.ndarray, where: Callable[[int], str]) -> list[str]:
        """The text of each location (``packed``: which are compressed); ``where(j)`` names raws[j]'s ref."""
        for cache in (self._plain, self._packed):
            if len(cache) > _LOCATION_CACHE:
                cache.clear()
        try:
            if not packed.any():
                return list(map(self._plain.__getitem__, raws))
            if packed.all():
                return list(map(self._packed.__getitem__, raws))
            return [self._packed[r] if c else self._plain[r] for r, c in zip(raws, packed.tolist())]
        except _BadText as exc:
            raise FlatBufferError(f"{where(raws.index(exc.raw))}: {exc}") from None

    def _virtual_checksums(
        self, pos: np.ndarray, fields: np.ndarray, where: Callable[[int], str]
    ) -> tuple[list | None, np.ndarray]:
        """(each virtual ref's etag, or None when none has one; each one's last-modified, 0 where absent)."""
        etag_at = fields[_ETAG]
        etags: list | None = None
        if etag_at.any():
            etags = [None] * len(pos)
            has = np.flatnonzero(etag_at)
            raws = self._vectors(pos[has] + etag_at[has], lambda j: where(int(has[j])), "checksum_etag")
            for j, raw in zip(has.tolist(), raws):
                try:
                    etags[j] = raw.decode("utf-8")
                except UnicodeDecodeError:
                    raise FlatBufferError(f"{where(j)}: checksum_etag is not UTF-8") from None
        return etags, self._numbers(pos, fields[_MODIFIED], "<u4")

    def _virtual(self, pos: np.ndarray, fields: np.ndarray, where: Callable[[int], str]) -> dict[str, list]:
        """Location, etag and last-modified columns of virtual refs."""
        texts, inverse = self._location_texts(pos + fields[_PAYLOAD], fields[_COMPRESSED], where)
        locations = texts if inverse is None else np.array(texts, dtype=object)[inverse].tolist()
        etags, modified = self._virtual_checksums(pos, fields, where)
        return {
            "location": locations,
            "etag": [None] * len(pos) if etags is None else etags,
            "modified": [m or None for m in modified.tolist()] if modified.any() else [None] * len(pos),
        }


def _few_distinct(values: np.ndarray, most: int = 8) -> tuple[np.ndarray, np.ndarray | None]:
    """(the distinct values, the index in them of every value; None when there is one) of a 1-d array
    whose values are usually few (the vtables of a manifest's refs): a pass per value, not a sort."""
    found: list[int] = []
    inverse = np.zeros(len(values), np.int64)
    left = values
    while len(left) and len(found) < most:
        value = left[0]
        if not found and (values == value).all():
            return values[:1], None
        inverse[values == value] = len(found)
        found.append(int(value))
        left = left[left != value]
    if len(left):
        return np.unique(values, return_inverse=True)
    return np.array(found, values.dtype), inverse


def _distinct(b: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """(first position of each distinct byte string, position in those of every string) for the strings
    ``b[starts:ends]``, or None when they are too few or too long to be worth it."""
    lengths = ends - starts
    if len(starts) < 256:
        return None
    shortest, longest = int(lengths.min()), int(lengths.max())
    width = max(8, (longest + 7) & ~7)
    if width > 8 * len(_MIX) - 8 or width > len(b):
        return None
    # Every string as zero-padded 64-bit words, hashed; equal hashes are then confirmed word for word. The
    # words come from one gather of ``width``-byte items out of a view whose items start at every byte.
    last = len(b) - width
    items = np.ndarray((last + 1,), f"V{width}", buffer=b, strides=(1,))
    rows = items[np.minimum(starts, last)].view("<u8").reshape(-1, width // 8)
    for j in np.flatnonzero(starts > last).tolist():  # strings within ``width`` bytes of the end
        row = np.zeros(width, np.uint8)
        row[: lengths[j]] = b[starts[j] : ends[j]]
        rows[j] = row.view("<u8")
    hashes = lengths.astype(np.uint64) * _MIX[0]
    words = []
    for k in range(width // 8):  # column by column: numpy sums short rows slowly
        word = rows[:, k]
        if shortest < 8 * k + 8:  # a word some strings end inside: the bytes after them cleared
            word = word & _masks(width)[:, k][lengths]
        hashes += word * _MIX[k + 1]
        words.append(word)
    first, inverse = distinct(hashes)
    same = first[inverse]
    if not all((np.take(column, same) == column).all() for column in (lengths, *words)):
        return None
    return first, inverse


@functools.cache
def _masks(width: int) -> np.ndarray:
    """Row ``n``: the 64-bit words of ``width`` bytes that keep a string's first ``n`` bytes, clear the rest."""
    return np.where(BYTE[:width] < np.arange(width + 1)[:, None], 0xFF, 0).astype(np.uint8).view("<u8")


def _by_code(codes: np.ndarray, uniform: int | None) -> Iterator[tuple[int, np.ndarray | None]]:
    """(kind code, the refs that have it, None for all) of each kind present."""
    if uniform is not None:
        yield uniform, None
        return
    for code in np.unique(codes).tolist():
        yield code, np.flatnonzero(codes == code)


def _chunk_ids(raw: np.ndarray) -> list[str]:
    """Crockford base32 of each row of a (n, 12) uint8 array of ObjectId12s."""
    # base32 works on 5-byte groups: padding each id to 15 bytes makes one call encode all of them.
    padded = np.zeros((len(raw), 15), np.uint8)
    padded[:, :12] = raw
    text = np.frombuffer(ids.base32(padded.tobytes()), np.uint8).reshape(-1, 24)
    return np.ascontiguousarray(text[:, :20]).view("S20").reshape(-1).astype("U20").tolist()


def _scatter(column: list, picked: np.ndarray, values: list) -> list:
    """``column`` (copied if it is shared) with ``values`` at positions ``picked``."""
    out = list(column)
    for j, value in zip(picked.tolist(), values):
        out[j] = value
    return out


def decode_manifest(raw: bytes, name: str) -> Manifest:
    """Decode a manifest file (``name`` is used in error messages); refs stay lazy."""
    header, payload = open_file(raw, name, FileType.MANIFEST)
    with decoding(name):
        fb = root(FbManifest, payload)
        if fb.ArraysIsNone():
            raise FlatBufferError("required field arrays is missing")
        arrays: dict[NodeId, tuple[int, int]] = {}
        order: list[NodeId] = []
        for j in range(fb.ArraysLength()):
            am = fb.Arrays(j)
            node_id = id8(am.NodeId(), f"arrays[{j}].node_id")
            off = am._tab.Offset(6)
            if not off:
                raise FlatBufferError(f"required field arrays[{j}].refs is missing")
            count = am._tab.VectorLen(off)
            start = am._tab.Vector(off)
            if start + 4 * count > len(payload):
                raise FlatBufferError(f"arrays[{j}].refs vector at {start} runs past the buffer end")
            arrays[node_id] = (start, count)
            order.append(node_id)
        check_sorted(order, "arrays (by node_id)")
        source = ManifestBuffer(payload, name, arrays, byte_vector(fb, 8), fb.CompressionAlgorithm())
        infos = [ArrayManifestInfo(node_id, arrays[node_id][1]) for node_id in order]
        return Manifest(
            header,
            id12(fb.Id(), "id"),
            len(raw),
            infos,
            source.dictionary,
            source.compression_algorithm,
            byte_vector(fb, 12),
            source,
            len(payload),
        )


def iter_chunk_refs(raw: bytes, name: str = "<manifest>") -> Iterator[tuple[NodeId, ChunkRef]]:
    """Every (node id, ref) of a whole manifest file's bytes: the benchmark's entry point."""
    manifest = decode_manifest(raw, name)
    for info in manifest.arrays:
        yield from zip(itertools.repeat(info.node_id), manifest.chunk_refs(info.node_id))
