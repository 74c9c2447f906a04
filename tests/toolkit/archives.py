"""Archives compared as records: a chain of fragments against the full export of the same history."""

from __future__ import annotations

from pathlib import Path

from zsarchive.archive.format import schema as S
from zsarchive.archive.write.incremental import consolidate
from zsarchive.zs.reader import ZS


def records(path: Path) -> tuple[list[bytes], tuple]:
    """A standalone archive's records but its header, and its header's value without the export time."""
    with ZS(str(path)) as z:
        out = list(z)
    header = S.split(out[-1])[2]
    assert out[-1][:1] == S.HEADER
    return out[:-1], header[:2] + header[3:]


def assert_chain_is_full_export(fragment: Path, full: Path, out: Path) -> None:
    """The chain ending at ``fragment`` consolidates (into ``out``) to the records of ``full``."""
    consolidate(fragment, out)
    ours, our_header = records(out)
    theirs, their_header = records(full)
    assert ours == theirs
    assert our_header == their_header
