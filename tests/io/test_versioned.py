"""Local reads that say which version of the file answered: ``read_file_into`` fills the buffers it is
given in place, across more buffers than one ``preadv`` takes, stops at the file's end, and refuses what is
not a regular file."""

from __future__ import annotations

import os

import pytest

from zsarchive.errors import ZSError
from zsarchive.io.versioned import IOV_MAX, read_file_into


def test_buffers_are_filled_in_order_beyond_one_preadv_and_up_to_the_end(tmp_path):
    data = os.urandom(3 * IOV_MAX + 5)
    path = tmp_path / "f.bin"
    path.write_bytes(data)
    many = [bytearray(1) for _ in range(2 * IOV_MAX + 3)]  # more buffers than one call fills
    tail = [bytearray(4), bytearray(10)]  # the second runs past the end
    version, got = read_file_into(str(path), [(0, [memoryview(b) for b in many]), (len(data) - 6, tail)])
    assert got == [len(many), 6]
    assert b"".join(many) == data[: len(many)]
    assert bytes(tail[0]) + bytes(tail[1][:2]) == data[-6:] and bytes(tail[1][2:]) == bytes(8)
    assert version.local and version.etag is not None


def test_a_directory_or_fifo_is_refused_in_one_line(tmp_path):
    fifo = tmp_path / "p"
    os.mkfifo(fifo)
    for path in (tmp_path, fifo):
        with pytest.raises(ZSError, match="cannot read .*") as caught:
            read_file_into(str(path), [(0, [memoryview(bytearray(4))])])
        assert "\n" not in str(caught.value)
