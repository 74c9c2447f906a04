"""Archives on S3: ObjectTransport (obstore, the default for s3://, gs://, az://) and FsspecTransport
(s3fs, the fallback for other schemes) against moto's S3 server on loopback."""

from __future__ import annotations

import functools
import os
import subprocess

import pytest
from click.testing import CliRunner

from toolkit.servers import azurite, moto_s3  # noqa: F401
from zsarchive import ZS
from zsarchive.cli import main
from zsarchive.errors import ZSError
from zsarchive.io import FsspecTransport, ObjectTransport, open_transport

DATA = os.urandom(200_000)


@pytest.fixture(scope="module")
def s3():
    """moto's S3 server on 127.0.0.1 with bucket ``zsbucket`` holding ``data.bin``; yields a boto3 client."""
    with moto_s3({"zsbucket": {"data.bin": DATA}}) as client:
        yield client


# fsspec keeps one filesystem per set of options: a fresh one sees this module's server
TRANSPORTS = pytest.mark.parametrize(
    "transport_class", [ObjectTransport, functools.partial(FsspecTransport, skip_instance_cache=True)]
)


def test_open_transport_routes_object_store_urls_to_obstore(s3, monkeypatch):
    monkeypatch.setenv("AZURE_STORAGE_ACCOUNT_NAME", "someone")
    for url in ("s3://zsbucket/data.bin", "gs://zsbucket/data.bin", "az://zsbucket/data.bin"):
        transport = open_transport(url)
        assert isinstance(transport, ObjectTransport)
        transport.close()
    assert isinstance(open_transport("memory://zsbucket/data.bin"), FsspecTransport)


@TRANSPORTS
def test_head_tail_are_two_requests_and_near_ranges_share_one(s3, transport_class):
    """The reads themselves are the transport contract's (test_transport_contract.py); here: what they cost."""
    transport = transport_class("s3://zsbucket/data.bin")
    transport.read_head_tail(1000, 3000)
    requests = transport.stats.requests
    assert requests == 2
    assert transport.read(500, 100) == DATA[500:600]  # held from the head
    assert transport.read(70_000, 5000) == DATA[70_000:75_000]
    ranges = [(10_000 + i * 2000, 1500) for i in range(10)] + [(150_000, 10)]
    assert transport.read_ranges(ranges) == [DATA[o : o + n] for o, n in ranges]
    assert transport.stats.requests == requests + 1 + 2  # the ten near ranges share one request
    transport.close()


def test_a_missing_bucket_is_one_line(s3):
    with pytest.raises(ZSError, match=r"^s3://no-such-bucket/x\.zs: no such bucket or container$"):
        ObjectTransport("s3://no-such-bucket/x.zs").read_head_tail(10, 10)


def test_zs_file_on_s3_reads_like_the_local_file(s3, tmp_path, reference_zs):
    records = sorted(b"%06d record" % (i * 3) for i in range(5000))
    source = tmp_path / "records.txt"
    source.write_bytes(b"".join(r + b"\n" for r in records))
    local = tmp_path / "records.zs"
    subprocess.run(
        [
            str(reference_zs),
            "make",
            "--no-spinner",
            "--approx-block-size=1000",
            "--codec=deflate",
            "{}",
            str(source),
            str(local),
        ],
        check=True,
        capture_output=True,
    )
    s3.put_object(Bucket="zsbucket", Key="records.zs", Body=local.read_bytes())
    runner = CliRunner()
    for command in (["dump"], ["info"], ["validate"], ["dump", "--prefix=0012"]):
        here = runner.invoke(main, [*command, str(local)])
        there = runner.invoke(main, [*command, "s3://zsbucket/records.zs"])
        assert here.exit_code == 0 and there.exit_code == 0, there.output
        assert there.stdout_bytes == here.stdout_bytes
    for transport in (
        ObjectTransport("s3://zsbucket/records.zs"),
        FsspecTransport("s3://zsbucket/records.zs", skip_instance_cache=True),
    ):
        with ZS(transport) as zs:
            assert list(zs.search(start=b"001000", stop=b"002000")) == [
                r for r in records if b"001000" <= r < b"002000"
            ]
            assert zs.transport.stats.requests <= 2 + 2  # open, then one run of adjacent blocks
    with ZS(url="s3://zsbucket/records.zs") as zs:
        assert list(zs.search(start=b"001000", stop=b"002000")) == [r for r in records if b"001000" <= r < b"002000"]
        assert zs.transport.stats.requests <= 2 + 2  # open, then one run of adjacent blocks


def test_an_object_in_azure_is_read_without_suffix_ranges(azurite, monkeypatch):  # noqa: F811
    """Azure serves no ``bytes=-N`` range: the tail is asked for by offset, once the head gave the length."""
    from azure.storage.blob import BlobServiceClient

    monkeypatch.setenv("AZURE_STORAGE_CONNECTION_STRING", azurite["connection"])
    container = BlobServiceClient.from_connection_string(azurite["connection"]).get_container_client("lab")
    container.upload_blob("transport/data.bin", DATA, overwrite=True)
    container.upload_blob("transport/empty.bin", b"", overwrite=True)
    transport = ObjectTransport("az://lab/transport/data.bin")
    assert transport.read_head_tail(1000, 3000) == (DATA[:1000], DATA[-3000:])
    assert transport.size == len(DATA) and transport.read(70_000, 5000) == DATA[70_000:75_000]
    transport.close()
    empty = ObjectTransport("az://lab/transport/empty.bin")
    assert empty.read_head_tail(10, 10) == (b"", b"") and empty.size == 0
    empty.close()
