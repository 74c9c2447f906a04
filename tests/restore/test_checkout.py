"""``zs checkout``: a snapshot written as plain Zarr v3 reads, through zarr-python and xarray, exactly as
the real icechunk's ``session.store`` reads that snapshot (V1 and V2 repositories, fixtures and random
ones; directory, zip and S3 targets), key for key and byte for byte; and the refusals are one line
with nothing written."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import zarr
from click.testing import CliRunner

from toolkit.oracle import ROOT, fixtures, oracle, repo_path
from toolkit.servers import WRITE_REPO, azurite, moto_s3, nginx_server  # noqa: F401
from toolkit.cli import one_line_error, run_hostile, run_zs
from toolkit.peers import generate, run_peer_script
from toolkit.virtualshards import virtual  # noqa: F401
from zsarchive import checkout
from zsarchive.archive import RepoArchive, export
from zsarchive.cli import main
from zsarchive.errors import ZSCorrupt

# Runs under an icechunk interpreter: for each job, icechunk's store at a snapshot (below a group)
# against the checked-out copy opened by zarr's own LocalStore / ZipStore: every key and its bytes,
# every array (dtype, shape, fill value, attributes, values) and, with xarray, every group as a Dataset.
COMPARE = r'''
import asyncio, json, sys
import icechunk as ic, numpy as np, zarr
from zarr.core.buffer import default_buffer_prototype

repo_dir, prefix, jobs, answer, with_xarray = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), sys.argv[4], sys.argv[5] == "1"
major = int(ic.__version__.split(".")[0])
access = ic.credentials.LocalFileSystemAccess if major >= 2 else None
repo = ic.Repository.open(ic.local_filesystem_storage(repo_dir),
                          authorize_virtual_chunk_access={prefix: access} if prefix else None)
proto = default_buffer_prototype()

def describe(node):
    out = {"kind": type(node).__name__, "attrs": json.dumps(dict(node.attrs), sort_keys=True)}
    if isinstance(node, zarr.Array):
        out.update(dtype=str(node.dtype), shape=list(node.shape), fill=repr(node.fill_value))
        try:
            data = np.ascontiguousarray(node[...])
        except Exception as exc:
            return dict(out, error=str(exc).splitlines()[0])
        out.update(values=data.tobytes().hex(), value_dtype=str(data.dtype),
                   all_fill=bool(np.array_equal(data, np.full(data.shape, node.fill_value, data.dtype), equal_nan=True)))
    return out

def unreadable_by_icechunk(a, b):
    """icechunk refuses chunk keys with a "." separator (its "invalid zarr key format"), even for an
    array with no chunks; zarr reads the checkout's as the fill value, which such an array holds."""
    return "invalid zarr key format" in a.get("error", "") and b.get("all_fill") and \
        {k: v for k, v in a.items() if k != "error"} == {k: v for k, v in b.items() if k not in ("values", "value_dtype", "all_fill")}

def datasets(group, with_xarray):
    if not with_xarray:
        return {}
    import xarray as xr
    out = {}
    for path in [""] + [p for p, n in group.members(max_depth=None) if isinstance(n, zarr.Group)]:
        try:
            out[path] = xr.open_zarr(group.store, group=(group.path + "/" + path).strip("/") or None,
                                     consolidated=False, zarr_format=3, mask_and_scale=False).load()
        except Exception as exc:
            out[path] = type(exc).__name__
    return out

async def one(job):
    problems = []
    ice = repo.readonly_session(**job["at"]).store
    mine = zarr.storage.ZipStore(job["target"], mode="r") if job["target"].endswith(".zip") else \
        zarr.storage.LocalStore(job["target"], read_only=True)
    await mine._open()  # zarr 3.1's ZipStore lists only once opened
    base = job["group"].strip("/")
    pre = base + "/" if base else ""
    ice_keys = sorted(k[len(pre):] for k in [k async for k in ice.list()] if k.startswith(pre))
    my_keys = sorted([k async for k in mine.list()])
    if ice_keys != my_keys:
        problems.append(f"keys differ: only icechunk {sorted(set(ice_keys) - set(my_keys))[:5]}, "
                        f"only the checkout {sorted(set(my_keys) - set(ice_keys))[:5]}")
    for key in ice_keys:
        a, b = await ice.get(pre + key, proto), await mine.get(key, proto)
        if b is None or a.to_bytes() != b.to_bytes():
            problems.append(f"bytes of {key} differ")
    if not ice_keys:  # an empty snapshot (a new repository's first): nothing to open on either side
        return {"problems": problems, "arrays": 0, "keys": 0, "datasets": 0, "refused": []}
    ig, mg = zarr.open(ice, path=base, mode="r"), zarr.open(mine, mode="r")
    if describe(ig) != describe(mg):
        problems.append("the root differs")
    if isinstance(ig, zarr.Array):
        return {"problems": problems, "arrays": 1, "keys": len(ice_keys), "datasets": 0, "refused": []}
    ice_nodes = dict(ig.members(max_depth=None))
    my_nodes = dict(mg.members(max_depth=None))
    if sorted(ice_nodes) != sorted(my_nodes):
        problems.append(f"members differ: {sorted(ice_nodes)} vs {sorted(my_nodes)}")
    arrays, refused = 0, []
    for path, node in ice_nodes.items():
        if path in my_nodes:
            a, b = describe(node), describe(my_nodes[path])
            if unreadable_by_icechunk(a, b):
                refused.append(path)
            elif a != b:
                problems.append(f"{path} differs: {a.get('error') or ''} {b.get('error') or ''}")
        arrays += isinstance(node, zarr.Array)
    ice_ds, my_ds = datasets(ig, with_xarray), datasets(mg, with_xarray)
    opened = 0
    for path, ds in ice_ds.items():
        other = my_ds.get(path)
        if isinstance(ds, str) or isinstance(other, str):
            if ds != other:
                problems.append(f"xarray on group {path!r}: {ds if isinstance(ds, str) else 'ok'} vs "
                                f"{other if isinstance(other, str) else 'ok'}")
            continue
        if not ds.identical(other):
            problems.append(f"xarray datasets of group {path!r} differ")
        opened += 1
    return {"problems": problems, "arrays": arrays, "keys": len(ice_keys), "datasets": opened, "refused": refused}

async def main():
    return [await one(job) for job in jobs]

with open(answer, "w") as f:
    json.dump(asyncio.run(main()), f)
'''


def compare(python: Path, repo: Path, prefix: str, jobs: list[dict], workdir: Path, with_xarray: bool) -> list[dict]:
    """What the icechunk peer finds comparing each checkout with its store (jobs: at, target, group)."""
    out = workdir / "compare.json"
    run_peer_script(python, COMPARE, str(repo), prefix, json.dumps(jobs), str(out), "1" if with_xarray else "0")
    return json.loads(out.read_text())


def run(*args: str):
    return CliRunner().invoke(main, ["checkout", *map(str, args), "--no-progress"])


def commit_id(version: int, message: str) -> str:
    return next(c["id"] for c in fixtures()[f"v{version}"]["commits"] if c["message"] == message)


@pytest.fixture(scope="module", params=(1, 2), ids=lambda v: f"v{v}")
def fixture_archives(request, tmp_path_factory):
    """(version, archive without chunk bytes, archive with them) of one fixture repository."""
    version = request.param
    oracle(version, request.getfixturevalue(f"icechunk{version}_python"))  # links the virtual prefix here
    out = tmp_path_factory.mktemp(f"checkout-v{version}")
    export(repo_path(version), out / "plain.zs")
    export(repo_path(version), out / "embedded.zs", include_chunks=True)
    return version, out / "plain.zs", out / "embedded.zs"


def test_checkouts_read_as_icechunk_reads_the_snapshot(fixture_archives, icechunk1_python, icechunk2_python, tmp_path):
    version, plain, embedded = fixture_archives
    prefix = fixtures()["virtual"]["prefix"]
    repo = repo_path(version)
    old = commit_id(version, "empty group, unicode attrs, awkward names")
    cases = [  # (archive, REF, snapshot for icechunk, target, --group, with --repo)
        (plain, "v1.0", {"tag": "v1.0"}, "tag", "", True),
        (embedded, "dev", {"branch": "dev"}, "dev.zip", "", False),
        (embedded, old, {"snapshot_id": old}, "old", "", False),
        (plain, old, {"snapshot_id": old}, "old.zip", "", True),
        (plain, "main", {"branch": "main"}, "group", "data/c", True),
        (embedded, "main", {"branch": "main"}, "virt", "/data/sub/virt", False),
        (embedded, "main", {"branch": "main"}, "array.zip", "data/temperature", False),
    ]
    jobs = []
    for archive, ref, at, name, group, with_repo in cases:
        target = tmp_path / name
        args = (
            [archive, ref, target, "--authorize", prefix]
            + (["--group", group] if group else [])
            + (["--repo", repo] if with_repo else [])
        )
        result = run(*args)
        assert result.exit_code == 0, result.output
        assert f"wrote {target}" in result.output
        jobs.append({"at": at, "target": str(target), "group": group})
    assert zipfile.is_zipfile(tmp_path / "dev.zip")
    assert all(i.compress_type == zipfile.ZIP_STORED for i in zipfile.ZipFile(tmp_path / "dev.zip").infolist())
    # the checked-out root is the group: its zarr.json is the group's, byte for byte
    with RepoArchive(plain) as arc:
        assert (tmp_path / "group" / "zarr.json").read_bytes() == arc.node("main", "/data/c")["user_data"]
    peers = [(icechunk2_python, True)] + ([(icechunk1_python, False)] if version == 1 else [])
    for python, with_xarray in peers:
        answers = compare(python, repo, prefix, jobs, tmp_path, with_xarray)
        for job, answer in zip(jobs, answers):
            assert answer["problems"] == [], (job, answer["problems"])
            assert answer["keys"] > 0 and answer["arrays"] > 0, (job, answer)
            assert set(answer["refused"]) <= {"dotted"}, answer  # the one array with "." keys, no chunks
        if with_xarray:
            assert sum(a["datasets"] for a in answers) > 0


def test_refusals_are_one_line_and_write_nothing(fixture_archives, tmp_path):
    version, plain, embedded = fixture_archives
    prefix = fixtures()["virtual"]["prefix"]
    # an archive without chunk bytes and no --repo: how many chunk files are missing
    line = one_line_error(run(plain, "v1.0", tmp_path / "a"))
    with RepoArchive(plain) as arc:
        node = arc.node("v1.0", "/data/big")
        wanted = {
            c["chunk_id"]
            for n in arc.ls("v1.0")
            if n["node_type"] == "array"
            for c in arc.node_chunk_refs(n)
            if c["kind"] == "native"
        }
    assert node and wanted and f"{len(wanted)} chunk file" in line and "--repo" in line
    assert not (tmp_path / "a").exists()
    # an unauthorized virtual chunk: names the location and the --authorize it needs
    line = one_line_error(run(embedded, "dev", tmp_path / "b"))
    # the location, and the prefix to authorize (where its symbolic link leads, if it is one)
    assert f"'{prefix}ints.bin'" in line and re.search(r"--authorize file://\S*/virtual-data/ ", line), line
    assert not (tmp_path / "b").exists() and not list(tmp_path.glob(".b*"))
    # a chunk icechunk itself refuses (the checksum never matches): one line, nothing left
    line = one_line_error(run(embedded, "main", tmp_path / "c.zip", "--authorize", prefix))
    assert "changed since the virtual ref was written" in line
    assert sorted(os.listdir(tmp_path)) == []
    # a target that is not empty, for each kind of target
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "keep").write_bytes(b"mine")
    (tmp_path / "taken.zip").write_bytes(b"not a zip")
    for target in (tmp_path / "full", tmp_path / "taken.zip"):
        line = one_line_error(run(embedded, "dev", target, "--authorize", prefix))
        assert "not empty" in line and str(target) in line
    assert sorted(os.listdir(tmp_path / "full")) == ["keep"] and (tmp_path / "taken.zip").read_bytes() == b"not a zip"
    # an empty directory and an empty file are fine targets
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty.zip").write_bytes(b"")
    for target in (tmp_path / "empty", tmp_path / "empty.zip"):
        assert run(embedded, "dev", target, "--authorize", prefix).exit_code == 0
    assert (tmp_path / "empty" / "zarr.json").exists() and zipfile.is_zipfile(tmp_path / "empty.zip")
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]
    # a group that is not there
    line = one_line_error(run(embedded, "dev", tmp_path / "d", "--group", "no/such"))
    assert "'/no/such'" in line and not (tmp_path / "d").exists()


def test_the_python_api_and_a_failed_write(fixture_archives, tmp_path):
    _, _, embedded = fixture_archives
    prefix = fixtures()["virtual"]["prefix"]
    seen = []
    summary = checkout(
        str(embedded),
        "dev",
        tmp_path / "x",
        authorize=[prefix],
        progress=lambda done, total: seen.append((done, total)),
    )
    assert summary.nodes == len(list((tmp_path / "x").rglob("zarr.json")))
    assert seen[-1][0] == seen[-1][1] == summary.nodes + summary.chunks
    files = [p for p in (tmp_path / "x").rglob("*") if p.is_file()]
    (tmp_path / "out").mkdir()
    assert len(files) == summary.nodes + summary.chunks and sum(p.stat().st_size for p in files) == summary.bytes
    # writes that fail (here: past a file size limit, as a full disk would): one line, nothing left
    for name, limit in (("x2", 4000), ("x3.zip", 20000)):
        done = run_zs(
            "checkout", str(embedded), "dev", str(tmp_path / "out" / name), "--authorize", prefix, file_size=limit
        )
        one_line_error(done, "cannot write", "File too large", str(tmp_path / "out" / name))
        assert os.listdir(tmp_path / "out") == []


def test_an_s3_target_on_a_local_server(fixture_archives, icechunk2_python, tmp_path):
    version, _, embedded = fixture_archives
    prefix = fixtures()["virtual"]["prefix"]
    # obstore's stores are kept per URL for the process: each version has its own bucket
    bucket = f"out{version}"
    with moto_s3({bucket: {"taken/key": b"x"}}) as s3:
        result = run(embedded, "dev", f"s3://{bucket}/copies/dev", "--authorize", prefix, "-j", "4")
        assert result.exit_code == 0, result.output
        keys = [
            o["Key"]
            for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix="copies/dev/")
            for o in page.get("Contents", [])
        ]
        for key in keys:
            target = tmp_path / "dev" / key[len("copies/dev/") :]
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(s3.get_object(Bucket=bucket, Key=key)["Body"].read())
        # a prefix holding anything is refused; a failed checkout never writes the root's zarr.json
        line = one_line_error(run(embedded, "dev", f"s3://{bucket}/taken", "--authorize", prefix))
        assert "not empty" in line and f"s3://{bucket}/taken" in line
        one_line_error(run(embedded, "dev", f"s3://{bucket}/failed"))
        left = [o["Key"] for o in s3.list_objects_v2(Bucket=bucket, Prefix="failed/").get("Contents", [])]
        assert "failed/zarr.json" not in left
    (answer,) = compare(
        icechunk2_python,
        repo_path(version),
        prefix,
        [{"at": {"branch": "dev"}, "target": str(tmp_path / "dev"), "group": ""}],
        tmp_path,
        True,
    )
    assert answer["problems"] == [] and answer["arrays"] > 0 and len(keys) == answer["keys"]


def test_virtual_shards_behind_nginx(virtual, nginx_server, tmp_path):  # noqa: F811
    """Virtual refs to the shard files zarr-python wrote, served by nginx: the checkout holds those
    files byte for byte under the same keys, and zarr reads the same arrays from both."""
    repo, first, src, prefix = virtual
    export(repo, tmp_path / "a.zs")
    line = one_line_error(run(tmp_path / "a.zs", "main", tmp_path / "refused"))
    assert prefix in line and "--authorize http://" in line and not (tmp_path / "refused").exists()
    result = run(tmp_path / "a.zs", "main", tmp_path / "out", "--authorize", prefix)
    assert result.exit_code == 0, result.output
    shards = {str(p.relative_to(src)): p.read_bytes() for p in src.rglob("*") if p.is_file() and p.name != "zarr.json"}
    mine = {
        str(p.relative_to(tmp_path / "out")): p.read_bytes()
        for p in (tmp_path / "out").rglob("*")
        if p.is_file() and p.name != "zarr.json"
    }
    assert mine == shards and len(shards) > 3
    plain, copy = zarr.open_group(str(src), mode="r"), zarr.open_group(str(tmp_path / "out"), mode="r")
    for name in ("end", "start", "late"):
        assert copy[name].metadata.to_dict() == plain[name].metadata.to_dict()
        assert (copy[name][...] == plain[name][...]).all() and copy[name].shards is not None


@pytest.mark.parametrize("version,seed", [(1, 2), (2, 5)], ids=["v1-seed2", "v2-seed5"])
def test_random_repositories(version, seed, request, icechunk2_python, tmp_path):
    """Every branch and tag of a random history, checked out from an archive with chunk bytes and from
    one without them (with --repo), reads as icechunk reads it."""
    python = request.getfixturevalue(f"icechunk{version}_python")
    made = generate(python, tmp_path, seed)
    repo, prefix = tmp_path / "repo", made["virtual_prefix"]
    export(repo, tmp_path / "plain.zs")
    export(repo, tmp_path / "embedded.zs", include_chunks=True)
    with RepoArchive(tmp_path / "plain.zs") as arc:
        at = [(r["name"], {r["type"]: r["name"]}) for r in arc.refs() if r["type"] in ("branch", "tag")]
        snapshots = [s["id"] for s in arc.log()]
    at += [(sid, {"snapshot_id": sid}) for sid in snapshots[:: max(1, len(snapshots) // 6)]]
    jobs = []
    for i, (ref, spec) in enumerate(at):
        target = tmp_path / "out" / f"{i}{'.zip' if i % 3 == 2 else ''}"
        args = (
            [tmp_path / "plain.zs", ref, target, "--repo", repo] if i % 2 else [tmp_path / "embedded.zs", ref, target]
        )
        result = run(*args, "--authorize", prefix)
        assert result.exit_code == 0, (ref, result.output)
        jobs.append({"at": spec, "target": str(target), "group": ""})
    assert len(jobs) >= 4
    for python_, with_xarray in [(icechunk2_python, True)] + ([(python, False)] if version == 1 else []):
        for job, answer in zip(jobs, compare(python_, repo, prefix, jobs, tmp_path, with_xarray)):
            assert answer["problems"] == [], (job, answer["problems"])


def hostile(tmp_path: Path, name: str, components: tuple, zarr_json: bytes, below: tuple = ()) -> Path:
    """An archive of a root group, an array at ``components`` with one inline chunk and, if ``below``
    is given, a group at those components too."""
    from toolkit.archives import SNAPSHOT as sid, history_archive
    from zsarchive.archive.format import schema as S

    nodes = [
        S.record(
            S.NODE, (sid, ()), ("N0DE000000000", S.GROUP, b'{"zarr_format":3,"node_type":"group"}', None, None, ())
        ),
        S.record(S.NODE, (sid, components), ("N0DE000000002", S.ARRAY, zarr_json, ((4, None, 2),), None, (), sid)),
        S.record(S.CHUNK_REF, ("N0DE000000002", (0,), sid), (S.INLINE, b"ab")),
    ]
    if below:
        nodes.append(
            S.record(
                S.NODE,
                (sid, below),
                ("N0DE000000004", S.GROUP, b'{"zarr_format":3,"node_type":"group"}', None, None, ()),
            )
        )
    return history_archive(tmp_path / name, {sid: (None, 1, "m", "{}", ())}, nodes, main=sid)


ARRAY = (
    b'{"zarr_format":3,"node_type":"array","shape":[4],"data_type":"uint8","fill_value":0,'
    b'"chunk_grid":{"name":"regular","configuration":{"chunk_shape":[2]}},"codecs":[{"name":"bytes"}]'
)


@pytest.mark.parametrize(
    "components,zarr_json,needle,below",
    [
        (("..", "x"), ARRAY + b"}", "not a sequence of plain names", ()),
        (("a", "..", "..", "x"), ARRAY + b"}", "not a sequence of plain names", ()),
        (("", "x"), ARRAY + b"}", "not a sequence of plain names", ()),
        (
            ("v",),
            ARRAY + b',"chunk_key_encoding":{"name":"default","configuration":{"separator":"/../../"}}}',
            "separator",
            (),
        ),
        (
            ("v",),
            ARRAY + b',"chunk_key_encoding":{"name":"v2","configuration":{"separator":"."}}}',
            "lies below the array /v",
            ("v", "0"),
        ),
    ],
    ids=["dotdot", "inner-dotdot", "empty", "separator", "inside-an-array"],
)
def test_hostile_paths_never_write_outside_the_target(tmp_path, components, zarr_json, needle, below):
    path = hostile(tmp_path, "h.zs", components, zarr_json, below)
    (tmp_path / "in").mkdir()
    before = sorted(str(p) for p in tmp_path.rglob("*"))
    for target in (tmp_path / "in" / "t", tmp_path / "in" / "t.zip"):
        one_line_error(run_hostile("checkout", str(path), "main", str(target)), needle)
    assert sorted(str(p) for p in tmp_path.rglob("*")) == before


SHARDED = r'''
import sys
import icechunk as ic, numpy as np, zarr
from zarr.codecs import BytesCodec, ShardingCodec, ZstdCodec

repo = ic.Repository.create(ic.local_filesystem_storage(sys.argv[1]))
s = repo.writable_session("main")
g = zarr.group(store=s.store)
end = g.create_array("end", shape=(100, 90), chunks=(10, 10), shards=(40, 30), dtype="f4", compressors=None,
                     dimension_names=["y", "x"], fill_value=-1)
end[:70, :] = np.arange(6300, dtype="f4").reshape(70, 90)
start = g.create_array("sub/start", shape=(64,), dtype="i8", chunks=(32,), dimension_names=["t"],
                       serializer=ShardingCodec(chunk_shape=(4,), codecs=[BytesCodec(), ZstdCodec()],
                                                index_codecs=[BytesCodec()], index_location="start"))
start[:50] = np.arange(50) * 3
s.commit("sharded")
repo.create_tag("first", repo.lookup_branch("main"))
s = repo.writable_session("main")
zarr.open_array(s.store, path="end", mode="r+")[90:, :30] = 7
s.commit("one more shard")
'''


def test_native_shards_stay_shards(icechunk2_python, tmp_path):
    run_peer_script(icechunk2_python, SHARDED, str(tmp_path / "repo"))
    export(tmp_path / "repo", tmp_path / "a.zs", include_chunks=True)
    jobs = []
    for ref, spec in (("main", {"branch": "main"}), ("first", {"tag": "first"})):
        for name in (ref, f"{ref}.zip"):
            assert run(tmp_path / "a.zs", ref, tmp_path / name).exit_code == 0
            jobs.append({"at": spec, "target": str(tmp_path / name), "group": ""})
    for job, answer in zip(jobs, compare(icechunk2_python, tmp_path / "repo", "", jobs, tmp_path, True)):
        assert answer["problems"] == [] and answer["arrays"] == 2 and answer["datasets"] >= 2, (job, answer)
    # a shard is one file holding several inner chunks: never split, decoded or re-encoded
    assert (tmp_path / "main" / "end" / "c" / "0" / "0").stat().st_size == 12 * 400 + 12 * 16 + 4
    assert not (tmp_path / "main" / "end" / "c" / "2" / "2").exists()  # never written: absent


KILLED = """
import os, signal, sys
from zsarchive import checkout
archive, target, prefix = sys.argv[1:4]
def progress(done, total):
    if done == 3:  # some objects written, not all: the process dies here, no clean-up runs
        os.kill(os.getpid(), signal.SIGKILL)
checkout(archive, "dev", target, authorize=[prefix], window=1, progress=progress)
"""


def test_a_killed_checkout_leaves_no_target_that_looks_complete(fixture_archives, tmp_path):
    _, _, embedded = fixture_archives
    prefix = fixtures()["virtual"]["prefix"]
    (tmp_path / "empty").mkdir()
    for target in (tmp_path / "dir", tmp_path / "z.zip", tmp_path / "empty"):
        proc = subprocess.run(
            [sys.executable, "-c", KILLED, str(embedded), str(target), prefix],
            capture_output=True,
            timeout=300,
            env=dict(os.environ, PYTHONPATH=str(ROOT)),
        )
        assert proc.returncode == -9, proc.stderr
        if target.name == "empty":  # the write went on inside it: no zarr.json, and a new checkout refuses it
            assert [p.name for p in target.rglob("zarr.json") if p.parent == target] == []
            assert "not empty" in one_line_error(run(embedded, "dev", target, "--authorize", prefix))
        else:
            assert not target.exists()


def test_native_chunks_from_a_repository_in_s3(icechunk2_python, tmp_path):
    """An archive without chunk bytes and the original repository in S3 (--repo s3://...): the chunks
    come from the bucket, and the checkout (into the same bucket, too) reads as icechunk reads it."""
    # moto keeps its buckets per process, whichever server started them: this test's bucket is its own
    with moto_s3({"checkout-src": {}}) as client:
        run_peer_script(
            icechunk2_python,
            WRITE_REPO,
            "s3",
            "checkout-src",
            "one",
            os.environ["AWS_ENDPOINT_URL"],
            env={**os.environ, "AWS_EC2_METADATA_DISABLED": "true"},
        )
        local = tmp_path / "local"
        for page in client.get_paginator("list_objects_v2").paginate(Bucket="checkout-src", Prefix="one/"):
            for item in page.get("Contents", []):
                (local / item["Key"][4:]).parent.mkdir(parents=True, exist_ok=True)
                client.download_file("checkout-src", item["Key"], str(local / item["Key"][4:]))
        export(local, tmp_path / "a.zs")
        jobs = []
        for ref, spec in (("main", {"branch": "main"}), ("v1", {"tag": "v1"}), ("dev", {"branch": "dev"})):
            result = run(tmp_path / "a.zs", ref, tmp_path / ref, "--repo", "s3://checkout-src/one")
            assert result.exit_code == 0, result.output
            jobs.append({"at": spec, "target": str(tmp_path / ref), "group": ""})
        result = run(tmp_path / "a.zs", "dev", "s3://checkout-src/copies/dev", "--repo", "s3://checkout-src/one")
        assert result.exit_code == 0, result.output
        copied = {
            o["Key"][len("copies/dev/") :]: client.get_object(Bucket="checkout-src", Key=o["Key"])["Body"].read()
            for o in client.list_objects_v2(Bucket="checkout-src", Prefix="copies/dev/")["Contents"]
        }
    assert copied == {
        str(p.relative_to(tmp_path / "dev")): p.read_bytes() for p in (tmp_path / "dev").rglob("*") if p.is_file()
    }
    for job, answer in zip(jobs, compare(icechunk2_python, local, "", jobs, tmp_path, True)):
        assert answer["problems"] == [] and answer["arrays"] == 2, (job, answer)


def test_an_azure_target_and_source_on_azurite(azurite, icechunk2_python, tmp_path, monkeypatch):  # noqa: F811
    """Azurite (the Azure storage emulator) holds the repository real icechunk wrote: chunks come from
    az://, the checkout goes to az:// and to a directory, the same bytes; icechunk reads the same."""
    from azure.storage.blob import BlobServiceClient

    for key in list(os.environ):
        if key.startswith("AZURE"):
            monkeypatch.delenv(key)
    monkeypatch.setenv("AZURE_STORAGE_CONNECTION_STRING", azurite["connection"])
    container = BlobServiceClient.from_connection_string(azurite["connection"]).get_container_client("lab")

    def objects(prefix: str) -> dict[str, bytes]:
        return {
            b.name[len(prefix) :]: container.download_blob(b.name).readall()
            for b in container.list_blobs(name_starts_with=prefix)
        }

    local = tmp_path / "repo"
    for name, data in objects("repos/one/").items():
        (local / name).parent.mkdir(parents=True, exist_ok=True)
        (local / name).write_bytes(data)
    export(local, tmp_path / "a.zs")
    for target in (tmp_path / "main", "az://lab/copies/main"):
        result = run(tmp_path / "a.zs", "main", target, "--repo", "az://lab/repos/one")
        assert result.exit_code == 0, result.output
    assert objects("copies/main/") == {
        str(p.relative_to(tmp_path / "main")): p.read_bytes() for p in (tmp_path / "main").rglob("*") if p.is_file()
    }
    assert "not empty" in one_line_error(
        run(tmp_path / "a.zs", "main", "az://lab/copies/main", "--repo", "az://lab/repos/one")
    )
    (answer,) = compare(
        icechunk2_python,
        local,
        "",
        [{"at": {"branch": "main"}, "target": str(tmp_path / "main"), "group": ""}],
        tmp_path,
        True,
    )
    assert answer["problems"] == [] and answer["arrays"] == 2, answer


def test_the_hostile_archives_builder_makes_a_valid_archive(tmp_path):
    """The control of the cases above: the same archive with a plain path checks out."""
    path = hostile(tmp_path, "ok.zs", ("v",), ARRAY + b',"chunk_key_encoding":{"name":"default"}}')
    assert run(path, "main", tmp_path / "out").exit_code == 0
    assert (tmp_path / "out" / "v" / "c" / "0").read_bytes() == b"ab"
    assert zarr.open_array(str(tmp_path / "out" / "v"), mode="r")[:].tolist() == [97, 98, 0, 0]


@pytest.mark.parametrize("codec", ["none", "deflate"])
def test_a_damaged_byte_of_an_embedded_chunk_is_an_error_never_other_bytes(tmp_path, codec):
    """Chunk bytes leave an archive as views of its blocks (of the map where a block is stored in one
    piece): each block's CRC is still checked, so one flipped byte is a one-line error naming the
    block, from checkout and from the reads the zarr store makes alike, and the checkout leaves nothing."""
    repo = repo_path(2)
    archive = tmp_path / "a.zs"
    export(repo, archive, include_chunks=True, codec=codec)
    with RepoArchive(archive) as arc:
        chunk_id = next(
            c["chunk_id"] for c in arc.node_chunk_refs(arc.node("main", "/data/big")) if c["kind"] == "native"
        )
    content = (repo / "chunks" / chunk_id).read_bytes()
    data = bytearray(archive.read_bytes())
    window = content[-200:-100]
    assert data.count(window) == 1
    data[data.index(window) + 50] ^= 0x01
    archive.write_bytes(data)
    done = run_zs("checkout", str(archive), "main", str(tmp_path / "out"), "--group", "/data/big")
    one_line_error(done, str(archive), "block CRC mismatch")
    assert sorted(os.listdir(tmp_path)) == ["a.zs"]
    with RepoArchive(archive) as arc:  # as the zarr store reads a chunk
        chunk = next(c for c in arc.node_chunk_refs(arc.node("main", "/data/big")) if c.get("chunk_id") == chunk_id)
        with pytest.raises(ZSCorrupt, match="block CRC mismatch"):
            arc.read_chunk(chunk, "main", zero_copy=True)
