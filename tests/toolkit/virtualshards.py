"""The virtual-shards repository: zarr-python writes sharded arrays as a plain zarr v3 directory behind
nginx, and real icechunk 2.x points virtual refs at those shard files (the ``virtual`` fixture)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from toolkit.servers import nginx_server  # noqa: F401

# Runs under icechunk 2.x. With REPO "-", zarr writes the arrays into SRC (a plain directory nginx
# serves at PREFIX); otherwise the repository gets the same arrays with virtual refs to SRC's shard
# files: commit 1 "end" and "start", then (after a copy of the repository as it was) commit 2 one
# more array, "late".
WRITER = r'''
import datetime, json, os, shutil, sys
import icechunk as ic, numpy as np, zarr
from zarr.codecs import BytesCodec, ShardingCodec, ZstdCodec

src, path, prefix, pinned = sys.argv[1:5]
pinned = json.loads(pinned)  # shard file -> ETag the test read from nginx, or null for no checksum
future = datetime.datetime(2100, 1, 1, tzinfo=datetime.timezone.utc)

def arrays(group, names):
    made = {}
    if "end" in names:  # index at the end with crc32c, partial shards at both edges
        made["end"] = group.create_array("end", shape=(100, 90), chunks=(10, 10), shards=(40, 30), dtype="f4",
                                         compressors=None)
    if "start" in names:  # index at the start without checksum, zstd inner chunks, some never written
        made["start"] = group.create_array("start", shape=(64,), dtype="i8", chunks=(32,), compressors=None,
            serializer=ShardingCodec(chunk_shape=(4,), codecs=[BytesCodec(), ZstdCodec()],
                                     index_codecs=[BytesCodec()], index_location="start"))
    if "late" in names:
        made["late"] = group.create_array("late", shape=(20,), chunks=(5,), shards=(10,), dtype="u2", compressors=None)
    return made

if path == "-":  # the plain arrays only
    plain = arrays(zarr.open_group(src, mode="w"), ("end", "start", "late"))
    plain["end"][:] = np.arange(9000, dtype="f4").reshape(100, 90)
    plain["start"][:50] = np.arange(50) * 3
    plain["late"][:] = np.arange(20) * 7
    sys.exit(0)

def refs(session, name):
    specs = []
    for root, _, files in os.walk(os.path.join(src, name, "c")):
        for f in files:
            rel = os.path.relpath(os.path.join(root, f), src)
            index = [int(p) for p in os.path.relpath(os.path.join(root, f), os.path.join(src, name, "c")).split("/")]
            check = {} if rel in pinned and pinned[rel] is None else \
                {"etag_checksum": pinned[rel]} if rel in pinned else {"last_updated_at_checksum": future}
            specs.append(ic.VirtualChunkSpec(index=index, location=prefix + rel, offset=0,
                                             length=os.path.getsize(os.path.join(root, f)), **check))
    session.store.set_virtual_refs(name, specs, validate_containers=False)

repo = ic.Repository.create(ic.local_filesystem_storage(path))
s = repo.writable_session("main")
arrays(zarr.group(store=s.store), ("end", "start"))
refs(s, "end"); refs(s, "start")
s.commit("virtual shards")
shutil.copytree(path, path + "-first")
s = repo.writable_session("main")
arrays(zarr.open_group(store=s.store, mode="r+"), ("late",))
refs(s, "late")
s.commit("one more virtual array")
sys.stdout.flush(); os._exit(0)
'''

LAYOUT = {"end": ((4, 3), True, True), "start": ((8,), False, False), "late": ((2,), True, True)}
"""Per array: inner chunks per shard, index at the end, crc32c (zarr's choices for the arrays above)."""

PINNED_BY_ETAG, UNPINNED = "end/c/0/0", "end/c/2/2"


def etag(path: Path) -> str:
    """nginx's ETag of a static file: hex modification time and size."""
    st = path.stat()
    return f'"{int(st.st_mtime):x}-{st.st_size:x}"'


@pytest.fixture(scope="module")
def virtual(tmp_path_factory, icechunk2_python, nginx_server):  # noqa: F811
    """(repository, its copy after commit 1, plain source directory, prefix) for one written repository."""
    work = tmp_path_factory.mktemp("virtual-shards")
    src = nginx_server.root / "vsrc"
    prefix = nginx_server.url("vsrc/")
    # zarr writes the files first, so that the refs can pin one by the ETag nginx gives it
    for repo, pinned in (("-", {}), (str(work / "repo"), {UNPINNED: None})):
        if repo != "-":
            pinned[PINNED_BY_ETAG] = etag(src / PINNED_BY_ETAG)
        proc = subprocess.run(
            [str(icechunk2_python), "-c", WRITER, str(src), repo, prefix, json.dumps(pinned)],
            capture_output=True,
            timeout=300,
        )
        assert proc.returncode == 0, proc.stderr.decode()[-3000:]
    return work / "repo", Path(f"{work / 'repo'}-first"), src, prefix
