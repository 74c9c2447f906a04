"""Encode manifest files (``manifests/<id>``) laid out byte for byte as icechunk lays them out.

icechunk builds a manifest with the FlatBuffers builder (back to front): for each ref, in coordinate
order, its index vector, its location (or compressed location, or inline bytes), its etag, then its
table with the fields that differ from their defaults, largest first, and the table's vtable unless an
identical one was written before; then each array's refs vector and table, the arrays vector, the
location dictionary, the root table and the file identifier ``Ichk``. Each object is aligned to its
size as it is pushed, counting from the end of the buffer.

Laying the refs out the same way gives the payload icechunk wrote for the same refs (compressed the
same way, the file icechunk wrote): the manifest is as long as the snapshots naming it say, and
``inspect_manifest`` answers alike. Nothing here walks the refs one at a time: where each object lands
only depends on the parity of the buffer's length in 4-byte words at the ref's first 8-byte field, so
a pass of numpy over a batch of refs places all of them (:meth:`_Layout.place`), and a second pass
gives each batch's bytes, in file order (:meth:`_Layout.pieces`), to a streaming zstd compressor:
memory is a batch's, not the payload's.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator, cast

import numpy as np
import zstandard

from zsarchive.icechunk import ids
from zsarchive.icechunk.header import HEADER_LENGTH, IMPLEMENTATION, FrameForm, compressor, frame_form, wrap_frame
from zsarchive.icechunk.manifest.refs import INLINE, NATIVE, VIRTUAL, RefBatch, RefTable
from zsarchive.icechunk.model import ChunkRef, FileType, NodeId

_BATCH = 1 << 16
"""Refs placed and written per step: bounds the temporary arrays (a few tens of bytes per ref)."""
_FORM_BYTES = 16
"""The most the two frame forms of one payload differ in length (content size field, window byte)."""

# The ChunkRef fields in the order icechunk's generated ``ChunkRef::create`` pushes them: (vtable slot,
# bytes). A ref's fields are a bit mask over this tuple.
_PUSHED = ((3, 8), (2, 8), (8, 4), (7, 4), (6, 4), (5, 4), (4, 12), (1, 4), (0, 4))
_LENGTH, _OFFSET, _COMPRESSED, _MODIFIED, _ETAG, _LOCATION, _CHUNK_ID, _INLINE, _INDEX = (1 << k for k in range(9))
_WIDE = _LENGTH | _OFFSET
"""The 8-byte fields: a table holding one starts 8-aligned."""


@dataclass(frozen=True)
class _Fields:
    """What a set of ChunkRef fields (a mask over :data:`_PUSHED`) occupies in a table."""

    size: int
    """Bytes of the fields (the table less its soffset and alignment)."""
    offsets: tuple[int, ...]
    """Each vtable slot's offset in the table (0: absent)."""

    def vtable(self, table_size: int) -> bytes:
        return struct.pack(f"<{2 + len(self.offsets)}H", 4 + 2 * len(self.offsets), table_size, *self.offsets)


def _fields(mask: int) -> _Fields:
    present = [(slot, width) for k, (slot, width) in enumerate(_PUSHED) if mask >> k & 1]
    size = sum(width for _, width in present)
    offsets = [0] * (1 + max(slot for slot, _ in present))
    pushed = 0
    for slot, width in present:
        pushed += width
        offsets[slot] = size + 4 - pushed  # from the table's soffset: the first pushed lies farthest
    return _Fields(size, tuple(offsets))


_FIELDS = {mask: _fields(mask) for mask in range(1, 1 << len(_PUSHED)) if mask & _INDEX}


@dataclass
class _Texts:
    """Distinct strings or byte strings as stored (the length word, the bytes, a NUL for a string, zeros to
    a word), grouped by their number of words, so that a group is written with one 2-d assignment."""

    words: np.ndarray
    """Words of each (the length word included)."""
    rank: np.ndarray
    """Each text's row in its group."""
    groups: dict[int, np.ndarray] = field(default_factory=dict)
    """Words -> the rows (uint32 words) of the texts with that many words."""

    @classmethod
    def of(cls, raws: list[bytes], terminate: bool, at: np.ndarray | None = None, count: int | None = None) -> _Texts:
        """``raws`` as stored; ``at``: the positions in a list of ``count`` texts they are (the rest unused)."""
        stored = [
            struct.pack("<I", len(raw)) + raw + bytes(4 - len(raw) % 4 if terminate else -len(raw) % 4) for raw in raws
        ]
        own = np.array([len(s) // 4 for s in stored], np.int64)
        at = np.arange(len(raws)) if at is None else at
        words = np.zeros(len(raws) if count is None else count, np.int64)
        words[at] = own
        texts = cls(words, np.zeros(len(words), np.int64))
        for size in np.unique(own).tolist():
            members = np.flatnonzero(own == size)
            texts.rank[at[members]] = np.arange(len(members))
            texts.groups[size] = np.frombuffer(b"".join(stored[j] for j in members.tolist()), "<u4").reshape(-1, size)
        return texts

    def put(self, words: np.ndarray, at: np.ndarray, codes: np.ndarray) -> None:
        """Write text ``codes[i]`` at word ``at[i]`` of ``words``."""
        if len(self.groups) == 1:
            ((count, rows),) = self.groups.items()
            words[at[:, None] + np.arange(count)] = rows[self.rank[codes]]
            return
        counts = self.words[codes]
        for count, rows in self.groups.items():
            picked = np.flatnonzero(counts == count)
            if len(picked):
                words[at[picked, None] + np.arange(count)] = rows[self.rank[codes[picked]]]


@dataclass
class _Array:
    """One array's refs as the encoder reads them, and where the placement put them."""

    node_id: NodeId
    refs: RefTable
    start: int = 0
    """Bytes in the buffer (counted from its end) before the array's first ref."""
    tables: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))
    """Each ref's table, as bytes from the buffer's end to the table's start."""
    new_vtables: dict[int, bytes] = field(default_factory=dict)
    """Ref -> the vtable written right after its table (the first table of each layout)."""
    last: int = 0
    """Bytes from the buffer's end to the end of its last ref (its table, or the vtable after it)."""
    refs_end: int = 0
    """Bytes from the buffer's end to its refs vector (its length word)."""
    table: int = 0
    vtable: bytes = b""
    written: bool = False
    """Whether its vtable is written right after its table (the first of its layout)."""
    end: int = 0
    """Bytes from the buffer's end to the end of the array's table or vtable."""
    texts: tuple[_Texts | None, _Texts | None, _Texts | None] | None = None
    """(virtual locations as stored, inline values, etags), once known."""


class _Layout:
    """The placement of a whole manifest, counted as the builder counts: bytes from the buffer's end."""

    def __init__(
        self,
        arrays: list[_Array],
        algorithm: bool,
        dictionary: bytes | None,
        pack: Callable[[list[str]], list[bytes]] | None,
    ):
        self.arrays = arrays
        self.algorithm = algorithm
        """Whether the root table has a compression_algorithm field (written where it is not the default)."""
        self.dictionary = dictionary
        self.vtables: dict[bytes, int] = {}
        """Every vtable written, -> where."""
        self.wide = False
        """Whether some table holds an 8-byte field (the buffer is then 8-aligned)."""
        self.pack = pack
        self.size = 0

    # -- per ref features ------------------------------------------------------------------------

    def _texts(self, array: _Array) -> tuple[_Texts | None, _Texts | None, _Texts | None]:
        """(virtual locations as stored, inline values, etags) of an array, each distinct one once."""
        if array.texts is None:
            t = array.refs
            locations = None
            virtual = t.kind == VIRTUAL
            if virtual.any():
                used = np.flatnonzero(np.bincount(t.text[virtual], minlength=len(t.texts)))  # chunk ids share the list
                names = [t.texts[j] for j in used.tolist()]
                raws = self.pack(names) if self.pack else [name.encode("utf-8") for name in names]
                locations = _Texts.of(raws, terminate=self.pack is None, at=used, count=len(t.texts))
            inline = _Texts.of(list(t.blobs), terminate=False) if t.blobs and (t.kind == INLINE).any() else None
            etags = (
                _Texts.of([s.encode("utf-8") for s in t.etags], terminate=True)
                if t.etags and (t.etag[virtual] >= 0).any()
                else None
            )
            array.texts = locations, inline, etags
        return array.texts

    def _features(self, array: _Array, lo: int, hi: int) -> tuple[np.ndarray, ...]:
        """(field mask, bytes pushed before the table, payload bytes, etag bytes) of refs ``lo`` to ``hi``."""
        t = array.refs
        kind = t.kind[lo:hi]
        locations, inline, etags = self._texts(array)
        n, ndim = hi - lo, t.coords.shape[1]
        mask = np.full(n, _INDEX, np.int64)
        payload = np.zeros(n, np.int64)
        virtual = kind == VIRTUAL
        native = kind == NATIVE
        sized = virtual | native
        mask[sized & (t.length[lo:hi] != 0)] |= _LENGTH
        mask[sized & (t.offset[lo:hi] != 0)] |= _OFFSET
        mask[native] |= _CHUNK_ID
        if virtual.any():
            assert locations is not None  # made for the array's virtual refs
            mask[virtual] |= _COMPRESSED if self.pack else _LOCATION
            payload[virtual] = 4 * locations.words[t.text[lo:hi][virtual]]
            mask[virtual & (t.modified[lo:hi] != 0)] |= _MODIFIED
        etag = np.zeros(n, np.int64)
        if etags is not None:
            has = virtual & (t.etag[lo:hi] >= 0)
            mask[has] |= _ETAG
            etag[has] = 4 * etags.words[t.etag[lo:hi][has]]
        is_inline = kind == INLINE
        if is_inline.any():
            assert inline is not None  # made for the array's inline refs
            mask[is_inline] |= _INLINE
            payload[is_inline] = 4 * inline.words[t.inline[lo:hi][is_inline]]
        return mask, 4 + 4 * ndim + payload + etag, payload, etag

    # -- placement -------------------------------------------------------------------------------

    def place(self) -> None:
        """Where every object of the buffer goes (bytes from its end), and its size."""
        s = 0
        for array in self.arrays:
            n = len(array.refs.kind)
            array.start = s
            array.tables = np.empty(n, np.int64)
            for lo in range(0, n, _BATCH):
                s = self._place(array, lo, min(n, lo + _BATCH), s)
            array.last = s
            s += -s % 4 + 4 * n  # the refs vector (aligned to a word: a vtable may end between words)
            array.refs_end = s = s + 4
            array.table = s + 16  # refs (uoffset), node id (8 bytes), soffset
            array.vtable = struct.pack("<4H", 8, 16, 4, 12)
            array.end = s = self._vtable(array.vtable, array.table)
            array.written = s != array.table
        self.top = s
        s += -s % 4 + 4 * len(self.arrays)  # the arrays vector
        self.arrays_end = s = s + 4
        if self.dictionary is not None:
            s += -(s + len(self.dictionary)) % 4 + len(self.dictionary)
            self.dictionary_end = s = s + 4
        # the root table: [location dictionary,] arrays, id, [compression algorithm when not the default 1]
        pushed = [(2, 4)] if self.dictionary is not None else []
        pushed += [(1, 4), (0, 12)]
        if self.algorithm and self.dictionary is None:
            pushed.append((3, 1))
        tail, positions = s, {}
        for slot, width in pushed:
            s += width
            positions[slot] = s
        s += -s % 4 + 4
        self.table = s
        offsets = [0] * (1 + max(positions))
        for slot, at in positions.items():
            offsets[slot] = s - at
        self.field_at = positions
        self.root_vtable = struct.pack(f"<{2 + len(offsets)}H", 4 + 2 * len(offsets), s - tail, *offsets)
        s = self._vtable(self.root_vtable, self.table)
        self.root_written = s != self.table
        s += -(s + 8) % (8 if self.wide else 4)
        self.size = s + 8

    def _vtable(self, vtable: bytes, table: int) -> int:
        """The buffer's length after a table ending at ``table`` and its vtable (written if it is new)."""
        if vtable in self.vtables:
            return table
        self.vtables[vtable] = table + len(vtable)
        return table + len(vtable)

    def _place(self, array: _Array, lo: int, hi: int, s: int) -> int:
        """Place refs ``lo`` to ``hi`` of ``array`` after ``s`` bytes; the length after them."""
        mask, pre, _payload, _etag = self._features(array, lo, hi)
        size = np.zeros(1 << len(_PUSHED), np.int64)
        for m in _present(mask):
            size[m] = _FIELDS[m].size
        fields = size[mask]
        wide = (mask & _WIDE) != 0
        self.wide |= bool(wide.any())
        quad = (pre >> 2) & 1
        tail = ((fields + 4) >> 2) & 1  # the words of the fields and soffset, odd or even
        start = 0
        while start < len(mask):
            # the parity of the buffer's length in words before each ref (an 8-byte field first pads it to
            # even): after a ref with one, the parity its own table leaves; after one without, flipped by its words
            w, q, t = wide[start:], quad[start:], tail[start:]
            step = np.where(w, t, q ^ t)
            flips = np.bitwise_xor.accumulate(step)
            last_wide = np.maximum.accumulate(np.where(w, np.arange(len(w)), -1))
            since = np.where(last_wide > 0, flips[np.maximum(last_wide - 1, 0)], 0)
            after = np.where(last_wide >= 0, flips ^ since, ((s >> 2) & 1) ^ flips)
            before = np.concatenate(([(s >> 2) & 1], after[:-1]))
            pad = 4 * (w & (before ^ q).astype(bool))
            table_size = pad + fields[start:] + 4
            ends = s + np.cumsum(pre[start:] + table_size)
            # the first table of a layout not written yet stops the pass: its vtable follows it
            keys = mask[start:] * 2 + (pad >> 2)
            new = None
            for key in _present(keys):
                vtable = _FIELDS[key >> 1].vtable(_FIELDS[key >> 1].size + 4 + 4 * (key & 1))
                if vtable not in self.vtables:
                    at = int(np.argmax(keys == key))
                    new = at if new is None or at < new else new
            stop = len(keys) if new is None else new + 1
            array.tables[lo + start : lo + start + stop] = ends[:stop]
            s = int(ends[stop - 1])
            start += stop
            if new is not None:
                key = int(keys[new])
                vtable = _FIELDS[key >> 1].vtable(int(table_size[new]))
                array.new_vtables[lo + start - 1] = vtable
                s = self._vtable(vtable, s)
                if lo + start < len(array.refs.kind):
                    s += -s % 4  # the next ref's first object is word-aligned
        return s

    # -- bytes -----------------------------------------------------------------------------------

    def compressed(self, manifest_id: str, form: FrameForm, level: int) -> bytearray:
        """The buffer as one zstd frame of ``form``."""
        stream = compressor(form, self.size, level)
        frame = bytearray()
        for piece in self.pieces(manifest_id):
            frame += stream.compress(piece)
        frame += stream.flush()
        return frame

    def pieces(self, manifest_id: str) -> Iterator[bytes | memoryview]:
        """The buffer, front to back."""
        yield self._top(manifest_id)
        for j in range(len(self.arrays) - 1, -1, -1):
            array = self.arrays[j]
            yield self._array_head(array)
            n = len(array.refs.kind)
            for lo in range(0, n, _BATCH):  # the refs vector
                entries = array.refs_end - 4 - 4 * np.arange(lo, min(n, lo + _BATCH), dtype=np.int64)
                entries -= array.tables[lo : lo + _BATCH]
                yield entries.astype("<u4").data
            if array.refs_end - 4 - 4 * n > array.last:  # the word alignment before it
                yield bytes(array.refs_end - 4 - 4 * n - array.last)
            for hi in range(n, 0, -_BATCH):
                yield self._refs(array, max(0, hi - _BATCH), hi)

    def _top(self, manifest_id: str) -> bytes:
        """Root offset, identifier, root vtable and table, location dictionary, arrays vector."""
        buf = bytearray(self.size - self.top)

        def at(r: int) -> int:  # the position in ``buf`` of what lies ``r`` bytes from the buffer's end
            return self.size - r

        struct.pack_into("<I", buf, 0, self.size - self.table)
        buf[4:8] = b"Ichk"
        if self.root_written:
            buf[at(self.table + len(self.root_vtable)) : at(self.table)] = self.root_vtable
        struct.pack_into("<i", buf, at(self.table), self.vtables[self.root_vtable] - self.table)
        for slot, where in self.field_at.items():
            if slot == 0:
                buf[at(where) : at(where) + 12] = ids.decode(manifest_id, 12)
            elif slot in (1, 2):
                struct.pack_into("<I", buf, at(where), where - (self.arrays_end if slot == 1 else self.dictionary_end))
        if self.dictionary is not None:
            struct.pack_into("<I", buf, at(self.dictionary_end), len(self.dictionary))
            buf[at(self.dictionary_end) + 4 : at(self.dictionary_end) + 4 + len(self.dictionary)] = self.dictionary
        struct.pack_into(
            f"<{1 + len(self.arrays)}I",
            buf,
            at(self.arrays_end),
            len(self.arrays),
            *(self.arrays_end - 4 - 4 * j - a.table for j, a in enumerate(self.arrays)),
        )
        return bytes(buf)

    def _array_head(self, array: _Array) -> bytes:
        """An array's vtable (if new), its table and the length of its refs vector."""
        buf = bytearray(array.end - array.refs_end + 4)

        def at(r: int) -> int:
            return array.end - r

        if array.written:
            buf[: len(array.vtable)] = array.vtable
        table = at(array.table)
        struct.pack_into("<i", buf, table, self.vtables[array.vtable] - array.table)
        buf[table + 4 : table + 12] = ids.decode(array.node_id, 8)
        struct.pack_into("<I", buf, table + 12, 4)  # to the refs vector, right after the table
        struct.pack_into("<I", buf, at(array.refs_end), len(array.refs.kind))
        return bytes(buf)

    def _start(self, array: _Array, ref: int) -> int:
        """Bytes from the buffer's end to where ref ``ref`` of ``array`` begins."""
        if ref == 0:
            return array.start
        end = int(array.tables[ref - 1]) + len(array.new_vtables.get(ref - 1, b""))
        return end + -end % 4

    def _refs(self, array: _Array, lo: int, hi: int) -> memoryview:
        """The bytes of refs ``lo`` to ``hi`` (the last first, as the buffer holds them)."""
        t = array.refs
        mask, pre, payload, etag = self._features(array, lo, hi)
        tables = array.tables[lo:hi]
        begin = self._start(array, lo)
        end = array.last if hi == len(t.kind) else self._start(array, hi)
        starts = np.empty(hi - lo, np.int64)  # bytes before each ref
        starts[0] = begin
        starts[1:] = tables[:-1]
        for ref, vtable in array.new_vtables.items():
            if lo <= ref < hi - 1:
                starts[ref - lo + 1] = self._start(array, ref + 1)
        # the block's first byte has the alignment the buffer has there, so that words are aligned
        shift = (self.size - end) % 8
        block = np.zeros((shift + end - begin + 7) // 8 * 8, np.uint8)
        words = block.view("<u4")

        def word(r: np.ndarray) -> np.ndarray:  # the word ``r`` bytes from the buffer's end
            return (shift + end - r) >> 2

        ndim = t.coords.shape[1]
        index = starts + 4 + 4 * ndim
        words[word(index)] = ndim
        for axis in range(ndim):
            words[word(index) + 1 + axis] = t.coords[lo:hi, axis]
        kind = t.kind[lo:hi]
        locations, inline, etags = self._texts(array)
        payload_end = index + payload
        for code, texts, which in ((VIRTUAL, locations, t.text), (INLINE, inline, t.inline)):
            rows = np.flatnonzero(kind == code)
            if texts is not None and len(rows):
                texts.put(words, word(payload_end[rows]), which[lo:hi][rows])
        etag_end = payload_end + etag
        if etags is not None:
            rows = np.flatnonzero(etag)
            etags.put(words, word(etag_end[rows]), t.etag[lo:hi][rows])
        # the table: its soffset, then its fields from the last pushed (the index) to the first
        cursor = tables - 4
        for k in range(len(_PUSHED) - 1, -1, -1):
            bit, width = 1 << k, _PUSHED[k][1]
            rows = np.flatnonzero(mask & bit)
            if not len(rows):
                continue
            at = word(cursor[rows])
            if bit == _INDEX:
                words[at] = cursor[rows] - index[rows]
            elif bit in (_LOCATION, _COMPRESSED, _INLINE):
                words[at] = cursor[rows] - payload_end[rows]
            elif bit == _ETAG:
                words[at] = cursor[rows] - etag_end[rows]
            elif bit == _MODIFIED:
                words[at] = t.modified[lo:hi][rows]
            elif bit == _CHUNK_ID:
                raw = _chunk_id_words(t.texts, t.text[lo:hi][rows])
                for w in range(3):
                    words[at + w] = raw[:, w]
            else:
                values = (t.length if bit == _LENGTH else t.offset)[lo:hi][rows]
                words[at] = values & 0xFFFFFFFF
                words[at + 1] = values >> 32
            cursor[rows] -= width
        vtable_at = np.zeros(hi - lo, np.int64)
        table_size = tables - starts - pre
        for key in _present(mask * 512 + table_size):  # a table is less than 512 bytes
            vtable_at[mask * 512 + table_size == key] = self.vtables[_FIELDS[key >> 9].vtable(key & 511)]
        words[word(tables)] = (vtable_at - tables).astype(np.uint32)
        for ref, vtable in array.new_vtables.items():
            if lo <= ref < hi:
                place = shift + end - int(array.tables[ref]) - len(vtable)
                block[place : place + len(vtable)] = np.frombuffer(vtable, np.uint8)
        return block.data[shift : shift + end - begin]


def _present(values: np.ndarray) -> list[int]:
    """The distinct values of an array of small non-negative integers, ascending."""
    return np.flatnonzero(np.bincount(values)).tolist()


def _chunk_id_words(texts: list[str], codes: np.ndarray) -> np.ndarray:
    """The 12 bytes of the chunk ids ``texts[codes[i]]`` as 3 words each."""
    distinct, inverse = np.unique(codes, return_inverse=True)
    raw = ids.decode_many([texts[c] for c in distinct.tolist()], 12)
    return np.ascontiguousarray(raw).view("<u4").reshape(-1, 3)[inverse.reshape(-1)]


def _packer(dictionary: bytes, level: int) -> Callable[[list[str]], list[bytes]]:
    """Virtual locations as icechunk compresses them with a manifest's ``location_dictionary``: each one
    zstd frame at ``level`` with the content size and the dictionary's id."""
    cctx = zstandard.ZstdCompressor(
        level=level,
        dict_data=zstandard.ZstdCompressionDict(dictionary),
        write_content_size=True,
        write_dict_id=True,
        write_checksum=False,
    )

    def pack(locations: list[str]) -> list[bytes]:
        raws = [location.encode("utf-8") for location in locations]
        if len(raws) < 1024:
            return [cctx.compress(raw) for raw in raws]
        packed: Any = cctx.multi_compress_to_buffer(cast(Any, raws), threads=-1)
        return [bytes(packed[j]) for j in range(len(raws))]

    return pack


def encode_manifest(
    manifest_id: str,
    arrays: Iterable[tuple[NodeId, Iterable[ChunkRef] | RefBatch | RefTable]],
    spec_version: int,
    implementation: str = IMPLEMENTATION,
    size: int | None = None,
    location_dictionary: bytes | None = None,
    level: int = 3,
    location_level: int = 3,
) -> bytes:
    """A manifest file holding each array's refs (arrays sorted by node id, refs by coordinates, as
    icechunk's binary searches need; a :class:`RefBatch` or :class:`RefTable` is taken as sorted),
    laid out and compressed (at ``level``) as the icechunk that ``implementation`` names writes it;
    virtual locations stored plain, or (spec V2) compressed with ``location_dictionary`` at
    ``location_level`` as icechunk compresses them. ``size``: the length the snapshots name: the file
    is made that long where it comes out shorter (:func:`~zsarchive.icechunk.header.wrap_frame`)."""
    tables = []
    for node_id, refs in sorted(arrays, key=lambda a: a[0]):
        if isinstance(refs, RefBatch):
            table = refs.table()
        elif isinstance(refs, RefTable):
            table = refs
        else:
            table = RefTable.of(sorted(refs, key=lambda r: r.index))
        if len(table.kind):
            tables.append(_Array(node_id, table))
    dictionary = location_dictionary if spec_version >= 2 else None
    pack = _packer(dictionary, location_level) if dictionary is not None else None
    # icechunk 2.x builds every manifest with the V2 schema's code, V1 files included
    major = implementation[3:].partition(".")[0] if implementation.startswith("ic-") else None
    algorithm = int(major) >= 2 if major and major.isdigit() else spec_version >= 2
    layout = _Layout(tables, algorithm, dictionary, pack)
    layout.place()
    form = frame_form(implementation)
    frame = layout.compressed(manifest_id, form, level)
    if size and 0 < abs(HEADER_LENGTH + len(frame) - size) <= _FORM_BYTES:
        # the same payload framed as the other form may be the file the snapshots name, byte for byte
        other = layout.compressed(
            manifest_id, FrameForm.SIZED if form is FrameForm.UNSIZED else FrameForm.UNSIZED, level
        )
        if HEADER_LENGTH + len(other) == size:
            frame = other
    return wrap_frame(FileType.MANIFEST, spec_version, frame, layout.size, implementation, size)
