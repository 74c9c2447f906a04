"""Snapshots list nodes in icechunk's order (bytes of the whole path); nothing downstream depends on it."""

from __future__ import annotations

import json
import subprocess

import pytest

from zsarchive.archive import RepoArchive, export
from zsarchive.icechunk import Repository

# A group with children beside names holding a byte below "/" ("-", ".", " ", "!"), non-ASCII and
# non-BMP names: byte order and component-wise order disagree on them.
MAKE = r"""
import json, sys, icechunk as ic, zarr
repo = ic.Repository.create(ic.local_filesystem_storage(sys.argv[1]))
s = repo.writable_session("main")
root = zarr.group(store=s.store)
a = root.create_group("a")
a.create_group("b")
a.create_array("b-c", shape=(2,), chunks=(1,), dtype="i1", fill_value=0)[:] = [1, 2]
root.create_array("a-b", shape=(3,), chunks=(2,), dtype="u2", fill_value=0)[:] = [7, 8, 9]
for name in ["a b", "a.b", "a!", "ab", "A", "\u00e9", "\uff01", "\U0001F600", "a/b\u00e9"]:
    root.create_group(name)
s.commit("names")
sid = repo.lookup_branch("main")
info = repo.inspect_snapshot(sid)
info = json.loads(info) if isinstance(info, str) else info
print(json.dumps({"snapshot": sid, "paths": [n["path"] for n in info["nodes"]]}))
"""


@pytest.mark.parametrize("version", [1, 2])
def test_real_icechunk_node_order_reads_and_exports(version, request, tmp_path):
    python = request.getfixturevalue(f"icechunk{version}_python")
    repo = tmp_path / "repo"
    proc = subprocess.run([str(python), "-c", MAKE, str(repo)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    theirs = json.loads(proc.stdout.strip().splitlines()[-1])
    assert theirs["paths"].index("/a-b") < theirs["paths"].index("/a/b")  # what the fix is about

    snap = Repository.open(str(repo)).snapshot(theirs["snapshot"])
    assert [n.path for n in snap.nodes] == theirs["paths"]

    out = tmp_path / "repo.zs"
    export(repo, out)
    with RepoArchive(out) as archive:
        listed = [n["path"] for n in archive.ls("main")]
        # the archive's own documented order: path component tuples
        assert listed == sorted(theirs["paths"], key=lambda p: [] if p == "/" else p[1:].split("/"))
        assert archive.node("main", "/a-b")["node_type"] == "array"
        assert [c["coords"] for c in archive.chunk_refs("main", "/a/b-c")] == [[0], [1]]
