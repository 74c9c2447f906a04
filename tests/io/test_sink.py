"""The writable storage layer: a local directory, moto's S3 server and Azurite on loopback behave alike --
emptiness, replacing puts, create-only puts, many puts in flight, and failures as one line naming the key."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from toolkit.places import PEERS, ROOT, require_peer
from toolkit.servers import AZURITE_KEY, free_port, moto_s3, wait_for_port
from zsarchive.errors import ZSError
from zsarchive.io.sink import AlreadyExists, LocalSink, ObjectSink, open_sink

"""The emulator's published development account key (not a secret)."""


@pytest.fixture(scope="module")
def bucket():
    with moto_s3({"dest": {}, "full": {"somewhere/x": b"1"}}) as client:
        yield client


def _s3_objects(client, bucket: str, prefix: str) -> dict[str, bytes]:
    out = {}
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        for item in page.get("Contents", []):
            out[item["Key"][len(prefix) :]] = client.get_object(Bucket=bucket, Key=item["Key"])["Body"].read()
    return out


def _local_objects(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


@pytest.fixture(scope="module")
def azure_container(tmp_path_factory):
    """Azurite's blob service on loopback with an empty container ``dest``; yields the connection string."""
    binary = require_peer(PEERS / "azurite" / "node_modules" / ".bin" / "azurite-blob", "Azurite (npm)")
    from azure.storage.blob import BlobServiceClient

    port = free_port()
    server = subprocess.Popen(
        [
            str(binary),
            "--blobHost",
            "127.0.0.1",
            "--blobPort",
            str(port),
            "--location",
            str(tmp_path_factory.mktemp("azurite")),
            "--silent",
            "--skipApiVersionCheck",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for_port(port, server)
        connection = (
            f"DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey={AZURITE_KEY};"
            f"BlobEndpoint=http://127.0.0.1:{port}/devstoreaccount1;"
        )
        BlobServiceClient.from_connection_string(connection).create_container("dest")
        yield connection
    finally:
        server.terminate()
        server.wait(timeout=30)


def _azure_objects(connection: str, prefix: str) -> dict[str, bytes]:
    from azure.storage.blob import BlobServiceClient

    container = BlobServiceClient.from_connection_string(connection).get_container_client("dest")
    return {
        b.name[len(prefix) :]: container.download_blob(b.name).readall()
        for b in container.list_blobs(name_starts_with=prefix)
    }


@pytest.fixture(params=["local", "s3", "azure"])
def target(request, tmp_path, monkeypatch):
    """(sink, function listing what it holds) for an absent directory or an unused S3 or Azure prefix."""
    if request.param == "local":
        root = tmp_path / "out"
        return open_sink(str(root)), lambda: _local_objects(root) if root.exists() else {}
    prefix = f"t/{abs(hash(request.node.name)):x}/"
    if request.param == "azure":
        connection = request.getfixturevalue("azure_container")
        monkeypatch.setenv("AZURE_STORAGE_CONNECTION_STRING", connection)
        return open_sink(f"az://dest/{prefix}"), lambda: _azure_objects(connection, prefix)
    client = request.getfixturevalue("bucket")
    return open_sink(f"s3://dest/{prefix}"), lambda: _s3_objects(client, "dest", prefix)


def test_put_put_new_and_is_empty(target):
    sink, objects = target
    assert sink.is_empty()
    sink.put("a/b/c", b"one")
    assert not sink.is_empty()
    sink.put("a/b/c", b"two")
    sink.put_new("repo", b"first")
    with pytest.raises(AlreadyExists) as err:
        sink.put_new("repo", b"second")
    assert "repo" in str(err.value) and "\n" not in str(err.value)
    assert objects() == {"a/b/c": b"two", "repo": b"first"}


def test_many_puts_in_flight(target):
    sink, objects = target
    seen = []
    items = [(f"chunks/{i:04d}", bytes([i % 256]) * (i + 1)) for i in range(200)]
    lazy = [("lazy/x", lambda: b"computed")]
    written = sink.put_all(items + lazy, done=lambda key, size: seen.append(key))
    assert written == sum(len(d) for _, d in items) + 8
    assert sorted(seen) == sorted(k for k, _ in items + lazy)
    assert objects() == {**dict(items), "lazy/x": b"computed"}


def test_a_failing_put_stops_put_all_in_one_line(target):
    sink, _ = target

    def boom():
        raise ZSError("source: gone")

    with pytest.raises(ZSError, match="source: gone"):
        sink.put_all([("ok", b"1"), ("bad", boom)] + [(f"k{i}", b"x") for i in range(100)])


@pytest.mark.parametrize("key", ["/abs", "../up", "a//b", "a/./b", ""])
def test_keys_never_leave_the_root(target, key):
    sink, objects = target
    with pytest.raises(ZSError, match="refusing object key"):
        sink.put(key, b"x")
    assert objects() == {}


def test_local_emptiness(tmp_path):
    assert LocalSink(open_sink(str(tmp_path)).location).is_empty()
    (tmp_path / ".hidden").write_bytes(b"")
    assert not open_sink(str(tmp_path)).is_empty()
    with pytest.raises(ZSError, match="not a directory"):
        open_sink(str(tmp_path / ".hidden")).is_empty()


def test_leftovers_of_a_writer_killed_midway_are_removed_and_nothing_else(tmp_path):
    """What a process killed inside ``put`` leaves (a temporary of its own naming) goes; objects whose names
    merely look alike stay."""
    sink = open_sink(str(tmp_path))
    sink.put("chunks/ABC", b"whole")
    (tmp_path / "chunks" / ".ABC.0123456789ab.tmp").write_bytes(b"who")
    kept = [".ABC.tmp", ".ABC.0123456789AB.tmp", "ABC.0123456789ab.tmp", ".zattrs"]
    for name in kept:
        (tmp_path / "chunks" / name).write_bytes(b"")
    assert sink.remove_leftovers("chunks") == 1 and sink.remove_leftovers("absent") == 0
    assert sorted(os.listdir(tmp_path / "chunks")) == sorted(kept + ["ABC"])
    with pytest.raises(ZSError, match="refusing object key"):
        sink.remove_leftovers("../chunks")


def test_local_write_failure_is_one_line_naming_the_key(tmp_path):
    (tmp_path / "file").write_bytes(b"")
    with pytest.raises(ZSError) as err:
        open_sink(str(tmp_path)).put("file/below", b"x")
    assert "file" in str(err.value) and "\n" not in str(err.value)


def test_a_full_disk_is_one_line_and_leaves_no_partial_object(tmp_path):
    """A file-size limit makes the write fail the way a full disk does (without needing one)."""
    code = (
        "import resource, signal, sys\n"
        "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
        "resource.setrlimit(resource.RLIMIT_FSIZE, (1000, 1000))\n"
        "from zsarchive.io.sink import open_sink\n"
        "from zsarchive.errors import ZSError\n"
        "try:\n"
        "    open_sink(sys.argv[1]).put_all([('small', b'x' * 10), ('chunks/big', b'x' * 5000)])\n"
        "except ZSError as exc:\n"
        "    print(exc); sys.exit(1)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "out")],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=60,
    )
    assert proc.returncode == 1, proc.stderr
    assert proc.stdout.count("\n") == 1 and "chunks/" in proc.stdout and "cannot write" in proc.stdout
    assert _local_objects(tmp_path / "out") == {"small": b"x" * 10}


def test_object_store_errors_are_one_line(bucket):
    assert not open_sink("s3://full/").is_empty()
    assert open_sink("s3://full/elsewhere").is_empty()
    with pytest.raises(ZSError) as err:
        open_sink("s3://no-such-bucket/p").put("k", b"x")
    assert "no-such-bucket/p/k" in str(err.value) and "\n" not in str(err.value)
    assert isinstance(open_sink("s3://dest/p"), ObjectSink)
    with pytest.raises(ZSError, match="plain HTTP"):
        open_sink("http://127.0.0.1:1/x")


def test_a_list_of_buffers_is_their_concatenation(target):
    sink, objects = target
    data = bytes(range(256)) * 300
    pieces = [memoryview(data)[:1000], data[1000:70000], bytearray(data[70000:]), b""]
    written = sink.put_all([("chunks/joined", pieces), ("chunks/empty", [])])
    assert written == len(data)
    assert objects() == {"chunks/joined": data, "chunks/empty": b""}


def test_a_zip_entry_from_a_list_of_buffers(tmp_path):
    import zipfile

    from zsarchive.io.location import parse_location
    from zsarchive.io.zipsink import ZipSink

    sink = ZipSink(parse_location(str(tmp_path / "out.zip")))
    data = bytes(range(256)) * 300
    assert sink.put_all([("c/0", [memoryview(data)[:5000], data[5000:]]), ("c/1", b"whole")]) == len(data) + 5
    sink.commit()
    with zipfile.ZipFile(tmp_path / "out.zip") as z:
        assert z.read("c/0") == data and z.read("c/1") == b"whole"


def test_a_directory_lists_reads_dates_and_removes_what_it_holds(target, tmp_path, monkeypatch):
    import zsarchive.io.sink as sink_module

    sink, objects = target
    assert sink.listing() == {} and sink.get("absent", 10) is None and sink.modified("absent") is None
    sink.put("a", b"12345")
    sink.put("deeper/b", b"x")
    assert sink.listing() == {"a": 5}  # the objects directly under the root only
    assert sink.get("a", 5) == b"12345"
    with pytest.raises(ZSError) as large:
        sink.get("a", 4)
    assert "\n" not in str(large.value)
    small, big = tmp_path / "small", tmp_path / "big"
    small.write_bytes(b"small file")
    big.write_bytes(os.urandom(6 << 20))
    sink.put_file_new("s", small)
    monkeypatch.setattr(sink_module, "WHOLE_PUT", 1 << 20)  # the larger one goes in parts
    monkeypatch.setattr(sink_module, "PART_SIZE", 5 << 20)
    sink.put_file_new("b", big)
    for key, path in (("s", small), ("b", big)):
        with pytest.raises(AlreadyExists):
            sink.put_file_new(key, path)
    assert objects()["s"] == b"small file" and objects()["b"] == big.read_bytes()
    written = sink.modified("s")
    assert 0 <= sink.clock() - written < 60_000_000  # the store's clock, read twice
    assert set(sink.listing()) == {"a", "s", "b"}  # the clock's probe is gone
    sink.delete("a")
    sink.delete("a")  # absent: nothing to do
    assert "a" not in sink.listing()
