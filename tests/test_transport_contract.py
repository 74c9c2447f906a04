"""One contract for every way zsarchive reads a ZS file's bytes: each backend's class below subclasses
:class:`TransportContract` and only says how to open an object holding given bytes (a local file,
a file object, nginx over HTTP, moto's S3 server through obstore and through fsspec)."""

from __future__ import annotations

import io
import os
from concurrent.futures import ThreadPoolExecutor

import pytest

from servers import moto_s3, nginx_server  # noqa: F401
from zsarchive.errors import ZSCorrupt, ZSError
from zsarchive.io import FileObjectTransport, FsspecTransport, HTTPTransport, LocalFile, ObjectTransport
from zsarchive.io.base import Transport

DATA = os.urandom(300_000)
SIZES = {"data": DATA, "empty": b"", "three": b"abc"}


class TransportContract:
    """What every Transport promises, whatever carries the bytes."""

    def open(self, name: str) -> Transport:
        """A fresh transport over the object holding ``SIZES[name]``."""
        raise NotImplementedError

    @pytest.mark.parametrize("head, tail", [(0, 0), (1000, 3000), (10**6, 10**6), (0, 77), (64, 0)])
    def test_head_and_tail_then_size(self, head, tail):
        for name, data in SIZES.items():
            transport = self.open(name)
            try:
                got = transport.read_head_tail(head, tail)
                assert got == (data[:head], data[len(data) - min(tail, len(data)):] if tail else b""), name
                assert transport.size == len(data), name
            finally:
                transport.close()

    def test_exact_reads_anywhere(self):
        transport = self.open("data")
        try:
            transport.read_head_tail(100, 100)
            for offset, length in [(0, 1), (12_345, 50_000), (len(DATA) - 1, 1), (len(DATA), 0), (5, 0)]:
                assert transport.read(offset, length) == DATA[offset:offset + length]
        finally:
            transport.close()

    def test_ranges_come_back_in_the_order_asked(self):
        transport = self.open("data")
        try:
            transport.read_head_tail(0, 0)
            ranges = [(250_000, 10), (3, 7), (100_000, 60_000), (3, 7), (0, 0), (299_990, 10)]
            assert transport.read_ranges(ranges) == [DATA[o:o + n] for o, n in ranges]
        finally:
            transport.close()

    @pytest.mark.parametrize("offset, length", [(len(DATA) - 5, 10), (len(DATA) + 1, 0), (-1, 5), (0, -1)])
    def test_reads_past_the_end_are_corrupt_not_short(self, offset, length):
        transport = self.open("data")
        try:
            transport.read_head_tail(0, 0)
            with pytest.raises(ZSCorrupt, match="runs past the end"):
                transport.read(offset, length)
            with pytest.raises(ZSCorrupt, match="runs past the end"):
                transport.read_ranges([(0, 1), (offset, length)])
        finally:
            transport.close()

    def test_concurrent_readers_share_one_transport(self):
        transport = self.open("data")
        try:
            transport.read_head_tail(10, 10)
            wanted = [(i * 7919 % (len(DATA) - 5000), 1 + i * 131 % 5000) for i in range(64)]
            with ThreadPoolExecutor(8) as pool:
                got = list(pool.map(lambda r: transport.read(*r), wanted))
            assert got == [DATA[o:o + n] for o, n in wanted]
        finally:
            transport.close()


class TestLocalFile(TransportContract):
    @pytest.fixture(autouse=True)
    def files(self, tmp_path):
        for name, data in SIZES.items():
            (tmp_path / name).write_bytes(data)
        self.dir = tmp_path

    def open(self, name):
        return LocalFile(str(self.dir / name))


class TestFileObject(TransportContract):
    def open(self, name):
        return FileObjectTransport(io.BytesIO(SIZES[name]))


class TestHTTP(TransportContract):
    @pytest.fixture(autouse=True)
    def served(self, nginx_server):  # noqa: F811
        for name, data in SIZES.items():
            (nginx_server.root / name).write_bytes(data)
        self.server = nginx_server

    def open(self, name):
        return HTTPTransport(self.server.url(name))


@pytest.fixture(scope="module")
def bucket():
    with moto_s3({"contract": SIZES}):
        yield


class TestObjectStore(TransportContract):
    @pytest.fixture(autouse=True)
    def s3(self, bucket):
        pass

    def open(self, name):
        return ObjectTransport(f"s3://contract/{name}")


class TestFsspec(TransportContract):
    @pytest.fixture(autouse=True)
    def s3(self, bucket):
        pass

    def open(self, name):
        return FsspecTransport(f"s3://contract/{name}", skip_instance_cache=True)


def test_a_missing_object_is_a_one_line_error_everywhere(tmp_path, nginx_server, bucket):  # noqa: F811
    with pytest.raises(ZSError):
        LocalFile(str(tmp_path / "nope"))
    for transport in (HTTPTransport(nginx_server.url("nope")), ObjectTransport("s3://contract/nope"),
                      FsspecTransport("s3://contract/nope", skip_instance_cache=True)):
        with pytest.raises(ZSError) as err:
            transport.read_head_tail(10, 10)
        assert "\n" not in str(err.value) and "nope" in str(err.value)
