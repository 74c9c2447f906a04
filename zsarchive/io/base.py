"""The transport interface: random-access reads of one immutable object."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Sequence

from zsarchive.errors import ZSCorrupt, ZSError


class ObjectMissing(ZSError):
    """The object (or file) asked for is not there, where its bucket or directory is."""


class Transport(ABC):
    """Random access to one immutable byte object (a file, a URL).

    Implementations must be safe to call from several threads at once.
    """

    name: str
    size: int

    @abstractmethod
    def read(self, offset: int, length: int) -> bytes:
        """Return exactly ``length`` bytes at ``offset``, or raise ZSCorrupt if the object is shorter."""

    def read_head_tail(self, head: int, tail: int) -> tuple[bytes, bytes]:
        """Return up to ``head`` bytes from the start and up to ``tail`` bytes from the end.

        The first call a reader makes: network transports issue both requests concurrently
        and learn ``size`` from the answers, so ``size`` is valid only after this call.
        """
        head = min(head, self.size)
        tail = min(tail, self.size)
        return self.read(0, head), self.read(self.size - tail, tail)

    def read_ranges(self, ranges: Sequence[tuple[int, int]]) -> list[bytes]:
        """Read several ``(offset, length)`` ranges; transports with latency override this to batch."""
        return [self.read(offset, length) for offset, length in ranges]

    def close(self) -> None:
        """Release the underlying resources."""

    def _check_range(self, offset: int, length: int) -> None:
        if offset < 0 or length < 0 or offset + length > self.size:
            raise ZSCorrupt(
                f"{self.name}: offset {offset}: read of {length} bytes runs past the end of the {self.size}-byte file"
            )
