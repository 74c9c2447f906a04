"""Format 5's per-chunk history where a transaction log and the chunk ref timeline disagree: a commit that
writes a ref again unchanged (the log names the chunk, the timeline has no record) keeps an ``H`` record
of value true, the history still names the commit, and a fragment over the archive keeps it too."""

from __future__ import annotations

import shutil

import pytest

from toolkit.agreement import check_chunk_history
from toolkit.archive_format import documented_history, documented_records
from toolkit.cli import run_zs
from toolkit.peers import run_peer_script
from zsarchive.archive import RepoArchive, export
from zsarchive.archive.format import schema as S
from zsarchive.icechunk import Repository
from zsarchive.zs.reader import ZS

REWRITE = """
import sys, icechunk as ic, zarr
ic.set_logs_filter("error")
path, step = sys.argv[1], int(sys.argv[2])
storage = ic.local_filesystem_storage(path)
repo = ic.Repository.create(storage) if step == 0 else ic.Repository.open(storage)
session = repo.writable_session("main")
if step == 0:
    zarr.group(store=session.store).create_array("v", shape=(4,), chunks=(1,), dtype="u1", fill_value=0)
spec = lambda i, offset: ic.VirtualChunkSpec(index=[i], location=f"s3://bucket/f{i}.bin", offset=offset, length=1)
if step == 0:
    session.store.set_virtual_refs("v", [spec(0, 0), spec(1, 0), spec(2, 0)], validate_containers=False)
else:  # chunk 0 written again unchanged, chunk 1 changed
    session.store.set_virtual_refs("v", [spec(0, 0), spec(1, step)], validate_containers=False)
session.commit(f"step {step}")
"""


@pytest.fixture(scope="module")
def rewritten(icechunk2_python, tmp_path_factory):
    where = tmp_path_factory.mktemp("rewritten")
    for step in range(3):
        run_peer_script(icechunk2_python, REWRITE, str(where / "repo"), str(step))
    return where


def test_a_ref_written_again_unchanged_keeps_its_history(rewritten, tmp_path):
    archive = tmp_path / "a.zs"
    export(rewritten / "repo", archive, export_time=1)
    with ZS(str(archive)) as z:
        history = [S.split(r) for r in z.search(prefix=S.CHUNK_HISTORY)]
    # the two commits after the first write chunk 0 again unchanged: true exceptions, nothing else
    assert [(key[1], value) for _, key, value in history] == [((0,), (True,)), ((0,), (True,))]
    assert all(S.record_version(r) == 2 for r in ZS(str(archive)).search(prefix=S.CHUNK_HISTORY))
    check_chunk_history(Repository.open(str(rewritten / "repo")), archive)
    with RepoArchive(archive) as arc:
        assert len(arc.chunk_history("/v", (0,))) == 3 and len(arc.chunk_history("/v", (1,))) == 3
    records = documented_records(archive)
    assert {(k[1], k[3]) for k in documented_history(records, 5)} == {
        (coords, sid) for node_id, coords, sid in _logged(rewritten / "repo")
    }
    assert run_zs("validate", str(archive)).returncode == 0


def test_a_fragment_keeps_the_exceptions_of_its_snapshots(rewritten, icechunk2_python, tmp_path):
    base, fragment, repo = tmp_path / "base.zs", tmp_path / "f.zs", tmp_path / "repo"
    shutil.copytree(rewritten / "repo", repo)
    export(repo, base, export_time=1)
    run_peer_script(icechunk2_python, REWRITE, str(repo), "3")
    export(repo, fragment, export_time=2, base=base)
    export(repo, full := tmp_path / "full.zs", export_time=2)
    check_chunk_history(Repository.open(str(repo)), fragment)
    with RepoArchive(fragment) as chain, RepoArchive(full) as whole:
        assert chain.chunk_history("/v", (0,)) == whole.chunk_history("/v", (0,))
        assert len(whole.chunk_history("/v", (0,))) == 4
    assert run_zs("validate", str(fragment)).returncode == 0


def _logged(repo_path) -> set[tuple]:
    repo = Repository.open(str(repo_path))
    out = set()
    for info in repo.snapshots():
        log = repo.changes(info.id).log if info.parent_id is not None else None
        for node_id, coords in ({} if log is None else log.updated_coords).items():
            out.update((node_id, tuple(int(x) for x in row), info.id) for row in coords)
    return out
