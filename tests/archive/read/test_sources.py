"""``zs sources --check`` against objects in moto's S3 behind servers that answer HEAD wrongly: a HEAD that
names another version, one that says the object is gone, one that names no version at all, one that is
refused. Each object gets its own status and one-line reason, nothing else is misjudged, and the HEADs go
out side by side, never more than ``CHECKS_IN_FLIGHT`` at once."""

from __future__ import annotations

import hashlib
import json

import pytest

from toolkit.cli import run_zs
from toolkit.peers import run_peer_script
from toolkit.servers import DelayingProxy, ObjectStoreProxy, moto_s3
from zsarchive.archive import RepoArchive, export
from zsarchive.archive.read.sources import CHECKS_IN_FLIGHT

BUCKET = "checked"
OBJECTS = CHECKS_IN_FLIGHT + 36  # more than go out at once

REFS = r"""
import sys, json, zarr, icechunk as ic
out, refs = sys.argv[1], json.loads(sys.argv[2])
repo = ic.Repository.create(ic.local_filesystem_storage(out))
s = repo.writable_session("main")
zarr.group(store=s.store).create_array("v", shape=(len(refs), 64), chunks=(1, 64), dtype="u1", compressors=None)
s.store.set_virtual_refs("v", [ic.VirtualChunkSpec(index=[i, 0], location=loc, offset=0, length=64,
                                                   etag_checksum=etag) for i, (loc, etag) in enumerate(refs)],
                         validate_containers=False)
s.commit("one ref per object")
"""


def _key(i: int) -> str:
    return f"g/{i:03d}.bin"


def etag(i: int) -> str:
    """The ETag moto gives object ``i`` (an MD5 of its bytes, quoted)."""
    return '"' + hashlib.md5(bytes([i]) * 64).hexdigest() + '"'


def _wrong_heads(method: str, path: str, status: int, headers: list[tuple[str, str]]):
    """HEAD of object 0 names another ETag, of 1 answers 404, of 2 names no version, of 3 is refused."""
    if method != "HEAD":
        return status, headers
    name = path.removeprefix(f"/{BUCKET}/")
    if name == _key(0):
        return status, [(k, '"0123456789abcdef0123456789abcdef"' if k.lower() == "etag" else v) for k, v in headers]
    if name == _key(1):
        return 404, [(k, v) for k, v in headers if k.lower() not in ("etag", "last-modified")]
    if name == _key(2):
        return status, [(k, v) for k, v in headers if k.lower() not in ("etag", "last-modified")]
    if name == _key(3):
        return 403, []
    return status, headers


@pytest.fixture(scope="module")
def checked(icechunk2_python, tmp_path_factory):
    """The ``zs sources --check --json`` answer through a proxy answering HEAD wrongly (behind a counter of
    requests in flight, each held 0.3 s), the most HEADs it had at once, and the Python API's answer
    through the same proxy."""
    base = tmp_path_factory.mktemp("sources-check")
    with moto_s3({BUCKET: {}}) as client:
        for i in range(OBJECTS):
            client.put_object(Bucket=BUCKET, Key=_key(i), Body=bytes([i]) * 64)
        refs = [(f"s3://{BUCKET}/{_key(i)}", etag(i)) for i in range(OBJECTS)]
        run_peer_script(icechunk2_python, REFS, str(base / "repo"), json.dumps(refs))
        archive = base / "a.zs"
        export(base / "repo", archive)
        port = int(client.meta.endpoint_url.rsplit(":", 1)[1])
        proxy = ObjectStoreProxy(port, rewrite=_wrong_heads)
        counter = DelayingProxy(proxy.server_address[1], 0.3)
        authorize = f"s3://{BUCKET}/ endpoint_url=http://127.0.0.1:{counter.port} region=us-east-1"
        try:
            done = run_zs("sources", str(archive), "--check", "--json", "--authorize", authorize)
            most = counter.most
            with RepoArchive(
                archive, authorize={f"s3://{BUCKET}/": {"endpoint_url": proxy.endpoint, "region": "us-east-1"}}
            ) as arc:
                api = arc.sources(check=True)
        finally:
            counter.stop()
            proxy.stop()
    return {"done": done, "api": api, "most": most, "heads": sum(m == "HEAD" for m, _ in proxy.seen)}


def test_each_wrong_head_answer_gets_its_status_and_one_line(checked):
    done = checked["done"]
    assert done.returncode == 3, done.stderr  # objects the archive does not keep changed or vanished
    overall, *rows = [json.loads(line) for line in done.stdout.splitlines()]
    status = {row["location"].removeprefix(f"s3://{BUCKET}/"): (row["status"], row["why"]) for row in rows}
    assert len(status) == OBJECTS
    assert status[_key(0)][0] == "changed" and "0123456789abcdef0123456789abcdef" in status[_key(0)][1]
    assert status[_key(1)] == ("missing", "no such object")
    # an answer naming no version cannot show the pinned one is still there: changed, as one that names another
    assert status[_key(2)] == ("changed", f'the ref\'s ETag is {etag(2)}, the answer carries none')
    what, why = status[_key(3)]
    assert (
        what == "unreadable"
        and why.startswith(f"virtual location s3://{BUCKET}/{_key(3)}: ")
        and "access denied" in why
        and "\n" not in why
    ), why
    wrong = {_key(i) for i in range(4)}
    assert {what for name, (what, _) in status.items() if name not in wrong} == {"unchanged"}
    assert overall["at_risk"] == [f"s3://{BUCKET}/{_key(i)}" for i in range(3)]
    assert (overall["changed"], overall["missing"], overall["unchanged"]) == (2, 1, OBJECTS - 4)
    assert checked["api"]["sources"] == rows and checked["api"]["at_risk"] == overall["at_risk"]


def test_heads_go_out_side_by_side_at_most_checks_in_flight(checked):
    """Every object asked once per check (the CLI's and the API's), and as many at once as allowed (a
    loaded machine may open the last few connections after the first answers came)."""
    assert CHECKS_IN_FLIGHT * 3 // 4 <= checked["most"] <= CHECKS_IN_FLIGHT
    assert checked["heads"] >= 2 * OBJECTS
