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
from zsarchive.icechunk.manifest.refs import NATIVE, VIRTUAL, RefTable
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

    def refs(self, refs: RefTable | list[ChunkRef]) -> RefTable | list[ChunkRef]:
        """``refs`` with every virtual ref whose range the archive keeps made native."""
        if not self.kept:
            return refs
        if not isinstance(refs, RefTable):
            return [self._ref(ref) for ref in refs]
        rows = np.flatnonzero(refs.kind == VIRTUAL).tolist()
        if not rows:
            return refs
        kind, text, offset = refs.kind.copy(), refs.text.copy(), refs.offset.copy()
        etag, modified, texts = refs.etag.copy(), refs.modified.copy(), list(refs.texts)
        added: dict[str, int] = {}
        for i in rows:
            tag, time = int(refs.etag[i]), int(refs.modified[i])
            found = self.chunk_id(
                (
                    refs.texts[int(refs.text[i])],
                    int(refs.offset[i]),
                    int(refs.length[i]),
                    refs.etags[tag] if tag >= 0 else None,
                    time or None,
                )
            )
            if found is not None:
                kind[i], offset[i], etag[i], modified[i] = NATIVE, 0, -1, 0
                text[i] = added.setdefault(found, len(texts) + len(added))
        return refs._replace(
            kind=kind, text=text, texts=texts + list(added), offset=offset, etag=etag, modified=modified
        )

    def _ref(self, ref: ChunkRef) -> ChunkRef:
        if ref.kind is not RefKind.VIRTUAL:
            return ref
        found = self.chunk_id((ref.location, ref.offset, ref.length, ref.checksum_etag, ref.checksum_last_modified))
        if found is None:
            return ref
        return ref._replace(
            kind=RefKind.NATIVE,
            chunk_id=found,
            location=None,
            offset=0,
            checksum_etag=None,
            checksum_last_modified=None,
        )

    def pieces(self, chunk_id: str) -> list[bytes | memoryview]:
        """The bytes of a chunk file that replaces a kept range (a view into the archive's map where it is one)."""
        key = self.files[chunk_id]
        data = read_virtual(self.reader.zs, key, key.offset, key.stop, zero_copy=True)
        if data is None:
            raise ZSCorrupt(
                f"{self.reader.name}: virtual range {key.location} [{key.offset}, {key.stop}) is no longer kept"
            )
        return [data]
