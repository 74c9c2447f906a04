"""FsspecTransport against moto's S3 server on loopback (s3fs through fsspec)."""

from __future__ import annotations

import os

import boto3
import moto.server as moto_server
import pytest

from servers import free_port
from zsarchive.errors import ZSCorrupt, ZSError
from zsarchive.transport import FsspecTransport, open_transport

DATA = os.urandom(200_000)


@pytest.fixture(scope="module")
def s3():
    """moto's S3 server on 127.0.0.1 with bucket ``zsbucket`` holding ``data.bin``; yields a boto3 client."""
    port = free_port()
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    endpoint = f"http://127.0.0.1:{port}"
    env = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
           "AWS_DEFAULT_REGION": "us-east-1", "AWS_ENDPOINT_URL": endpoint}
    saved = {key: os.environ.get(key) for key in env}
    os.environ.update(env)
    client = boto3.client("s3", endpoint_url=endpoint)
    client.create_bucket(Bucket="zsbucket")
    client.put_object(Bucket="zsbucket", Key="data.bin", Body=DATA)
    yield client
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value
    server.stop()


def test_open_transport_routes_s3_urls_to_fsspec(s3):
    transport = open_transport("s3://zsbucket/data.bin")
    assert isinstance(transport, FsspecTransport)
    transport.close()


def test_head_tail_reads_and_batches(s3):
    transport = FsspecTransport("s3://zsbucket/data.bin")
    head, tail = transport.read_head_tail(1000, 3000)
    assert head == DATA[:1000] and tail == DATA[-3000:] and transport.size == len(DATA)
    requests = transport.stats.requests
    assert requests == 2
    assert transport.read(500, 100) == DATA[500:600]  # held from the head
    assert transport.read(70_000, 5000) == DATA[70_000:75_000]
    ranges = [(10_000 + i * 2000, 1500) for i in range(10)] + [(150_000, 10)]
    assert transport.read_ranges(ranges) == [DATA[o:o + n] for o, n in ranges]
    assert transport.stats.requests == requests + 1 + 2  # the ten near ranges share one request
    transport.close()


def test_missing_object_is_one_line(s3):
    with pytest.raises(ZSError, match=r"^s3://zsbucket/nope\.zs: not found$"):
        FsspecTransport("s3://zsbucket/nope.zs").read_head_tail(10, 10)


def test_object_replaced_while_reading_is_detected(s3):
    s3.put_object(Bucket="zsbucket", Key="changing.bin", Body=DATA)
    transport = FsspecTransport("s3://zsbucket/changing.bin")
    transport.read_head_tail(10, 10)
    assert transport.read(1000, 10) == DATA[1000:1010]
    s3.put_object(Bucket="zsbucket", Key="changing.bin", Body=DATA[::-1])
    with pytest.raises(ZSCorrupt, match=r"s3://zsbucket/changing\.bin: file changed while reading"):
        transport.read(2000, 10)
    transport.close()
