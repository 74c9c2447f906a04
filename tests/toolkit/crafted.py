"""Archives from strangers: a genuine export's records, edited, written again with zsarchive's own writer
(every rule of the ZS format holds, the header's counts are the records', pieces of chunk files sit in
blocks of their own as an export cuts them), so that only the edit is wrong."""

from __future__ import annotations

import heapq
import os
from pathlib import Path
from typing import Callable, Iterable

from zsarchive.archive.format import schema as S
from zsarchive.archive.write.exporter import write_archive
from zsarchive.archive.write.options import WriteOptions
from zsarchive.archive.write.incremental import record_lists
from zsarchive.zs.reader import ZS

Record = tuple[bytes, tuple, tuple, int]
"""(family, key, value, record version)."""


def read_records(path: Path) -> tuple[dict, list[Record]]:
    """The ZS metadata and every record of the archive at ``path``, decoded."""
    with ZS(str(path)) as z:
        return z.metadata, [(*S.split(rec), S.record_version(rec)) for rec in z]


def counted(records: list[Record], more: dict[bytes, int] | None = None) -> list[Record]:
    """``records`` with the header record's counts made those of the other records (and of ``more``, records
    of each family given as a stream)."""
    counts: dict[str, int] = {S.FAMILY_NAMES[family]: n for family, n in (more or {}).items()}
    for family, *_ in records:
        if family != S.HEADER:
            counts[S.FAMILY_NAMES[family]] = counts.get(S.FAMILY_NAMES[family], 0) + 1
    return [
        (f, k, (*v[:4], tuple(sorted(counts.items())), *v[5:]) if f == S.HEADER else v, version)
        for f, k, v, version in records
    ]


def write_records(
    path: Path,
    metadata: dict,
    records: list[Record],
    *,
    recount: bool = True,
    codec: str = "deflate",
    stored: bool = True,
    streamed: Iterable[bytes] = (),
    more: dict[bytes, int] | None = None,
) -> Path:
    """``records`` (duplicates kept: a crafted archive may hold two records of one key) as an archive at
    ``path``, with the records ``streamed`` (encoded, in key order, ``more`` of each family: never all in
    memory at once); ``stored`` False compresses the blocks of chunk pieces too."""
    encoded = sorted(
        S.record(f, k, v, version) for f, k, v, version in (counted(records, more) if recount else records)
    )
    write_archive(
        Path(path),
        record_lists(heapq.merge(encoded, streamed), stored, os.fspath(path)),
        metadata,
        WriteOptions(codec=codec, chunk_codec="none" if stored else "same").checked(),
    )
    return Path(path)


def craft(source: Path, path: Path, edit: Callable[[list[Record]], object], **options) -> Path:
    """The archive ``source`` with ``edit`` applied to its records (in place), written at ``path``."""
    metadata, records = read_records(source)
    edit(records)
    return write_records(path, metadata, records, **options)


def find(records: list[Record], family: bytes, where: Callable[[tuple, tuple], bool] = lambda k, v: True) -> int:
    """The position of the first record of ``family`` whose key and value satisfy ``where``."""
    return next(i for i, (f, k, v, _) in enumerate(records) if f == family and where(k, v))


def target_is_empty(path: Path) -> bool:
    """Nothing at ``path``, or an empty directory, and no hidden temporary beside it."""
    beside = [p for p in path.parent.iterdir() if p.name.startswith(f".{path.name}")]
    return not beside and (not path.exists() or (path.is_dir() and not any(path.iterdir())))
