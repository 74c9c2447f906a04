"""Fragments: ``zs export --base`` along histories the real icechunk (1.1 and 2.x) writes, every chain
read as one archive equal to a full export made at the same time, and refused where it must be."""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from toolkit.agreement import check_archive
from toolkit.archives import assert_chain_is_full_export
from toolkit.cli import one_line_error, run_zs
from toolkit.peers import GENERATOR, run_peer_script
from toolkit.oracle import run_oracle
from toolkit.servers import nginx_server  # noqa: F401
from zsarchive.archive import NotFound, RepoArchive, export
from zsarchive.archive.format import schema as S
from zsarchive.archive.format.fragments import MAX_CHAIN, is_tombstone
from zsarchive.zs.format.header import MAGIC, parse
from zsarchive.zs.reader import ZS

CASES = [(1, 2), (1, 1181), (2, 2), (2, 1036), (2, 5)]
"""(icechunk major version, generator seed): histories with tag deletion, reset_branch, and at their
end expire_snapshots with garbage collection (chunks deleted in v1 seed 2) followed by a commit."""


@pytest.mark.parametrize("version,seed", CASES, ids=[f"v{v}-seed{s}" for v, s in CASES])
def test_a_chain_of_fragments_along_a_random_history_is_the_full_export(version, seed, request, tmp_path):
    python = request.getfixturevalue(f"icechunk{version}_python")
    include_chunks = seed % 2 == 0
    gen = subprocess.Popen(
        [str(python), str(GENERATOR), str(tmp_path), "--seed", str(seed), "--steps", "12", "--pause-every", "3"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    repo = tmp_path / "repo"
    chain: list[Path] = []
    made: dict = {}
    try:
        for line in gen.stdout:
            made = json.loads(line)
            step = len(chain)
            fragment, full = tmp_path / f"f{step}.zs", tmp_path / f"full{step}.zs"
            export(
                repo,
                fragment,
                base=chain[-1] if chain else None,
                include_chunks=include_chunks,
                parallelism=1 + step % 2,
            )
            export(repo, full, include_chunks=include_chunks)
            if chain:
                assert_chain_is_full_export(fragment, full, tmp_path / f"c{step}.zs")
                assert run_zs("validate", str(fragment)).returncode == 0
            chain.append(fragment)
            try:
                gen.stdin.write("\n")
                gen.stdin.flush()
            except BrokenPipeError:
                pass
    finally:
        with contextlib.suppress(BrokenPipeError):
            gen.stdin.close()
        code = gen.wait(timeout=300)
    assert code == 0
    assert len(chain) == 4  # pauses after 3, 6 and 9 operations, then the end
    expired = [entry[1] for entry in made["log"] if entry[0] == "expire"]
    assert bool(expired) == (seed != 5)
    if expired and expired[0]:  # the last fragment is a rewritten history's difference
        with ZS(str(chain[-1])) as z:
            assert any(is_tombstone(rec) for rec in z)
    answers = run_oracle(python, repo, {made["virtual_prefix"]: Path(made["virtual_dir"])})
    check_archive(answers, chain[-1], repo, made["deleted_tags"], [made["virtual_prefix"]])


SHARDED = r"""
import sys, datetime, numpy as np, icechunk as ic, zarr
path, step = sys.argv[1], int(sys.argv[2])
storage = ic.local_filesystem_storage(path)
repo = ic.Repository.create(storage) if step == 0 else ic.Repository.open(storage)
s = repo.writable_session("main")
if step == 0:
    root = zarr.group(store=s.store)
    a = root.create_array("sharded", shape=(64, 64), chunks=(8, 8), shards=(32, 32), dtype="f8")
    a[:] = np.arange(64 * 64).reshape(64, 64)
    root.create_array("plain", shape=(10,), chunks=(5,), dtype="i8")[:] = np.arange(10)
    s.commit("one")
    repo.create_tag("first", repo.lookup_branch("main"))
elif step == 1:
    root = zarr.open_group(store=s.store)
    root["sharded"][0:8, 0:8] = -1.0
    root.create_array("later", shape=(6,), chunks=(3,), dtype="u1")[:] = 7
    s.commit("two")
    repo.delete_tag("first")
    repo.create_branch("side", repo.lookup_branch("main"))
elif step == 2:
    root = zarr.open_group(store=s.store)
    root["plain"][:] = -np.arange(10)
    s.commit("three")
    cutoff = datetime.datetime.now(datetime.timezone.utc)
    s = repo.writable_session("main")
    zarr.open_group(store=s.store)["later"][:] = 9
    s.commit("four")
    repo.expire_snapshots(older_than=cutoff)
    repo.garbage_collect(cutoff)
"""


def test_fragments_of_sharded_arrays_with_chunk_bytes_through_expiration(icechunk2_python, tmp_path):
    repo = tmp_path / "repo"
    chain: list[Path] = []
    for step in range(3):
        run_peer_script(icechunk2_python, SHARDED, str(repo), str(step))
        fragment, full = tmp_path / f"f{step}.zs", tmp_path / f"full{step}.zs"
        export(repo, fragment, base=chain[-1] if chain else None, include_chunks=True)
        export(repo, full, include_chunks=True)
        if chain:
            assert_chain_is_full_export(fragment, full, tmp_path / f"c{step}.zs")
        chain.append(fragment)
    with RepoArchive(chain[-1]) as ours, RepoArchive(tmp_path / "full2.zs") as whole:
        assert [m["location"] for m in ours.chain()] == [str(p) for p in reversed(chain)]
        for chunk in whole.chunk_refs("main", "/sharded"):
            coords = chunk["coords"]
            assert ours.chunk_data("main", "/sharded", coords) == whole.chunk_data("main", "/sharded", coords)
            assert ours.inner_chunk("main", "/sharded", coords, (1, 2)) == whole.inner_chunk(
                "main", "/sharded", coords, (1, 2)
            )
        with pytest.raises(NotFound, match=r"tag 'first' was deleted"):
            ours.resolve("tag:first")
    # the expired and collected history made the last fragment a difference with tombstones
    with ZS(str(chain[-1])) as z:
        assert sum(map(is_tombstone, z)) > 0


def test_a_chain_reads_over_http(nginx_server, icechunk2_python, tmp_path):  # noqa: F811
    served = nginx_server.root / "chain"
    served.mkdir()
    repo = tmp_path / "repo"
    for step in range(2):
        run_peer_script(icechunk2_python, SHARDED, str(repo), str(step))
        export(repo, served / f"f{step}.zs", base=served / "f0.zs" if step else None, include_chunks=True)
    export(repo, tmp_path / "full.zs", include_chunks=True)
    with RepoArchive(nginx_server.url("chain/f1.zs")) as remote, RepoArchive(tmp_path / "full.zs") as local:
        assert len(remote.chain()) == 2
        assert remote.refs() == local.refs()
        assert remote.log() == local.log()
        assert remote.diff(local.log()[-1]["id"], "main") == local.diff(local.log()[-1]["id"], "main")
        for chunk in local.chunk_refs("main", "/sharded"):
            assert remote.chunk_data("main", "/sharded", chunk["coords"]) == local.chunk_data(
                "main", "/sharded", chunk["coords"]
            )


# -- refused ----------------------------------------------------------------------------------------

SMALL = r"""
import sys, icechunk as ic, zarr
storage = ic.local_filesystem_storage(sys.argv[1])
repo = ic.Repository.create(storage) if sys.argv[2] == "new" else ic.Repository.open(storage)
s = repo.writable_session("main")
root = zarr.open_group(store=s.store)
root.create_array(sys.argv[3], shape=(4,), chunks=(2,), dtype="i4")[:] = 1
s.commit(sys.argv[3])
"""


@pytest.fixture(scope="module")
def small_chain(icechunk2_python, tmp_path_factory):
    """A repository, a full archive ``base000.zs`` of it, one more commit and a fragment ``frag.zs``."""
    where = tmp_path_factory.mktemp("small")
    for mode, name in (("new", "a"), ("open", "b")):
        run_peer_script(icechunk2_python, SMALL, str(where / "repo"), mode, name)
        if mode == "new":
            export(where / "repo", where / "base000.zs")
    export(where / "repo", where / "frag.zs", base=where / "base000.zs")
    return where


def _relink(source: Path, target: Path, base: str) -> None:
    """Copy a fragment to ``target`` naming as its base ``base`` (as long as the name it had) with the
    fragment's own data hash: every such copy is the base another names."""
    data = bytearray(source.read_bytes())
    header, _ = parse(bytes(data[:65536]), len(data), str(source))
    link = header.metadata[S.METADATA_KEY]["fragment"]
    assert len(base) == len(link["base"])
    link["base"] = base
    link["base_sha256"] = header.data_sha256.hex()
    encoded = header.encode()
    data[len(MAGIC) : len(MAGIC) + len(encoded)] = encoded
    target.write_bytes(bytes(data))


EXPIRE = r"""
import sys, datetime, icechunk as ic, zarr
repo = ic.Repository.open(ic.local_filesystem_storage(sys.argv[1]))
for name in ("c", "d"):
    s = repo.writable_session("main")
    zarr.open_group(store=s.store).create_array(name, shape=(4,), chunks=(2,), dtype="i4")[:] = 3
    s.commit(name)
    if name == "c":
        cutoff = datetime.datetime.now(datetime.timezone.utc)
repo.expire_snapshots(older_than=cutoff)
"""


@pytest.mark.parametrize("skew_years", [10, -10])
def test_an_expiration_since_the_base_is_judged_by_the_ops_log_not_by_clocks(icechunk2_python, tmp_path, skew_years):
    """A base exported on a machine whose clock runs years ahead (or behind) of the repository's writers,
    then an expire_snapshots: the fragment is accepted because the repository's ops log holds an
    expiration the base's does not, whatever the two clocks say."""
    repo = tmp_path / "repo"
    for mode, name in (("new", "a"), ("open", "b")):
        run_peer_script(icechunk2_python, SMALL, str(repo), mode, name)
    skewed = int((time.time() + skew_years * 365.25 * 86400) * 10**6)
    export(repo, tmp_path / "base.zs", export_time=skewed)
    run_peer_script(icechunk2_python, EXPIRE, str(repo))
    with RepoArchive(tmp_path / "base.zs") as base:
        held = {s["id"] for s in base.log()}
    export(repo, tmp_path / "now.zs")
    with RepoArchive(tmp_path / "now.zs") as now:
        assert held - {s["id"] for s in now.log()}, "the expiration removed none of the base's snapshots"
    run_zs("export", str(repo), str(tmp_path / "frag.zs"), "--base", str(tmp_path / "base.zs"), check=True)
    assert_chain_is_full_export(tmp_path / "frag.zs", tmp_path / "now.zs", tmp_path / "c.zs")


def test_a_base_of_another_repository_is_refused(small_chain, icechunk2_python, tmp_path):
    run_peer_script(icechunk2_python, SMALL, str(tmp_path / "other"), "new", "a")
    out = run_zs("export", str(tmp_path / "other"), str(tmp_path / "f.zs"), "--base", str(small_chain / "base000.zs"))
    one_line_error(out, "not an archive of the repository")
    assert not (tmp_path / "f.zs").exists()


def test_a_fragment_over_its_own_base_is_refused(small_chain):
    args = (
        "export",
        str(small_chain / "repo"),
        str(small_chain / "base000.zs"),
        "--base",
        str(small_chain / "base000.zs"),
    )
    one_line_error(
        run_zs(*args), "base000.zs: exists already; give a new name, or --force (overwrite=True) to replace it"
    )
    one_line_error(run_zs(*args, "--force"), "is the base archive")


def test_a_missing_or_changed_base_is_one_line_naming_it(small_chain, tmp_path):
    shutil.copy(small_chain / "frag.zs", tmp_path / "frag.zs")
    out = run_zs("refs", str(tmp_path / "frag.zs"))
    one_line_error(out, "cannot open its base", "base000.zs")
    export(small_chain / "repo", tmp_path / "base000.zs")  # the same repository, another export: another hash
    for args in (("refs",), ("log",), ("validate",), ("info",)):
        out = run_zs(*args, str(tmp_path / "frag.zs"))
        one_line_error(out, "is not the archive it was made from", "base000.zs")


def test_a_chain_that_loops_or_runs_too_deep_is_refused(small_chain, tmp_path):
    # base names are as long as "base000.zs"; the data hash does not cover the header, so copies of one
    # fragment all match the hash it names: a loop, and a chain as long as we like
    _relink(small_chain / "frag.zs", tmp_path / "base001.zs", "base002.zs")
    _relink(small_chain / "frag.zs", tmp_path / "base002.zs", "base001.zs")
    one_line_error(run_zs("refs", str(tmp_path / "base001.zs")), "loops back")
    for i in range(1, MAX_CHAIN + 2):
        _relink(small_chain / "frag.zs", tmp_path / f"base{i:03}.zs", f"base{i + 1:03}.zs")
    one_line_error(run_zs("log", str(tmp_path / "base001.zs")), f"longer than {MAX_CHAIN}")


@pytest.mark.parametrize("link", ["/tmp/a.zsx", "http://x/a", "C:/a/bb.zs", "file:///ab"])
def test_a_base_link_that_is_not_a_relative_path_is_refused(small_chain, tmp_path, link):
    _relink(small_chain / "frag.zs", tmp_path / "frag.zs", link)
    for args in (("refs",), ("validate",), ("info",)):
        one_line_error(run_zs(*args, str(tmp_path / "frag.zs")), "is not a relative path")


def test_a_malformed_fragment_description_is_one_line(small_chain, tmp_path):
    with ZS(str(small_chain / "frag.zs")) as z:
        records_ = list(z)
    family, key, value = S.split(records_[-1])
    from zsarchive.zs.writer import ZSWriter

    with ZSWriter(str(tmp_path / "frag.zs"), z.metadata, include_default_metadata=False) as w:
        w.add_records(records_[:-1] + [S.record(S.HEADER, key, value[:5] + ((1, 2, 9, None, "junk"),))])
        w.finish()
    shutil.copy(small_chain / "base000.zs", tmp_path / "base000.zs")
    for args in (("refs",), ("log",), ("validate",)):
        one_line_error(run_zs(*args, str(tmp_path / "frag.zs")), "malformed fragment description")


def test_a_fragment_whose_header_misdescribes_it_fails_validation(small_chain, tmp_path):
    with ZS(str(small_chain / "frag.zs")) as z:
        records_ = list(z)
    family, key, value = S.split(records_[-1])
    start, stop, records_format, bits, families = value[5]
    wrong = tuple((name, n + 1 if name == "snapshots" else n, dead, firsts) for name, n, dead, firsts in families)
    from zsarchive.zs.writer import ZSWriter

    with ZSWriter(str(tmp_path / "frag.zs"), z.metadata, include_default_metadata=False) as w:
        w.add_records(
            records_[:-1] + [S.record(S.HEADER, key, value[:5] + ((start, stop, records_format, bits, wrong),))]
        )
        w.finish()
    shutil.copy(small_chain / "base000.zs", tmp_path / "base000.zs")
    one_line_error(run_zs("validate", str(tmp_path / "frag.zs")), "describes its snapshots records")
    # a chunk ref filter without the bits of the fragment's chunk refs would hide them from lookups
    (tmp_path / "frag.zs").unlink()
    with ZSWriter(str(tmp_path / "frag.zs"), z.metadata, include_default_metadata=False) as w:
        w.add_records(
            records_[:-1]
            + [S.record(S.HEADER, key, value[:5] + ((start, stop, records_format, bytes(len(bits)), families),))]
        )
        w.finish()
    one_line_error(run_zs("validate", str(tmp_path / "frag.zs")), "chunk ref filter")
