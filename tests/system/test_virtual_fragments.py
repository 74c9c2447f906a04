"""Exported after each commit, fragment by fragment: a NetCDF source modified in place, with a new commit
pointing at its new bytes, reads through the chain (and its consolidation) at the old tag as icechunk read
it before the change and at the branch as it reads it after, once no source is left; a fragment embeds only
the ranges its base lacks (an appended file's), and commits re-pointing refs at the same bytes add none."""

from __future__ import annotations

import json
import os

import pytest
import xarray as xr

from toolkit.cli import run_zs
from toolkit.peers import run_peer_script
from toolkit.places import PEERS, require_peer
from toolkit.virtual_history import Sources, answers, commit, same
from zsarchive.archive import RepoArchive, export
from zsarchive.archive.zarrstore import open_store


@pytest.fixture(scope="module")
def python():
    return require_peer(PEERS / "ic2" / "bin" / "python", "icechunk 2.x with VirtualiZarr (Python 3.12)")


def _pinned(path, seconds: int) -> None:
    """Give a source file the modification time ``seconds``: a checksum time is whole seconds."""
    os.utime(path, (seconds, seconds))


@pytest.fixture(scope="module")
def chain(python, tmp_path_factory):
    base = tmp_path_factory.mktemp("inplace")
    sources = Sources("file", base / "src")
    repo = base / "repo"
    t0 = 1_700_000_000
    sources.write(python, "a.nc", 1, 0, 4)
    _pinned(sources.local / "a.nc", t0)
    commit(python, repo, sources, "first", "a.nc", "--create", "--tag", "v1", "--at", str(t0 + 1))
    before = answers(python, repo, sources, base / "before.pkl")
    f0 = base / "f0.zs"
    report = {"f0": export(repo, f0, include_virtual=True, authorize=[sources.prefix]).virtual}
    # a.nc rewritten in place, later; a commit re-points the refs at its new bytes
    sources.write(python, "a.nc", 9, 0, 4)
    _pinned(sources.local / "a.nc", t0 + 100)
    commit(python, repo, sources, "a.nc rewritten", "a.nc", "--overwrite", "--at", str(t0 + 101))
    f1 = base / "f1.zs"
    report["f1"] = export(repo, f1, include_virtual=True, authorize=[sources.prefix], base=f0).virtual
    sources.write(python, "b.nc", 2, 4, 2)
    _pinned(sources.local / "b.nc", t0 + 200)
    commit(python, repo, sources, "append b.nc", "b.nc", "--append", "--at", str(t0 + 201))
    after = answers(python, repo, sources, base / "after.pkl")
    f2 = base / "f2.zs"
    report["f2"] = export(repo, f2, include_virtual=True, authorize=[sources.prefix], base=f1).virtual
    sources.delete()
    return {"base": base, "before": before, "after": after, "f2": f2, "report": report, "prefix": sources.prefix}


def _expected(chain) -> dict[str, dict]:
    """Snapshot -> what icechunk answered: at the tag, before a.nc changed; at every other one, after."""
    tagged = chain["before"]["heads"]["tag:v1"]
    out = {sid: answer for sid, answer in chain["after"]["snapshots"].items() if "error" not in answer}
    out[tagged] = chain["before"]["snapshots"][tagged]
    assert "error" in chain["after"]["snapshots"][tagged]  # icechunk itself can no longer read the tag
    return out


def _reads_as(archive, expected: dict[str, dict]) -> None:
    with RepoArchive(archive) as arc:
        for sid, answer in expected.items():
            store = open_store(arc, sid)
            assert {key: bytes(store._read(key, None)) for key in answer["chunks"]} == answer["chunks"], sid
            if answer["dataset"] is not None:
                with xr.open_dataset(archive, engine="zsarchive", ref=sid, chunks=None) as ds:
                    same(answer["dataset"], ds.load().to_dict(data="array"), sid)


def test_the_chain_reads_the_old_tag_and_the_new_branch_without_sources(chain):
    _reads_as(chain["f2"], _expected(chain))


def test_consolidation_keeps_every_range(chain, tmp_path):
    out = tmp_path / "whole.zs"
    done = run_zs("consolidate", str(chain["f2"]), str(out))
    assert done.returncode == 0, done.stderr
    assert run_zs("validate", str(out)).stdout == "looks good!\n"
    assert run_zs("validate", str(chain["f2"])).stdout == "looks good!\n"
    _reads_as(out, _expected(chain))
    with RepoArchive(out) as whole, RepoArchive(chain["f2"]) as fragment:
        assert whole.format_version == 7 and fragment.records_format == 7
        counted = [
            {k: v for k, v in arc.summary()["virtual_bytes"].items() if k != "bytes"} for arc in (whole, fragment)
        ]
        assert counted[0] == counted[1] and counted[0]["kept_refs"] == counted[0]["refs"]


def test_each_fragment_reads_only_what_its_base_lacks(chain):
    """The rewrite's fragment reads a.nc's new ranges only (the old ones, which the new file fails, are its
    base's); the append's fragment reads b.nc's ranges only."""
    report = chain["report"]
    assert report["f0"].kept and not report["f0"].failed
    assert report["f1"].kept == report["f0"].kept and not report["f1"].failed and report["f1"].held == 0
    with RepoArchive(chain["f2"]) as arc:
        rows = {row["location"]: row for row in arc.sources()["sources"]}
    b_ranges = rows[chain["prefix"] + "b.nc"]["ranges"]
    assert report["f2"].kept == b_ranges and report["f2"].kept_bytes == rows[chain["prefix"] + "b.nc"]["bytes"]
    assert not report["f2"].failed


REPOINT = r"""
import sys, datetime, zarr, icechunk as ic
out, location, first, commits = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
prefix = location.rsplit("/", 1)[0] + "/"
config = ic.RepositoryConfig.default()
config.set_virtual_chunk_container(ic.VirtualChunkContainer(prefix, ic.local_filesystem_store(prefix[7:])))
access = ic.containers_credentials({prefix: ic.credentials.LocalFileSystemAccess})
try:
    repo = ic.Repository.open(ic.local_filesystem_storage(out), authorize_virtual_chunk_access=access)
except Exception:
    repo = ic.Repository.create(ic.local_filesystem_storage(out), config=config, authorize_virtual_chunk_access=access)
    s = repo.writable_session("main")
    zarr.group(store=s.store).create_array("v", shape=(8,), chunks=(1,), dtype="u1", compressors=None)
    s.commit("the array")
for i in range(first, first + commits):
    s = repo.writable_session("main")
    at = datetime.datetime.fromtimestamp(1_700_000_000 + i, datetime.timezone.utc)
    s.store.set_virtual_refs("v", [ic.VirtualChunkSpec(index=[k], location=location, offset=1000 * k, length=1000,
                                                       last_updated_at_checksum=at) for k in range(8)])
    s.commit(f"re-point {i}")
"""


def test_re_pointing_refs_at_the_same_bytes_adds_no_kept_bytes(python, tmp_path):
    """Each commit pins the same eight ranges of an unchanged file anew (as VirtualiZarr does): a fragment
    after 50 such commits keeps only aliases, a full export one copy of the bytes; both read without the file."""
    source = tmp_path / "src" / "g.bin"
    source.parent.mkdir()
    data = os.urandom(8000)
    source.write_bytes(data)
    _pinned(source, 1_700_000_000)
    repo, location = tmp_path / "repo", f"file://{source}"
    run_peer_script(python, REPOINT, str(repo), location, "1", "1")
    first = export(repo, tmp_path / "e0.zs", include_virtual=True, authorize=[location.rsplit("/", 1)[0] + "/"])
    run_peer_script(python, REPOINT, str(repo), location, "2", "50")
    later = export(
        repo,
        tmp_path / "e1.zs",
        include_virtual=True,
        authorize=[location.rsplit("/", 1)[0] + "/"],
        base=tmp_path / "e0.zs",
    )
    whole = export(repo, tmp_path / "full.zs", include_virtual=True, authorize=[location.rsplit("/", 1)[0] + "/"])
    assert (first.virtual.kept, first.virtual.kept_bytes) == (8, 8000)
    assert (later.virtual.kept, later.virtual.kept_bytes, later.virtual.aliases) == (0, 0, 8 * 50)
    assert (whole.virtual.kept, whole.virtual.kept_bytes, whole.virtual.aliases) == (8, 8000, 8 * 50)
    source.unlink()
    for archive in (tmp_path / "e1.zs", tmp_path / "full.zs"):
        with RepoArchive(archive) as arc:
            log = arc.log("main")
            assert len(log) == 53  # the repository's first snapshot, the array's, 51 re-pointing
            for entry in log[:-2]:
                node = next(n for n in arc.node_infos(entry["id"]) if n.path == "/v")
                assert b"".join(bytes(arc.read_chunk(c, entry["id"])) for c in arc.array_chunks(node)) == data
        assert json.loads(run_zs("summary", str(archive), "--json").stdout)["virtual_bytes"]["kept_ranges"] == 8


EXPIRE = r"""
import sys, datetime, zarr, icechunk as ic
out, directory, step = sys.argv[1], sys.argv[2], int(sys.argv[3])
prefix = "file://" + directory + "/"
config = ic.RepositoryConfig.default()
config.set_virtual_chunk_container(ic.VirtualChunkContainer(prefix, ic.local_filesystem_store(directory)))
access = ic.containers_credentials({prefix: ic.credentials.LocalFileSystemAccess})
if step == 0:
    repo = ic.Repository.create(ic.local_filesystem_storage(out), config=config, authorize_virtual_chunk_access=access)
    s = repo.writable_session("main")
    zarr.group(store=s.store).create_array("v", shape=(4,), chunks=(1,), dtype="u1", compressors=None)
    s.commit("the array")
else:
    repo = ic.Repository.open(ic.local_filesystem_storage(out), authorize_virtual_chunk_access=access)
at = datetime.datetime.fromtimestamp(1_700_000_100, datetime.timezone.utc)
if step == 0:
    for name in ("g1.bin", "g2.bin", "g3.bin"):
        s = repo.writable_session("main")
        s.store.set_virtual_refs("v", [ic.VirtualChunkSpec(index=[k], location=prefix + name, offset=100 * k,
                                                           length=100, last_updated_at_checksum=at) for k in range(4)])
        s.commit(name)
else:
    cutoff = datetime.datetime.now(datetime.timezone.utc)
    s = repo.writable_session("main")
    zarr.open_group(store=s.store).attrs["after"] = "the cutoff"
    s.commit("after the cutoff")
    repo.expire_snapshots(older_than=cutoff)
    repo.garbage_collect(cutoff)
"""


def test_an_expired_history_s_fragment_keeps_what_refs_still_name_and_drops_the_rest(python, tmp_path):
    """The base keeps three files' ranges; the repository then expires the snapshots pointing into the first
    two, and the third file is deleted before the next export: the fragment (a difference from a full
    export) tombstones the ranges no ref names any more and keeps the third file's, which it could not
    read again; the chain and its consolidation read main without any source."""
    sources = tmp_path / "src"
    sources.mkdir()
    data = {name: os.urandom(400) for name in ("g1.bin", "g2.bin", "g3.bin")}
    for name, body in data.items():
        (sources / name).write_bytes(body)
        _pinned(sources / name, 1_700_000_000)
    repo = tmp_path / "repo"
    run_peer_script(python, EXPIRE, str(repo), str(sources), "0")
    base = export(repo, tmp_path / "f0.zs", include_virtual=True, authorize=[f"file://{sources}/"])
    assert base.virtual.kept == 12
    for name in data:
        (sources / name).unlink()
    run_peer_script(python, EXPIRE, str(repo), str(sources), "1")
    fragment = export(
        repo, tmp_path / "f1.zs", include_virtual=True, authorize=[f"file://{sources}/"], base=tmp_path / "f0.zs"
    )
    assert not fragment.virtual.failed
    consolidated = tmp_path / "whole.zs"
    assert run_zs("consolidate", str(tmp_path / "f1.zs"), str(consolidated)).returncode == 0
    for archive in (tmp_path / "f1.zs", consolidated):
        with RepoArchive(archive) as arc:
            node = next(n for n in arc.node_infos("main") if n.path == "/v")
            assert b"".join(bytes(arc.read_chunk(c, "main")) for c in arc.array_chunks(node)) == data["g3.bin"]
            assert {row["location"].rsplit("/", 1)[1] for row in arc.sources()["sources"]} == {"g3.bin"}
            assert arc.summary()["virtual_bytes"]["kept_ranges"] == 4
        assert run_zs("validate", str(archive)).stdout == "looks good!\n"
