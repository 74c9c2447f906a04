"""Chunk-ref timelines (format 2) against real icechunk, on histories written to stress them: chunks
overwritten again and again, appends that grow an array, an array deleted and re-created under the
same path, a moved array, branches that diverge and rewrite the same chunks differently, and manifest
splitting. Every chunk ref at every snapshot must equal icechunk's, and ``zs validate`` must pass."""

from __future__ import annotations


import pytest

from toolkit.agreement import check_archive
from toolkit.oracle import run_oracle
from toolkit.cli import run_zs
from toolkit.peers import run_peer_script
from zsarchive.archive import export

HISTORY = r"""
import sys
import numpy as np, zarr, icechunk as ic
out, split = sys.argv[1], int(sys.argv[2])
MAJOR = int(ic.__version__.split(".")[0])
config = ic.RepositoryConfig.default()
config.inline_chunk_threshold_bytes = 0  # every chunk a native ref: changes show as new chunk ids
if split:
    config.manifest = ic.ManifestConfig(splitting=ic.ManifestSplittingConfig.from_dict(
        {ic.ManifestSplitCondition.AnyArray(): {ic.ManifestSplitDimCondition.Any(): split}}))
repo = ic.Repository.create(ic.local_filesystem_storage(out), config=config)
rng = np.random.default_rng(7)

def commit(branch, message, change):
    s = repo.writable_session(branch)
    change(zarr.open_group(s.store, mode="a"))
    return s.commit(message)

commit("main", "arrays", lambda g: (
    g.create_array("grid", shape=(8, 8), chunks=(2, 2), dtype="i4", fill_value=-1).__setitem__(
        slice(None), rng.integers(0, 100, (8, 8))),
    g.create_array("series", shape=(6,), chunks=(2,), dtype="f8").__setitem__(slice(None), np.arange(6.0)),
    g.create_array("doomed", shape=(4,), chunks=(2,), dtype="i2").__setitem__(slice(None), 1)))
for k in range(3):  # the same chunks rewritten, commit after commit
    commit("main", f"overwrite {k}", lambda g, k=k: g["grid"].__setitem__((slice(0, 4), slice(0, 4)), k))

def grow(g):
    a = g["series"]
    a.resize((10,))
    a[6:] = np.arange(6.0, 10.0)
commit("main", "append", grow)
commit("main", "delete", lambda g: g.__delitem__("doomed"))
commit("main", "re-create", lambda g: g.create_array("doomed", shape=(4,), chunks=(2,), dtype="i2",
                                                    fill_value=0).__setitem__(slice(0, 2), 9))
base = repo.lookup_branch("main")
repo.create_branch("other", base)
commit("main", "main's rewrite", lambda g: g["grid"].__setitem__((slice(2, 6), slice(2, 6)), 11))
commit("other", "other's rewrite", lambda g: g["grid"].__setitem__((slice(2, 6), slice(2, 6)), 22))
commit("other", "other clears", lambda g: g["series"].__setitem__(slice(0, 2), -5.0))
if MAJOR >= 2:
    s = repo.rearrange_session("main")
    s.move("/series", "/moved-series")
    s.commit("move")
    commit("main", "after the move", lambda g: g["moved-series"].__setitem__(slice(8, 10), 0.5))
repo.create_tag("before-end", repo.lookup_branch("main"))
commit("main", "last", lambda g: g["grid"].__setitem__((slice(6, 8), slice(0, 8)), 3))
"""


@pytest.mark.parametrize(
    "version, split", [(2, 0), (2, 2), (1, 0), (1, 3)], ids=["ic2", "ic2-split", "ic1", "ic1-split"]
)
def test_every_ref_at_every_snapshot_equals_icechunk(request, tmp_path, version, split):
    python = request.getfixturevalue(f"icechunk{version}_python")
    repo = tmp_path / "repo"
    run_peer_script(python, HISTORY, str(repo), str(split))
    answers = run_oracle(python, repo, {})
    archive = tmp_path / "history.zs"
    export(repo, archive, parallelism=2 if split else 1)
    check_archive(answers, archive, repo, [], [])
    done = run_zs("validate", str(archive), timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "looks good!", done.stderr
