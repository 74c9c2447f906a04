"""What a writer of archives is asked for: how the ZS file is written (:class:`WriteOptions`, shared by
export and consolidation) and what an export reads and writes (:class:`ExportOptions`, the keyword
arguments of :func:`zsarchive.archive.export`)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping, TypeVar

from zsarchive.errors import ZSError
from zsarchive.zs.format import codecs
from zsarchive.zs.pipeline import resolve_parallelism

CODECS = codecs.NAMES
"""Block codecs an archive may use; the default, deflate, is standard ZS (any ZS reader opens the file)."""
CHUNK_CODECS = ("none", "same")
"""How blocks of embedded chunk bytes are written: uncompressed (the default), or with the archive's codec."""
_Options = TypeVar("_Options", bound="WriteOptions")


@dataclass(frozen=True, kw_only=True)
class WriteOptions:
    """How the ZS file is written. ``codec``: block compression (None: deflate for an export, the
    fragment's for a consolidation); ``chunk_codec``: ``none`` stores blocks of embedded chunk bytes
    uncompressed (zarr compressed them already), ``same`` compresses them with ``codec`` like every other
    block; ``parallelism``: threads compressing (``"guess"``: one per core); ``overwrite``: replace a file
    at the target (by default an existing file is refused: fragments built on a replaced archive no
    longer open)."""

    codec: str | None = None
    compress_level: int | str | None = None
    chunk_codec: str = "none"
    parallelism: int | str = "guess"
    approx_block_size: int = 256 * 1024
    branching_factor: int = 1024
    overwrite: bool = False

    def checked(self, default_codec: str = "deflate") -> WriterSettings:
        """The options as the writer takes them: ``default_codec`` where none is given, ``parallelism``
        resolved; one-line ZSErrors for an unknown codec."""
        codec = self.codec or default_codec
        if codec not in CODECS:
            raise ZSError(f"unknown codec {codec!r}: choose one of {', '.join(CODECS)}")
        if self.chunk_codec not in CHUNK_CODECS:
            raise ZSError(f"unknown chunk codec {self.chunk_codec!r}: choose one of {', '.join(CHUNK_CODECS)}")
        return WriterSettings(
            codec,
            self.compress_level,
            self.chunk_codec,
            resolve_parallelism(self.parallelism),
            self.approx_block_size,
            self.branching_factor,
            self.overwrite,
        )


@dataclass(frozen=True)
class WriterSettings:
    """:class:`WriteOptions` with every choice made: the codec named, the threads counted."""

    codec: str
    compress_level: int | str | None
    chunk_codec: str
    parallelism: int
    approx_block_size: int
    branching_factor: int
    overwrite: bool


@dataclass(frozen=True, kw_only=True)
class ExportOptions(WriteOptions):
    """What an export writes and how: the keyword arguments of :func:`zsarchive.archive.export`, the
    fields of :class:`WriteOptions` among them.

    ``progress(done, total)`` is called now and then with counts of records (chunk refs dominate).
    ``export_time`` (microseconds since 1970 UTC) defaults to now: it is the only field of the
    archive that differs between two exports of the same repository. ``parallelism``: worker
    processes decoding (for a repository in object storage, only from
    :data:`~zsarchive.archive.write.engine.SPAWN_REFS` chunk refs on) and threads compressing, or
    ``"guess"`` (one per core, the default, as for ``zs export``). ``client``: a
    ``distributed.Client`` whose cluster decodes instead (the archive is the same byte for byte).
    ``base``: an archive of the same repository (or a fragment): write a fragment holding only what
    it lacks (:mod:`zsarchive.archive.write.incremental`); ``base_link``: how the fragment names its base
    when it will not be read where it is written (default: the base's path relative to the archive's
    directory), e.g. ``"old.zs"`` for a fragment put beside its base afterwards. ``authorize``: location prefixes (or prefix ->
    storage options) under which the indexes of virtual shards are read and kept (a reader then
    reads an inner chunk of such a shard with one request). ``include_virtual``: keep the bytes of every
    virtual chunk ref under those prefixes (format 7), each range read once and checked against the ref's
    checksum; ``max_virtual_bytes`` refuses, before reading any, an export that would keep more;
    ``virtual_progress(done, total)`` counts their bytes. ``storage_options`` and ``anon`` say how to
    reach a remote repository.
    """

    include_chunks: bool = False
    export_time: int | None = None
    progress: Callable[[int, int], None] | None = None
    sort_memory: int = 128 << 20
    storage_options: dict[str, str] | None = None
    anon: bool = False
    client: object = None
    base: str | os.PathLike | None = None
    base_link: str | None = None
    authorize: Iterable[str] | Mapping[str, Mapping[str, str]] = ()
    include_virtual: bool = False
    max_virtual_bytes: int | None = None
    virtual_progress: Callable[[int, int], None] | None = None


def given(kind: type[_Options], options: _Options | None, keywords: dict[str, Any], what: str) -> _Options:
    """``options``, or ``kind(**keywords)``: a writer takes one or the other, never both (``what`` names it
    in the error)."""
    if options is None:
        return kind(**keywords)
    if keywords:
        raise ZSError(f"{what}: give options or keyword arguments, not both ({', '.join(sorted(keywords))})")
    return options
