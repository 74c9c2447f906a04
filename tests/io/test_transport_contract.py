"""One contract for every way zsarchive reads a ZS file's bytes: each backend's class below subclasses
:class:`TransportContract` and only says how to open an object holding given bytes (a local file,
a file object, nginx over HTTP, moto's S3 server through obstore and through fsspec), and the one
line a missing object gives; the remote ones also promise (:class:`ChangeContract`) to notice an
object replaced while it is read. Backend-specific behaviour (requests sent, retries, connection
reuse) is tested beside each backend, not here."""

from __future__ import annotations

import io
import os
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from toolkit.servers import moto_s3, nginx_server  # noqa: F401
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
                assert got == (data[:head], data[len(data) - min(tail, len(data)) :] if tail else b""), name
                assert transport.size == len(data), name
            finally:
                transport.close()

    def test_exact_reads_anywhere(self):
        transport = self.open("data")
        try:
            transport.read_head_tail(100, 100)
            for offset, length in [(0, 1), (12_345, 50_000), (len(DATA) - 1, 1), (len(DATA), 0), (5, 0)]:
                assert transport.read(offset, length) == DATA[offset : offset + length]
        finally:
            transport.close()

    def test_ranges_come_back_in_the_order_asked(self):
        transport = self.open("data")
        try:
            transport.read_head_tail(0, 0)
            ranges = [(250_000, 10), (3, 7), (100_000, 60_000), (3, 7), (0, 0), (299_990, 10)]
            assert transport.read_ranges(ranges) == [DATA[o : o + n] for o, n in ranges]
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
            assert got == [DATA[o : o + n] for o, n in wanted]
        finally:
            transport.close()


class LocatedContract(TransportContract):
    """What a transport over an object it locates by name promises besides."""

    missing: str
    """The whole one-line error reading a missing object gives, ``{url}`` standing for its location."""

    def location(self, name: str) -> str:
        """Where the object ``name`` lives, as an error names it."""
        raise NotImplementedError

    def test_a_missing_object_is_one_line_naming_it(self):
        with pytest.raises(ZSError) as caught:
            transport = self.open("nope")
            transport.read_head_tail(10, 10)
        assert str(caught.value) == self.missing.format(url=self.location("nope"))


class ChangeContract(LocatedContract):
    """What a transport over a shared, mutable store promises besides."""

    def replace(self, name: str, data: bytes) -> None:
        """Replace the object ``name`` by one holding ``data``."""
        raise NotImplementedError

    def test_an_object_replaced_while_reading_is_detected(self):
        self.replace("changing", DATA)
        transport = self.open("changing")
        try:
            transport.read_head_tail(10, 10)
            assert transport.read(1000, 10) == DATA[1000:1010]
            self.replace("changing", DATA[::-1])  # same length, new content
            with pytest.raises(ZSCorrupt) as caught:
                transport.read(2000, 10)
            assert str(caught.value).startswith(f"{self.location('changing')}: file changed while reading")
        finally:
            transport.close()


class TestLocalFile(LocatedContract):
    missing = "{url}: cannot open: No such file or directory"

    @pytest.fixture(autouse=True)
    def files(self, tmp_path):
        for name, data in SIZES.items():
            (tmp_path / name).write_bytes(data)
        self.dir = tmp_path

    def open(self, name):
        return LocalFile(self.location(name))

    def location(self, name):
        return str(self.dir / name)


class TestFileObject(TransportContract):
    def open(self, name):
        return FileObjectTransport(io.BytesIO(SIZES[name]))


class TestHTTP(ChangeContract):
    missing = "{url}: HTTP 404 Not Found"

    @pytest.fixture(autouse=True)
    def served(self, nginx_server):  # noqa: F811
        for name, data in SIZES.items():
            (nginx_server.root / name).write_bytes(data)
        self.server = nginx_server

    def open(self, name):
        return HTTPTransport(self.location(name))

    def location(self, name):
        return self.server.url(name)

    def replace(self, name, data):
        path = self.server.root / name
        changed = path.exists()
        path.write_bytes(data)
        if changed:  # nginx's ETag is its mtime and size: move the mtime on
            later = time.time() + 5
            os.utime(path, (later, later))


@pytest.fixture(scope="module")
def bucket():
    with moto_s3({"contract": SIZES}) as client:
        yield client


class TestObjectStore(ChangeContract):
    missing = "{url}: no such object"

    @pytest.fixture(autouse=True)
    def s3(self, bucket):
        self.client = bucket

    def open(self, name):
        return ObjectTransport(self.location(name))

    def location(self, name):
        return f"s3://contract/{name}"

    def replace(self, name, data):
        self.client.put_object(Bucket="contract", Key=name, Body=data)


class TestFsspec(TestObjectStore):
    missing = "{url}: not found"

    def open(self, name):
        return FsspecTransport(self.location(name), skip_instance_cache=True)
