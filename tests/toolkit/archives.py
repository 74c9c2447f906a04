"""Archives compared as records: a chain of fragments against the full export of the same history."""

from __future__ import annotations

from pathlib import Path

from zsarchive.archive.format import schema as S
from zsarchive.archive.write.incremental import consolidate
from zsarchive.zs.reader import ZS
from zsarchive.zs.writer import ZSWriter


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


SNAPSHOT = "A" * 19 + "0"
"""A snapshot id in its canonical spelling (the last character of a 12-byte id holds 4 zero bits)."""
NODE = "N0DE" + "0" * 9
"""A node id in its canonical spelling."""
MANIFEST = "M" * 19 + "0"
"""A manifest id in its canonical spelling."""


def history_archive(path: Path, snapshots: dict[str, tuple], nodes: list[bytes] = (), main: str = "A" * 20) -> Path:
    """A format-2 archive holding branch main at snapshot ``main`` and the given snapshot records (values
    as written, however malformed: for the hostile-input tests)."""
    records = [S.record(S.REFS, ("branch", "main"), (main,)), S.record(S.HEADER, (), (2, 2, 0, "test", ()))]
    records += [S.record(S.SNAPSHOT, (sid,), value) for sid, value in snapshots.items()]
    with ZSWriter(str(path), {S.METADATA_KEY: {"format_version": 2}}, codec="none") as writer:
        writer.add_records(sorted([*records, *nodes]))
        writer.finish()
    return path
