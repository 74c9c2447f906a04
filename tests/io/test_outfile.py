"""Writing buffers to a descriptor in few system calls (:func:`zsarchive.io.outfile.write_all`)."""

from __future__ import annotations

import os

from toolkit.syscalls import short_writev
from zsarchive.io.outfile import write_all


def test_buffers_are_written_whole_when_writev_writes_less_than_asked(tmp_path, monkeypatch):
    """writev may write fewer bytes than asked (a signal, a nearly full disk): the rest follows, in
    order, empty buffers and every buffer type included, and never more than 1,024 buffers a call."""
    asked = short_writev(monkeypatch)
    parts = [b"head", memoryview(os.urandom(5000)), b"", bytearray(b"tail" * 500)] + [b"x"] * 1500
    with open(tmp_path / "f", "wb") as handle:
        write_all(handle.fileno(), parts)
    assert (tmp_path / "f").read_bytes() == b"".join(bytes(p) for p in parts)
    assert max(asked) == 1024
