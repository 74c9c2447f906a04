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


def test_a_streamed_file_is_written_as_its_buffers_come(tmp_path, monkeypatch):
    """64 MiB in buffers of 1 MiB (a chunk file's pieces, made as they are asked for): no write is handed
    more than about 8 MiB, so memory does not follow the file's length."""
    real = os.writev
    asked = []

    def writev(fd, buffers):
        asked.append(sum(map(len, buffers)))
        return real(fd, buffers)

    monkeypatch.setattr(os, "writev", writev)
    with open(tmp_path / "f", "wb") as handle:
        write_all(handle.fileno(), (bytes([i]) * (1 << 20) for i in range(64)))
    assert max(asked) <= 9 << 20 and len(asked) >= 7, asked
    data = (tmp_path / "f").read_bytes()
    assert len(data) == 64 << 20 and data[:: 1 << 20] == bytes(range(64))
