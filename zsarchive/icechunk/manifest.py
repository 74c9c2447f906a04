"""Decode manifest files (``manifests/<id>``). Chunk refs are read straight from the little-endian
FlatBuffer with ``struct`` (the generated accessors cost ~20 calls per ref), every offset bounds-checked.
"""

from __future__ import annotations

import itertools
import operator
import struct
from typing import Iterator

import zstandard

from zsarchive.errors import ZSCorrupt
from zsarchive.icechunk import ids
from zsarchive.icechunk.common import decoding, id8, id12
from zsarchive.icechunk.flatbuf import FlatBufferError, byte_vector, check_sorted, root
from zsarchive.icechunk.generated.Manifest import Manifest as FbManifest
from zsarchive.icechunk.header import open_file
from zsarchive.icechunk.model import ArrayManifestInfo, ChunkRef, FileType, Manifest, NodeId, RefKind

_U32 = struct.Struct("<I")
_I32 = struct.Struct("<i")
_U16 = struct.Struct("<H")
_INLINE, _NATIVE, _VIRTUAL = RefKind.INLINE, RefKind.NATIVE, RefKind.VIRTUAL
_new_ref = tuple.__new__  # builds the NamedTuple without its keyword handling: ~2x faster
_N_SLOTS = 10  # fields of the ChunkRef table


_WIDTHS = (4, 4, 8, 8, 12, 4, 4, 4, 4, 4)  # bytes of each ChunkRef field inside the table
_FORMATS = ("I", "I", "Q", "Q", "12s", "I", "I", "I", "I", "I")
_TAIL = (0,)  # appended to every unpacked table: the value of an absent field
_BATCH = 1024  # refs decoded per resumption of the decoder


def _NO_TABLE(buf, pos):
    return (0,)


def _NO_INDEX(buf, pos):
    return (None,)


class _Layout:
    """One validated ChunkRef vtable, compiled into a single ``struct`` call per ref.

    ``unpack(buf, pos)`` starts with the table's soffset (to confirm the guess of layout); ``+ _TAIL``
    then ``pick`` gives (index uoffset, offset, length, payload, etag uoffset, last_modified), where
    payload is the inline / location / compressed_location uoffset or the 12 chunk id bytes, each 0
    when absent.
    """

    __slots__ = ("kind", "table_size", "unpack", "pick", "index_at", "payload_at", "etag_at", "compressed",
                 "vtable")

    def __init__(self, buf, vtable: int, where: str):
        if vtable < 0 or vtable + 4 > len(buf):
            raise FlatBufferError(f"{where}: vtable at {vtable} outside the buffer")
        vt_size, table_size = _U16.unpack_from(buf, vtable)[0], _U16.unpack_from(buf, vtable + 2)[0]
        if vt_size < 4 or vt_size & 1 or vtable + vt_size > len(buf):
            raise FlatBufferError(f"{where}: vtable at {vtable} has an impossible size {vt_size}")
        slots = [0] * _N_SLOTS
        for s in range(min(_N_SLOTS, (vt_size - 4) // 2)):
            slots[s] = _U16.unpack_from(buf, vtable + 4 + 2 * s)[0]
        present = sorted((off, s) for s, off in enumerate(slots) if off)
        end = 0
        for off, s in present:
            if off < 4 or off < end or off + _WIDTHS[s] > table_size:
                raise FlatBufferError(f"{where}: field {s} at {off} overlaps another or lies outside its "
                                      f"{table_size}-byte table")
            end = off + _WIDTHS[s]
        index, inline, offset, length, chunk_id, location, etag, modified, compressed, _extra = slots
        if not index:
            raise FlatBufferError(f"{where}: required field index is missing")
        kinds = [bool(inline), bool(chunk_id), bool(location or compressed)]
        if sum(kinds) != 1:
            raise FlatBufferError(f"{where}: exactly one of inline, chunk_id, location/compressed_location "
                                  f"must be present")
        self.kind = _INLINE if kinds[0] else _NATIVE if kinds[1] else _VIRTUAL
        self.table_size = table_size
        fmt, cursor, position = "<i", 4, {}
        for off, s in present:
            fmt += "x" * (off - cursor) + _FORMATS[s]
            cursor = off + _WIDTHS[s]
            position[s] = len(position) + 1
        self.unpack = struct.Struct(fmt).unpack_from
        tail = len(position) + 1
        payload_slot = 1 if inline else 4 if chunk_id else 5 if location else 8
        self.pick = operator.itemgetter(*(position.get(s, tail) for s in (0, 2, 3, payload_slot, 6, 7)))
        self.index_at, self.payload_at, self.etag_at = index, slots[payload_slot], etag
        self.compressed = not location and bool(compressed)
        self.vtable = vtable


class ManifestBuffer:
    """The decompressed payload of one manifest, decoding refs per array on demand."""

    def __init__(self, payload: bytes, name: str, arrays: dict[NodeId, tuple[int, int]],
                 dictionary: bytes | None, compression_algorithm: int):
        self.payload = payload
        self.name = name
        self.arrays = arrays
        self.layouts: dict[int, _Layout] = {}
        self.dictionary = dictionary
        self.compression_algorithm = compression_algorithm
        self._dctx: zstandard.ZstdDecompressor | None = None
        self._counts: dict[NodeId, tuple[int, int, int, int]] = {}

    def _layout(self, vtable: int, where: str) -> _Layout:
        layout = self.layouts.get(vtable)
        if layout is None:
            layout = self.layouts[vtable] = _Layout(self.payload, vtable, where)
        return layout

    def _tables(self, node_id: NodeId) -> Iterator[tuple[int, int, _Layout]]:
        """(ref number, table position, layout) of every ref of one array, bounds-checked."""
        buf = self.payload
        size = len(buf)
        start, count = self.arrays[node_id]
        layouts = self.layouts
        unpack_i32 = _I32.unpack_from
        # One call for the whole offsets vector instead of one per ref.
        for j, rel in enumerate(struct.unpack_from(f"<{count}I", buf, start)):
            pos = start + 4 * j + rel
            if pos + 4 > size:
                raise FlatBufferError(f"array {node_id} ref {j}: table at {pos} outside the buffer")
            vtable = pos - unpack_i32(buf, pos)[0]
            layout = layouts.get(vtable)
            if layout is None:
                layout = self._layout(vtable, f"array {node_id} ref {j}")
            if pos + layout.table_size > size:
                raise FlatBufferError(f"array {node_id} ref {j}: table at {pos} runs past the buffer end")
            yield j, pos, layout

    def _count(self, node_id: NodeId) -> tuple[int, int, int, int]:
        """(inline, native, virtual, compressed-location) counts of one array, from the ref vtables alone."""
        counts = self._counts.get(node_id)
        if counts is None:
            tally = {_INLINE: 0, _NATIVE: 0, _VIRTUAL: 0}
            compressed = 0
            if node_id in self.arrays:
                with decoding(self.name):
                    for _j, _pos, layout in self._tables(node_id):
                        tally[layout.kind] += 1
                        compressed += layout.compressed
            counts = self._counts[node_id] = (tally[_INLINE], tally[_NATIVE], tally[_VIRTUAL], compressed)
        return counts

    def kind_counts(self, node_id: NodeId) -> tuple[int, int, int]:
        """(inline, native, virtual) counts of one array."""
        return self._count(node_id)[:3]

    def compressed_locations(self, node_id: NodeId) -> int:
        """How many virtual refs of one array store a compressed location."""
        return self._count(node_id)[3]

    def _decompress_location(self, raw: bytes, where: str) -> str:
        if self.compression_algorithm == 0:
            data = raw
        else:
            if self.dictionary is None:
                raise FlatBufferError(f"{where}: compressed_location present but the manifest has no "
                                      f"location_dictionary")
            try:
                if self._dctx is None:
                    self._dctx = zstandard.ZstdDecompressor(dict_data=zstandard.ZstdCompressionDict(self.dictionary))
                dobj = self._dctx.decompressobj()
                data = dobj.decompress(raw)
            except zstandard.ZstdError as exc:
                raise FlatBufferError(f"{where}: compressed_location does not decompress: {exc}") from None
            if not dobj.eof:
                raise FlatBufferError(f"{where}: compressed_location is truncated")
        return _utf8(data, f"{where}: location")

    def chunk_refs(self, node_id: NodeId, first: int = 0, stop: int | None = None) -> Iterator[ChunkRef]:
        """Refs ``first`` to ``stop`` (default: all) of one array in ascending coordinate order; ZSCorrupt
        on any inconsistency. Ranges let several processes share one large array."""
        if node_id not in self.arrays:
            return iter(())
        # Refs come in lists, so the per-ref iteration is C code and the decoder resumes once per batch.
        refs = itertools.chain.from_iterable(self._batches(node_id, max(first - 1, 0), stop))
        # A range after the first starts one ref early, so its order against the ref before is checked too.
        return itertools.islice(refs, 1, None) if first > 0 else refs

    def _batches(self, node_id: NodeId, first: int, stop: int | None) -> Iterator[list[ChunkRef]]:
        # The hot loop of the whole reader. Consecutive refs nearly always share one vtable, so the
        # previous ref's layout is tried first and confirmed by the soffset its single struct call
        # returns. Every offset here is a sum of unsigned values, so it is never negative and
        # struct.unpack_from's own length check is the bounds check (struct.error -> corrupt);
        # only slices, which silently truncate, are checked by hand.
        buf = self.payload
        size = len(buf)
        start, total = self.arrays[node_id]
        stop = total if stop is None else max(min(stop, total), 0)
        first = min(first, stop)  # a range past the end is empty, not an offset outside the buffer
        count = stop - first
        unpack_u32 = _U32.unpack_from
        locations: dict[bytes, str] = {}
        encode_id = ids.encode
        new_ref = _new_ref
        virtual, native, tail = _VIRTUAL, _NATIVE, _TAIL
        previous: tuple[int, ...] = ()
        # Placeholders that fail the first checks below, sending the first ref down the slow paths.
        ndim, index_unpack = -1, _NO_INDEX
        vtable, unpack = None, _NO_TABLE
        batch: list[ChunkRef] = []
        append = batch.append
        begin = slot = start + 4 * first
        try:
            offsets = struct.unpack_from(f"<{count}I", buf, begin)
            for chunk in range(0, count, _BATCH):  # one batch per slice: no per-ref batch-size check
                for rel in offsets[chunk:chunk + _BATCH]:
                    pos = slot + rel
                    slot += 4
                    try:
                        values = unpack(buf, pos)
                    except struct.error:
                        # The guessed layout reads past the end, where a smaller table may sit: go the slow way.
                        values = (pos + 1,)
                    if pos - values[0] != vtable:
                        layout = self._layout(pos - _I32.unpack_from(buf, pos)[0],
                                              f"array {node_id} ref {(slot - start) // 4 - 1}")
                        vtable, unpack, pick = layout.vtable, layout.unpack, layout.pick
                        kind, index_at, payload_at, etag_at = layout.kind, layout.index_at, layout.payload_at, \
                            layout.etag_at
                        compressed = layout.compressed
                        values = unpack(buf, pos)
                    index_off, offset, length, payload, etag_off, modified = pick(values + tail)
                    vec = pos + index_at + index_off
                    try:
                        coords = index_unpack(buf, vec)
                    except struct.error:  # a shorter index may end the buffer: let _index_reader judge it
                        coords = (None,)
                    if coords[0] != ndim:
                        ndim, index_unpack = self._index_reader(buf, vec, node_id, (slot - start) // 4 - 1)
                        coords = index_unpack(buf, vec)
                    index = coords[1:]
                    if not previous < index and slot - begin > 4:
                        raise FlatBufferError(f"array {node_id} refs MUST be sorted by index, but ref "
                                              f"{(slot - start) // 4 - 1} {list(index)} does not come after "
                                              f"{list(previous)}")
                    previous = index
                    if kind is virtual:
                        vec = pos + payload_at + payload
                        n = unpack_u32(buf, vec)[0]
                        if vec + 4 + n > size:
                            raise FlatBufferError(f"array {node_id} ref {(slot - start) // 4 - 1}: location vector "
                                                  f"at {vec} runs past the buffer end")
                        raw = buf[vec + 4:vec + 4 + n]
                        location = locations.get(raw)
                        if location is None:
                            where = f"array {node_id} ref {(slot - start) // 4 - 1}"
                            location = locations[raw] = (self._decompress_location(raw, where) if compressed
                                                         else _utf8(raw, f"{where}: location"))
                        etag = None
                        if etag_off:
                            where = f"array {node_id} ref {(slot - start) // 4 - 1} checksum_etag"
                            etag = _utf8(_vector(buf, pos + etag_at + etag_off, size, where), where)
                        append(new_ref(ChunkRef, (index, kind, None, None, location, offset, length, etag,
                                                  modified or None)))
                    elif kind is native:
                        append(new_ref(ChunkRef, (index, kind, None, encode_id(payload), None, offset, length, None,
                                                  None)))
                    else:
                        inline = _vector(buf, pos + payload_at + payload, size,
                                         f"array {node_id} ref {(slot - start) // 4 - 1} inline")
                        append(new_ref(ChunkRef, (index, kind, inline, None, None, 0, 0, None, None)))
                yield batch
                batch = []
                append = batch.append
        except struct.error:
            raise ZSCorrupt(f"{self.name}: array {node_id} ref {(slot - start) // 4 - 1}: an offset points "
                            f"outside the {size}-byte buffer") from None
        except FlatBufferError as exc:
            raise ZSCorrupt(f"{self.name}: {exc}") from None

    @staticmethod
    def _index_reader(buf: bytes, vec: int, node_id: NodeId, j: int):
        """(ndim, unpack function giving (ndim, *coords)) for the index vector at ``vec``, checked to fit."""
        if vec + 4 > len(buf):
            raise FlatBufferError(f"array {node_id} ref {j}: index vector at {vec} outside the buffer")
        ndim = _U32.unpack_from(buf, vec)[0]
        if vec + 4 + 4 * ndim > len(buf):
            raise FlatBufferError(f"array {node_id} ref {j}: index vector at {vec} runs past the buffer end")
        return ndim, struct.Struct(f"<{ndim + 1}I").unpack_from


def _vector(buf: bytes, vec: int, size: int, what: str) -> bytes:
    """The byte vector (or string) starting (length prefix) at ``vec``, bounds-checked."""
    if vec + 4 > size:
        raise FlatBufferError(f"{what}: vector at {vec} outside the buffer")
    n = _U32.unpack_from(buf, vec)[0]
    if vec + 4 + n > size:
        raise FlatBufferError(f"{what}: vector at {vec} of length {n} runs past the buffer end")
    return buf[vec + 4:vec + 4 + n]


def _utf8(raw: bytes, what: str) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise FlatBufferError(f"{what} is not UTF-8") from None


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
        return Manifest(header, id12(fb.Id(), "id"), len(raw), infos, source.dictionary,
                        source.compression_algorithm, byte_vector(fb, 12), source, len(payload))


def iter_chunk_refs(raw: bytes, name: str = "<manifest>") -> Iterator[tuple[NodeId, ChunkRef]]:
    """Every (node id, ref) of a whole manifest file's bytes: the benchmark's entry point."""
    manifest = decode_manifest(raw, name)
    for info in manifest.arrays:
        yield from zip(itertools.repeat(info.node_id), manifest.chunk_refs(info.node_id))


