"""The record stream from an export's stages to the writer: batches of records in file order, each of one
kind that says how it is written and counted (the writer cuts a list into blocks; a task or a chunk file
made a block of its own, raw or compressed)."""

from __future__ import annotations

import collections
import itertools
import operator
from dataclasses import dataclass
from typing import Callable, Iterable, Iterator, cast

from zsarchive.archive.format import schema
from zsarchive.archive.format.pieces import PieceBlock
from zsarchive.zs.writer import BuiltBlock, ZSWriter

_first_byte = operator.itemgetter(0)


class Batch:
    """Records on their way to the writer, after everything before them in the stream."""

    __slots__ = ()

    def count(self, counts: collections.Counter[int]) -> int:
        """The number of records, each also counted in ``counts`` by family tag."""
        raise NotImplementedError

    def write(self, writer: ZSWriter) -> None:
        """Hand the records to ``writer``."""
        raise NotImplementedError


@dataclass(slots=True)
class RecordList(Batch):
    """Sorted records the writer cuts into blocks as it cuts every record (no Python work per record)."""

    records: list[bytes]

    def count(self, counts: collections.Counter[int]) -> int:
        counts.update(map(_first_byte, self.records))
        return len(self.records)

    def write(self, writer: ZSWriter) -> None:
        writer.add_record_lists((self.records,))


@dataclass(slots=True)
class TaskBlock(RecordList):
    """Records a task cut as exactly one data block, with the writer's rule (its threads compress it)."""

    def write(self, writer: ZSWriter) -> None:
        writer.add_data_block(self.records)


@dataclass(slots=True)
class PiecesBlock(RecordList):
    """One data block of chunk file pieces (:mod:`pieces <zsarchive.archive.format.pieces>`), stored or
    compressed, its index key the first record's first ``key_length`` bytes."""

    key_length: int
    stored: bool

    @classmethod
    def of(cls, block: PieceBlock) -> PiecesBlock:
        """The batch of a block the pieces layout cut."""
        # a piece record may be a bytearray a read filled in place: the writer takes it as it takes bytes
        return cls(cast(list[bytes], block), block.key_length, block.stored)

    def write(self, writer: ZSWriter) -> None:
        writer.add_data_block(self.records, stored=self.stored, key_length=self.key_length)


@dataclass(slots=True)
class CompressedBlock(Batch):
    """A data block a task cut and compressed itself (worker processes, a cluster), records of one family."""

    block: BuiltBlock

    def count(self, counts: collections.Counter[int]) -> int:
        counts[self.block.first[0]] += self.block.count
        return self.block.count

    def write(self, writer: ZSWriter) -> None:
        writer.add_built_block(self.block)


def batched(records: Iterable[bytes], size: int = 65536) -> Iterator[RecordList]:
    """``records`` in lists of at most ``size``."""
    records = iter(records)
    while batch := list(itertools.islice(records, size)):
        yield RecordList(batch)


class Tally:
    """Records written per family tag, and progress reports as they pass. The total is what was planned
    (``planned()``, asked at every report: sorted families grow as later stages add to them) and the
    records of streams the plan could not count ahead, as they pass."""

    def __init__(self, planned: Callable[[], int], progress: Callable[[int, int], None] | None):
        self.counts: collections.Counter[int] = collections.Counter()
        self.planned = planned
        self.unplanned = 0
        self.done = 0
        self.progress = progress

    @property
    def total(self) -> int:
        """The records the archive holds, as far as is known now."""
        return self.planned() + self.unplanned

    def counted(self, batches: Iterable[Batch], unplanned: bool = False) -> Iterator[Batch]:
        """``batches`` as they pass, counted (``unplanned``: records the planned total leaves out)."""
        for batch in batches:
            n = batch.count(self.counts)
            if unplanned:
                self.unplanned += n
            yield batch
            self.done += n
            if self.progress is not None:
                self.progress(self.done, self.total)

    def by_name(self) -> dict[str, int]:
        """Records written per family name."""
        return {schema.FAMILY_NAMES[bytes((tag,))]: n for tag, n in sorted(self.counts.items())}
