"""Virtual chunk refs brought back as native chunks (``zs restore --materialize-virtual``): each ref whose
range the archive keeps (family ``E``, format 7) becomes a native ref to a chunk file holding exactly
those bytes, so the restored repository needs none of the sources; the others stay virtual. One chunk
file per kept range (an alias shares the file of the range whose bytes it names), named by a hash of
that range's key: a restore writes the same files every time."""

from __future__ import annotations

from hashlib import blake2b

import numpy as np

from zsarchive.archive.format import tuples
from zsarchive.archive.format.pieces import kept_ranges, read_virtual
from zsarchive.archive.format.views import VirtualRangeKey
from zsarchive.archive.read.reader import ArchiveReader
from zsarchive.errors import ZSCorrupt
from zsarchive.icechunk import ids
from zsarchive.icechunk.manifest import RefBatch
from zsarchive.icechunk.model import ChunkRef, RefKind


class Materializer:
    """The kept virtual ranges of an archive, and the chunk files that replace them."""

    def __init__(self, reader: ArchiveReader):
        self.reader = reader
        self.kept = kept_ranges(reader.zs) if reader.keeps_virtual_data else {}
        self.files: dict[str, VirtualRangeKey] = {}
        """Chunk id -> the kept range whose bytes it holds."""
        self._ids: dict[tuple, str] = {}

    def chunk_id(self, key: tuple) -> str | None:
        """The chunk file replacing the virtual range ``key`` (None: the archive does not keep it)."""
        target = self.kept.get(key)
        if target is None:
            return None
        found = self._ids.get(target)
        if found is None:
            found = self._ids[target] = ids.encode(blake2b(tuples.encode(target), digest_size=12).digest())
            self.files[found] = VirtualRangeKey(*target)
        return found

    def refs(self, refs: RefBatch | list[ChunkRef]) -> RefBatch | list[ChunkRef]:
        """``refs`` with every virtual ref whose range the archive keeps made native."""
        if not self.kept:
            return refs
        if not isinstance(refs, RefBatch):
            return [self._ref(ref) for ref in refs]
        rows = [i for i, kind in enumerate(refs.kind) if kind is RefKind.VIRTUAL]
        if not rows:
            return refs
        kind, chunk_id, location = list(refs.kind), list(refs.chunk_id), list(refs.location)
        etag, modified = list(refs.checksum_etag), list(refs.checksum_last_modified)
        offset = refs.offset.copy()
        offsets, lengths = refs.offset.tolist(), refs.length.tolist()
        for i in rows:
            found = self.chunk_id((location[i], offsets[i], lengths[i], etag[i], modified[i]))
            if found is not None:
                kind[i], chunk_id[i], location[i], etag[i], modified[i], offset[i] = \
                    RefKind.NATIVE, found, None, None, None, 0
        return refs._replace(kind=kind, chunk_id=chunk_id, location=location, offset=np.asarray(offset),
                             checksum_etag=etag, checksum_last_modified=modified)

    def _ref(self, ref: ChunkRef) -> ChunkRef:
        if ref.kind is not RefKind.VIRTUAL:
            return ref
        found = self.chunk_id((ref.location, ref.offset, ref.length, ref.checksum_etag, ref.checksum_last_modified))
        if found is None:
            return ref
        return ref._replace(kind=RefKind.NATIVE, chunk_id=found, location=None, offset=0, checksum_etag=None,
                            checksum_last_modified=None)

    def pieces(self, chunk_id: str) -> list[bytes | memoryview]:
        """The bytes of a chunk file that replaces a kept range (a view into the archive's map where it is one)."""
        key = self.files[chunk_id]
        data = read_virtual(self.reader.zs, key, key.offset, key.stop, views=True)
        if data is None:
            raise ZSCorrupt(f"{self.reader.name}: virtual range {key.location} [{key.offset}, {key.stop}) "
                            "is no longer kept")
        return [data]
