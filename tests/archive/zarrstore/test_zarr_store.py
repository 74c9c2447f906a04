"""The archive's zarr store against the LIVE icechunk store on the same repositories (V1 and V2).

Keys, bytes, byte ranges, sizes, directory listings and whole arrays read through zarr are
compared, for every branch, tag and snapshot, with what icechunk's own store answers.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import shutil
import subprocess
import sys
import time
import urllib.request
from collections import Counter
from functools import lru_cache
from pathlib import Path

import numpy as np
import pytest
import zarr
from zarr.abc.store import OffsetByteRequest, RangeByteRequest, SuffixByteRequest
from zarr.core.buffer import default_buffer_prototype

from toolkit.agreement import check_store, every_ref
from toolkit.oracle import fixtures, oracle, repo_path
from toolkit.servers import faulty_server, nginx_server  # noqa: F401
from toolkit.peers import run_peer_script
from zsarchive import ZSCorrupt, ZSError, open_store
from zsarchive.archive import NotFound, RepoArchive, export

VERSIONS = (1, 2)
RANGES = {
    "range": RangeByteRequest(1, 5),
    "offset": OffsetByteRequest(3),
    "suffix": SuffixByteRequest(4),
    "past_end": RangeByteRequest(2, 10**9),
}

# Runs under an icechunk interpreter: what icechunk's store and zarr say, per snapshot.
PEER_SCRIPT = r'''
import asyncio, base64, json, os, sys
import icechunk as ic, numpy as np, zarr
from zarr.abc.store import OffsetByteRequest, RangeByteRequest, SuffixByteRequest
from zarr.core.buffer import default_buffer_prototype

repo_dir, prefix, snapshots, answer = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), sys.argv[4]
major = int(ic.__version__.split(".")[0])
access = ic.credentials.LocalFileSystemAccess if major >= 2 else None
repo = ic.Repository.open(ic.local_filesystem_storage(repo_dir),
                          authorize_virtual_chunk_access={prefix: access})
RANGES = {"range": RangeByteRequest(1, 5), "offset": OffsetByteRequest(3), "suffix": SuffixByteRequest(4),
          "past_end": RangeByteRequest(2, 10**9)}
b64 = lambda b: base64.b64encode(b).decode()

async def one(sid):
    store = repo.readonly_session(snapshot_id=sid).store
    proto = default_buffer_prototype()
    keys = sorted([k async for k in store.list()])
    out = {"ranges": {}, "sizes": {}, "dirs": {}, "arrays": {}}
    for key in keys:
        sizes = out["sizes"]
        try:
            sizes[key] = await store.getsize(key)
        except ic.IcechunkError:
            continue  # an unreadable virtual chunk: its whole-value error is in the oracle
        out["ranges"][key] = ranges = {}
        for name, r in RANGES.items():
            try:
                ranges[name] = b64((await store.get(key, proto, r)).to_bytes())
            except BaseException as exc:  # a range past a chunk's end: icechunk 2 refuses, 1.1 panics
                ranges[name] = {"refused": type(exc).__name__ + ": " + (str(exc).splitlines() or [""])[0]}
    nodes = [k[:-len("zarr.json")].rstrip("/") for k in keys if k.endswith("zarr.json")]
    for path in nodes:
        for prefix_ in (path, f"{path}/c" if path else "c"):
            out["dirs"][prefix_] = sorted([k async for k in store.list_dir(prefix_)])
    if "zarr.json" in keys:
        root = zarr.open_group(store=store, mode="r")
        for path, node in root.members(max_depth=None):
            if isinstance(node, zarr.Array):
                try:
                    data = np.ascontiguousarray(node[...])
                    out["arrays"][path] = {"dtype": str(data.dtype), "shape": list(data.shape),
                                           "bytes": b64(data.tobytes())}
                except Exception as exc:
                    out["arrays"][path] = {"error": str(exc).splitlines()[0]}
    return out

with open(answer, "w") as f:  # not stdout: icechunk 1.x logs there
    json.dump({sid: asyncio.run(one(sid)) for sid in snapshots}, f)
sys.stdout.flush(); os._exit(0)  # icechunk 2.3 sometimes crashes in its own shutdown
'''


@lru_cache(maxsize=None)
def peer_answers(version: int, python: Path, workdir: Path) -> dict:
    """icechunk's answers (ranges, sizes, list_dir, arrays) for every snapshot of a fixture."""
    answers = oracle(version, python)  # also links the virtual prefix to this clone's data
    out = workdir / "peer.json"
    proc = subprocess.run(
        [
            str(python),
            "-c",
            PEER_SCRIPT,
            str(repo_path(version)),
            fixtures()["virtual"]["prefix"],
            json.dumps(sorted(answers["trees"])),
            str(out),
        ],
        capture_output=True,
        timeout=300,
    )
    if proc.returncode:
        raise RuntimeError(f"icechunk peer script failed:\n{proc.stderr.decode()[-3000:]}")
    return json.loads(out.read_text())


@pytest.fixture(scope="module", params=VERSIONS, ids=lambda v: f"v{v}")
def case(request, tmp_path_factory):
    """(oracle answers, peer answers, archive, archive with the chunks embedded) for one fixture."""
    version = request.param
    python = request.getfixturevalue(f"icechunk{version}_python")
    answers = oracle(version, python)
    out = tmp_path_factory.mktemp(f"zarr-v{version}")
    export(repo_path(version), out / "plain.zs", codec="deflate")
    export(repo_path(version), out / "embedded.zs", codec="zstd", include_chunks=True)
    return answers, peer_answers(version, python, out), out / "plain.zs", out / "embedded.zs"


def _b64(text: str) -> bytes:
    return base64.b64decode(text)


def _run(coro):
    return asyncio.run(coro)


async def _collect(iterator) -> list[str]:
    return [k async for k in iterator]


async def _get(store, key, byte_range=None):
    value = await store.get(key, default_buffer_prototype(), byte_range)
    return None if value is None else value.to_bytes()


@pytest.mark.parametrize("embedded", [False, True], ids=["repo", "embedded"])
def test_keys_and_bytes_equal_icechunk_at_every_ref(case, embedded):
    answers, _, plain, with_chunks = case
    version = answers["spec_version"]
    # the embedded archive needs no repository: native chunk bytes come from the archive itself
    repo = None if embedded else repo_path(version)
    with RepoArchive(with_chunks if embedded else plain, authorize=[fixtures()["virtual"]["prefix"]]) as arc:
        for ref, sid in every_ref(answers).items():
            store = open_store(arc, ref, repo=repo)
            assert store.snapshot_id == sid
            check_store(store, answers["trees"][sid], ref)


def test_ranges_sizes_exists_and_list_dir_equal_icechunk(case):
    answers, peer, plain, _ = case
    version = answers["spec_version"]
    compared = Counter()  # every kind of range must have been held against icechunk's answer (or refusal)
    with open_store(plain, "main", repo=repo_path(version), authorize=[fixtures()["virtual"]["prefix"]]) as store:
        arc = store.archive
        for ref, sid in every_ref(answers).items():
            store = open_store(arc, ref, repo=repo_path(version))
            theirs = peer[sid]
            assert set(theirs["ranges"]) == set(theirs["sizes"]), ref
            for key, size in theirs["sizes"].items():
                assert _run(store.getsize(key)) == size, (ref, key)
                assert _run(store.exists(key)), (ref, key)
            for key, ranges in theirs["ranges"].items():
                if all(isinstance(value, dict) for value in ranges.values()):
                    # icechunk refuses every range of it (a changed virtual file): so must we
                    with pytest.raises(ZSError, match="changed since the virtual ref was written"):
                        _run(_get(store, key, RANGES["range"]))
                    compared["refused"] += 1
                    continue
                for name, value in ranges.items():
                    if isinstance(value, dict):  # icechunk refuses a range past the value's end
                        whole = _run(_get(store, key))
                        assert name == "past_end" and len(whole) < 10**9, (ref, key, name, value)
                        assert _run(_get(store, key, RANGES[name])) == whole[2:], (ref, key)
                        compared["past_end"] += 1
                        continue
                    compared[name] += 1
                    if name == "suffix" and key.endswith("zarr.json"):
                        # icechunk (1.1 and 2.3) answers a suffix request on metadata with all BUT
                        # the last n bytes: hold ours to zarr's definition there instead
                        whole = _run(_get(store, key))
                        assert _b64(value) == whole[:-4] and _run(_get(store, key, RANGES[name])) == whole[-4:]
                        continue
                    assert _run(_get(store, key, RANGES[name])) == _b64(value), (ref, key, name)
            for prefix, names in theirs["dirs"].items():
                compared["dirs"] += 1
                assert sorted(_run(_collect(store.list_dir(prefix)))) == names, (ref, prefix)
                assert sorted(_run(_collect(store.list_dir(prefix + "/")))) == names, (ref, prefix)
            for prefix in theirs["dirs"]:
                expected = [k for k in answers["trees"][sid]["keys"] if k.startswith(prefix)]
                assert sorted(_run(_collect(store.list_prefix(prefix)))) == expected, (ref, prefix)
            if theirs["ranges"]:
                key, ranges = next(iter(theirs["ranges"].items()))
                values = _run(
                    store.get_partial_values(
                        default_buffer_prototype(),
                        [(key, RANGES["range"]), ("data/nothing/zarr.json", None), (key, None)],
                    )
                )
                assert [v if v is None else v.to_bytes() for v in values] == [
                    _b64(ranges["range"]),
                    None,
                    _run(_get(store, key)),
                ]
    assert all(compared[name] for name in (*RANGES, "dirs")), compared


def test_arrays_through_zarr_equal_icechunk(case):
    answers, peer, plain, _ = case
    version = answers["spec_version"]
    facts = fixtures()[f"v{version}"]
    seen_deleted = seen_virtual = False
    with RepoArchive(plain, authorize=[fixtures()["virtual"]["prefix"]]) as arc:
        for ref, sid in every_ref(answers).items():
            expected = peer[sid]["arrays"]
            if not expected:
                continue  # the repository's first, empty snapshot
            group = zarr.open_group(store=open_store(arc, ref, repo=repo_path(version)), mode="r")
            ours = {path: node for path, node in group.members(max_depth=None) if isinstance(node, zarr.Array)}
            assert sorted(ours) == sorted(expected), ref
            for path, want in expected.items():
                if "invalid zarr key format" in want.get("error", ""):
                    # icechunk 1.1 cannot look up '.'-separated chunk keys at all; the array holds no
                    # chunk (icechunk could not store one), so zarr's answer is its fill value
                    assert (ours[path][...] == ours[path].fill_value).all(), (ref, path)
                    continue
                if "error" in want:
                    with pytest.raises(ZSError, match=r"chunk \d+ of '/" + path):
                        ours[path][...]
                    continue
                data = np.ascontiguousarray(ours[path][...])
                assert (str(data.dtype), list(data.shape)) == (want["dtype"], want["shape"]), (ref, path)
                assert data.tobytes() == _b64(want["bytes"]), (ref, path)
                seen_virtual |= path in facts["virtual_arrays"]
                seen_deleted |= facts["arrays"].get(path, {}).get("deleted_later", False)
    assert seen_virtual and seen_deleted, "the fixture lost its virtual or its later-deleted array"


def test_older_tag_reads_an_array_deleted_later(case):
    answers, _, plain, _ = case
    version = answers["spec_version"]
    facts = fixtures()[f"v{version}"]
    path, info = next((p, a) for p, a in facts["arrays"].items() if a.get("deleted_later"))
    with open_store(plain, info["at"], repo=repo_path(version)) as old:
        assert zarr.open_array(store=old, path=path, mode="r").shape
    history = answers["ancestry"]["branch:main"]
    for entry in (history[len(history) // 2], history[-1]):  # REF@TIME names what was current then
        with open_store(plain, f"main@{entry['written_at']}", repo=repo_path(version)) as then:
            assert then.snapshot_id == entry["id"]
            assert sorted(_run(_collect(then.list()))) == answers["trees"][entry["id"]]["keys"]
    with open_store(plain, "main", repo=repo_path(version)) as now:
        assert not _run(now.exists(f"{path}/zarr.json"))
        with pytest.raises(zarr.errors.ArrayNotFoundError, match=path):
            zarr.open_array(store=now, path=path, mode="r")


def _native_chunk(store) -> str:
    for key in _run(_collect(store.list())):
        chunk = store._chunk(key)
        if chunk is not None and chunk.kind == "native":
            return key
    pytest.fail("fixture has no native chunk")


def test_unreachable_chunks_raise_never_fill(case, tmp_path):
    answers, _, plain, _ = case
    version = answers["spec_version"]
    with open_store(plain, "main") as store:  # native chunks, but no repository given
        key = _native_chunk(store)
        with pytest.raises(ZSError, match=r"chunk .* at 'main \(snapshot [0-9A-Z]{20}\)'.*give the repository"):
            _run(_get(store, key))
        assert _run(store.exists(key)) and _run(store.getsize(key)) > 0  # the ref is there
    repo = tmp_path / "repo"
    shutil.copytree(repo_path(version), repo)
    with open_store(plain, "main", repo=repo) as store:
        chunk = store._chunk(key)
        (repo / "chunks" / chunk.chunk_id).unlink()
        with pytest.raises(ZSError, match=f"cannot read {repo}/chunks/{chunk.chunk_id}"):
            _run(_get(store, key))
        array_path = key.rpartition("/c/")[0]
        with pytest.raises(ZSError, match=chunk.chunk_id):
            zarr.open_array(store=store, path=array_path, mode="r")[...]
    with open_store(plain, "main", repo=repo_path(version)) as store:  # nothing authorized
        virtual = next(
            k for k in _run(_collect(store.list())) if (c := store._chunk(k)) is not None and c.kind == "virtual"
        )
        with pytest.raises(ZSError, match="not under an authorized prefix"):
            _run(_get(store, virtual))


def test_missing_refs_and_foreign_keys_read_as_absent(case):
    answers, _, plain, _ = case
    version = answers["spec_version"]
    sid = answers["refs"]["branch:main"]
    tree = answers["trees"][sid]
    present = set(tree["keys"])
    absent = [
        "data/nothing/zarr.json",
        "data/zarr.json/x",
        "data/big/c/00/0",
        "data/big/c/0",
        "data/big/c.0.0",
        "data/big/c/0/0/0",
        "data/big/c/+0/0",
        "dotted/c.0",
        "dotted/c/0",
        "c/0",
        "c",
        "",
    ]
    holes_seen = 0
    for path, info in tree["arrays"].items():  # grid positions icechunk has no chunk for
        meta = tree["metadata"][f"{path}/zarr.json"]["json"]
        grid = [-(-n // c) for n, c in zip(meta["shape"], meta["chunk_grid"]["configuration"]["chunk_shape"])]
        absent.append(f"{path}/c/" + "/".join(map(str, grid)))  # just outside the grid
        holes = [c for c in np.ndindex(*grid) if list(c) not in info["chunk_coordinates"]]
        absent += [f"{path}/c/" + "/".join(map(str, c)) for c in holes[:3]]
        holes_seen += len(holes[:3])
    assert holes_seen, "the fixture has no array with an unwritten chunk"
    with open_store(plain, "main", repo=repo_path(version)) as store:
        for key in absent:
            assert key not in present
            assert _run(_get(store, key)) is None, key
            assert not _run(store.exists(key)), key
            with pytest.raises(FileNotFoundError):
                _run(store.getsize(key))


def test_read_only_everywhere(case):
    answers, _, plain, _ = case
    with open_store(plain, "main") as store:
        buf = default_buffer_prototype().buffer.from_bytes(b"x")
        for call in (
            store.set("zarr.json", buf),
            store.set_if_not_exists("new", buf),
            store.delete("zarr.json"),
            store.delete_dir("data"),
            store.clear(),
        ):
            with pytest.raises(ValueError, match="read-only"):
                _run(call)
        assert store.read_only and not store.supports_writes
        group = zarr.open_group(store=store, mode="r")
        with pytest.raises(ValueError, match="read-only"):
            group.create_array("new", shape=(2,), dtype="i4")
        with pytest.raises(NotImplementedError):
            store.with_read_only(False)
        assert store.with_read_only(True) == store


def test_unknown_ref_and_bad_arguments(case):
    _, _, plain, _ = case
    with pytest.raises(NotFound, match="unknown branch, tag or snapshot 'nope'"):
        open_store(plain, "nope")
    with RepoArchive(plain) as arc:
        with pytest.raises(ZSError, match="authorize"):
            open_store(arc, "main", authorize=["file:///x/"])


def test_archive_and_repository_over_http(case, nginx_server):  # noqa: F811
    answers, peer, plain, _ = case
    version = answers["spec_version"]
    root = nginx_server.root
    shutil.copy(plain, root / f"v{version}.zs")
    shutil.copytree(repo_path(version), root / f"repo-v{version}", dirs_exist_ok=True)
    mark = nginx_server.mark()
    with open_store(
        nginx_server.url(f"v{version}.zs"),
        "main",
        repo=nginx_server.url(f"repo-v{version}"),
        authorize=[fixtures()["virtual"]["prefix"]],
    ) as store:
        sid = answers["refs"]["branch:main"]
        check_store(store, answers["trees"][sid], "main over http")
        group = zarr.open_group(store=store, mode="r")
        for path, want in peer[sid]["arrays"].items():
            if "error" not in want:
                assert np.ascontiguousarray(group[path][...]).tobytes() == _b64(want["bytes"]), path
    served = nginx_server.requests_since(mark)
    assert any(line.path.startswith(f"/repo-v{version}/chunks/") and line.status == 206 for line in served)
    assert all(line.status in (200, 206) for line in served), served
    # every archive read of the concurrent gets went through the reader's small connection pool
    archive_reads = [line for line in served if line.path == f"/v{version}.zs"]
    assert len(archive_reads) > 1 and len({line.connection for line in archive_reads}) <= 8
    # chunk reads share keep-alive connections too: one chunk after another goes over one
    repo_url = nginx_server.url(f"repo-v{version}")
    with RepoArchive(nginx_server.url(f"v{version}.zs")) as arc:
        native = [
            ref
            for path, want in peer[sid]["arrays"].items()
            if "error" not in want
            for ref in arc.chunk_refs("main", path)
            if ref["kind"] == "native"
        ]
        mark = nginx_server.mark()
        for ref in native:
            arc.read_chunk(ref, "main", repo_url)
    chunk_reads = [
        line for line in nginx_server.requests_since(mark) if line.path.startswith(f"/repo-v{version}/chunks/")
    ]
    assert len(chunk_reads) >= len(native) > 1
    assert len({line.connection for line in chunk_reads}) == 1, chunk_reads


# -- virtual refs over http, and xarray: small repositories written by icechunk 2.x for the test --

VIRTUAL_HTTP_SCRIPT = r'''
import os, sys, icechunk as ic, zarr
from datetime import datetime, timezone
path, url, etag = sys.argv[1:4]
repo = ic.Repository.create(ic.local_filesystem_storage(path))
s = repo.writable_session("main")
a = zarr.group(store=s.store).create_array("v", shape=(4,), chunks=(1,), dtype="<i4", compressors=None, fill_value=-1)
specs = [ic.VirtualChunkSpec(index=[0], location=url, offset=0, length=4, etag_checksum=etag),
         ic.VirtualChunkSpec(index=[1], location=url, offset=4, length=4),
         ic.VirtualChunkSpec(index=[2], location=url, offset=8, length=4,
                             last_updated_at_checksum=datetime(2100, 1, 1, tzinfo=timezone.utc))]
s.store.set_virtual_refs("v", specs, validate_containers=False)
s.commit("virtual refs over http")
'''


def test_virtual_refs_over_http_check_etag(icechunk2_python, nginx_server, faulty_server, tmp_path):  # noqa: F811
    """Normal HTTP on nginx: an ETag-checked ref is read with If-Match and refused by nginx's 412 once the
    file changes; a chunk deep in a file is one request of exactly its range. The misbehaving server
    is used only to redirect."""
    served = nginx_server.root / "virtual"
    served.mkdir()
    (served / "data.bin").write_bytes(np.arange(10, 14, dtype="<i4").tobytes())
    url = nginx_server.url("virtual/data.bin")
    with urllib.request.urlopen(urllib.request.Request(url, method="HEAD"), timeout=10) as head:
        etag = head.headers["ETag"]
    run_peer_script(icechunk2_python, VIRTUAL_HTTP_SCRIPT, str(tmp_path / "repo"), url, etag)
    export(tmp_path / "repo", tmp_path / "v.zs")
    prefix = url.rsplit("/", 1)[0] + "/"
    with open_store(tmp_path / "v.zs", "main", authorize=[prefix]) as store:
        array = zarr.open_array(store=store, path="v", mode="r")
        mark = nginx_server.mark()
        assert array[...].tolist() == [10, 11, 12, -1]
        reads = {line.range: (line.status, line.if_match) for line in nginx_server.requests_since(mark)}
        assert reads == {"bytes=0-3": (206, etag), "bytes=4-7": (206, ""), "bytes=8-11": (206, "")}
        (served / "data.bin").write_bytes(np.arange(20, 24, dtype="<i4").tobytes())  # replaced
        later = time.time() + 5
        os.utime(served / "data.bin", (later, later))
        assert array[1:3].tolist() == [21, 22]  # refs without an ETag read the new bytes, as icechunk
        mark = nginx_server.mark()
        with pytest.raises(ZSError, match=r"chunk 0 of '/v' at 'main.*data\.bin.*If-Match.*412"):
            array[0:1]
        assert [(line.range, line.status, line.if_match) for line in nginx_server.requests_since(mark)] == [
            ("bytes=0-3", 412, etag)
        ]
    with open_store(tmp_path / "v.zs", "main", authorize=[prefix + "elsewhere/"]) as store:
        with pytest.raises(ZSError, match="not under an authorized prefix"):
            zarr.open_array(store=store, path="v", mode="r")[...]
    faulty_prefix = faulty_server.url("x")[:-1]
    with open_store(tmp_path / "v.zs", "main", authorize=[prefix, faulty_prefix]) as store:
        # a location may not climb out of an authorized prefix with dot segments
        chunk = dict(store._chunk("v/c/1").as_dict(), location=prefix + "../data.bin")
        with pytest.raises(ZSError, match="'.' or '..' path segments"):
            store.archive.read_chunk(chunk, "main")
        # a chunk deep inside a big file is one request of exactly its range, nothing first
        big = os.urandom(300_000)
        (served / "big.bin").write_bytes(big)
        deep = dict(
            store._chunk("v/c/1").as_dict(), location=nginx_server.url("virtual/big.bin"), offset=200_000, length=1000
        )
        mark = nginx_server.mark()
        assert store.archive.read_chunk(deep, "main") == big[200_000:201_000]
        assert [(x.range, x.status) for x in nginx_server.requests_since(mark)] == [("bytes=200000-200999", 206)]
        for offset in (299_500, 400_000):  # the file ends inside the chunk / before it
            with pytest.raises(ZSCorrupt, match=rf"big\.bin holds \d+ bytes at offset {offset}, expected 1000"):
                store.archive.read_chunk(dict(deep, offset=offset), "main")
        # a server under the prefix that redirects elsewhere is not followed: one line, never those bytes
        # (why zsarchive keeps its own HTTP client: obstore follows every redirect)
        faulty_server.files["big.bin"] = big
        faulty_server.files["secret.bin"] = b"S" * 1000
        faulty_server.faults.append("redirect:/secret.bin")
        with pytest.raises(ZSError, match="302.*secret.bin.*redirects are not followed") as caught:
            store.archive.read_chunk(dict(deep, location=faulty_server.url("big.bin")), "main")
        assert "\n" not in str(caught.value)
        assert [x.path for x in faulty_server.seen].count("/secret.bin") == 0


XARRAY_SCRIPT = r'''
import os, sys, json, icechunk as ic, numpy as np, xarray as xr
path = sys.argv[1]
repo = ic.Repository.create(ic.local_filesystem_storage(path))
ds = xr.Dataset({"temp": (("time", "station"), np.arange(12.0).reshape(4, 3)),
                 "flag": (("station",), np.array([1, 0, 1], dtype="i2"))},
                coords={"time": np.array(["2025-01-01", "2025-01-02", "2025-01-03", "2025-01-04"],
                                         dtype="datetime64[ns]"), "station": ["a", "b", "c"]},
                attrs={"title": "last year"})
s = repo.writable_session("main")
ds.to_zarr(s.store, consolidated=False, zarr_format=3)
s.commit("last year")
repo.create_tag("2025", repo.lookup_branch("main"))
s = repo.writable_session("main")
(ds * 2).assign_attrs(title="this year").to_zarr(s.store, consolidated=False, mode="w", zarr_format=3)
s.commit("this year")
out = {}
for ref in ("2025", "main"):
    session = repo.readonly_session(tag=ref) if ref == "2025" else repo.readonly_session(branch=ref)
    got = xr.open_zarr(session.store, consolidated=False).load()
    out[ref] = got.to_dict(data="list", encoding=False)
print(json.dumps(out, default=str))
sys.stdout.flush(); os._exit(0)  # icechunk 2.3 sometimes crashes in its own shutdown
'''


def test_xarray_open_zarr_round_trip(icechunk2_python, tmp_path):
    import xarray as xr  # in the test extra

    proc = subprocess.run(
        [str(icechunk2_python), "-c", XARRAY_SCRIPT, str(tmp_path / "repo")], capture_output=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr.decode()[-3000:]
    theirs = json.loads(proc.stdout)
    export(tmp_path / "repo", tmp_path / "ds.zs", include_chunks=True)
    for ref in ("2025", "main"):
        with open_store(tmp_path / "ds.zs", ref) as store:
            ours = xr.open_zarr(store, consolidated=False).load()
            assert ours["temp"].dims == ("time", "station")
            assert json.loads(json.dumps(ours.to_dict(data="list", encoding=False), default=str)) == theirs[ref]


MANY_REFS_SCRIPT = r'''
import os, sys, icechunk as ic, zarr
path, n = sys.argv[1], int(sys.argv[2])
ic.set_logs_filter("error")
repo = ic.Repository.create(ic.local_filesystem_storage(path))
s = repo.writable_session("main")
zarr.group(store=s.store).create_array("v", shape=(n,), chunks=(1,), dtype="<i4", compressors=None, fill_value=0)
s.store.set_virtual_refs("v", [ic.VirtualChunkSpec(index=[i], location=f"file:///nowhere/g{i % 97}.bin",
                                                   offset=4 * i, length=4) for i in range(n)],
                         validate_containers=False)
s.commit("many refs")
sys.stdout.flush(); os._exit(0)  # icechunk 2.3 sometimes crashes in its own shutdown
'''


def test_listing_streams_an_array_of_many_chunks(icechunk2_python, tmp_path):
    n = 50_000
    subprocess.run(
        [str(icechunk2_python), "-c", MANY_REFS_SCRIPT, str(tmp_path / "repo"), str(n)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    export(tmp_path / "repo", tmp_path / "many.zs", approx_block_size=16 * 1024)

    async def first(iterator):
        async for name in iterator:
            return name

    async def count(iterator):
        total = 0
        async for _ in iterator:
            total += 1
        return total

    with open_store(tmp_path / "many.zs", "main") as store:
        stats = store.archive.zs.stats
        before = stats.snapshot()["decompressions"]
        assert _run(first(store.list_dir("v/c"))) == "0"
        early = stats.snapshot()["decompressions"] - before
        assert _run(count(store.list_dir("v/c"))) == n
        assert _run(count(store.list_prefix("v/c/"))) == n
        whole = (stats.snapshot()["decompressions"] - before - early) // 2
        # the first name came after decoding a few blocks, not the whole array's refs
        assert whole > 40 and early < whole / 4, (early, whole)
        assert _run(store.getsize(f"v/c/{n - 1}")) == 4 and _run(_get(store, f"v/c/{n}")) is None
        before = stats.snapshot()["decompressions"]
        assert sorted(_run(_collect(store.list_dir("v")))) == ["c", "zarr.json"]
        assert stats.snapshot()["decompressions"] == before  # no scan of the refs to say "c"


LOCAL_ETAG_SCRIPT = r'''
import os, sys, icechunk as ic, zarr
repo_dir, data_dir = sys.argv[1:3]
st = os.stat(os.path.join(data_dir, "f.bin"))
etag = f"{st.st_ino:x}-{st.st_mtime_ns // 1000:x}-{st.st_size:x}"  # the local store's ETag scheme
prefix = "file://" + data_dir + "/"
config = ic.RepositoryConfig.default()
config.set_virtual_chunk_container(ic.VirtualChunkContainer(prefix, ic.local_filesystem_store(data_dir)))
repo = ic.Repository.create(ic.local_filesystem_storage(repo_dir), config=config,
                            authorize_virtual_chunk_access={prefix: None})
s = repo.writable_session("main")
zarr.group(store=s.store).create_array("v", shape=(3,), chunks=(1,), dtype="u1", compressors=None, fill_value=0)
s.store.set_virtual_refs("v", [ic.VirtualChunkSpec(index=[i], location=prefix + "f.bin", offset=i, length=1,
                                                   etag_checksum=e) for i, e in enumerate([etag, "*", etag + "0"])],
                         validate_containers=False)
s.commit("etags")
a = zarr.open_array(store=repo.readonly_session(branch="main").store, path="v", mode="r")
answers = [a[0:1].tolist(), a[1:2].tolist()]
try:
    answers.append(a[2:3].tolist())
except Exception:
    answers.append("refused")
os.utime(os.path.join(data_dir, "f.bin"), ns=(st.st_atime_ns, st.st_mtime_ns + 1000))  # "changed"
try:
    answers.append(a[0:1].tolist())
except Exception:
    answers.append("refused")
print(answers)
sys.stdout.flush(); os._exit(0)  # icechunk 2.3 sometimes crashes in its own shutdown
'''


def test_local_virtual_etag_checked_as_icechunk_does(icechunk1_python, tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    (data / "f.bin").write_bytes(bytes([7, 8, 9]))
    proc = subprocess.run(
        [str(icechunk1_python), "-c", LOCAL_ETAG_SCRIPT, str(tmp_path / "repo"), str(data)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    # icechunk 1.1: a matching ETag and "*" read, a wrong one is refused, and so is any after a touch
    assert proc.stdout.strip().splitlines()[-1] == "[[7], [8], 'refused', 'refused']"
    export(tmp_path / "repo", tmp_path / "etag.zs")
    with open_store(tmp_path / "etag.zs", "main", authorize=[f"file://{data}/"]) as store:
        array = zarr.open_array(store=store, path="v", mode="r")
        assert array[1:2].tolist() == [8]
        with pytest.raises(ZSError, match="changed since the virtual ref was written"):
            array[2:3]
        with pytest.raises(ZSError, match=r"chunk 0 of '/v'.*changed since the virtual ref was written"):
            array[0:1]  # the file was touched after icechunk wrote the ref
        st = (data / "f.bin").stat()
        os.utime(data / "f.bin", ns=(st.st_atime_ns, st.st_mtime_ns - 1000))  # back to the ref's time
        assert array[0:1].tolist() == [7]


def test_zarr_stays_optional():
    script = (
        "import sys; sys.modules['zarr'] = None\n"  # as if zarr were not installed
        "import zsarchive\n"
        "assert zsarchive.RepoArchive and zsarchive.export\n"
        "try:\n    zsarchive.open_store\nexcept ImportError:\n    print('needs zarr')\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and proc.stdout.strip() == "needs zarr", proc.stderr
