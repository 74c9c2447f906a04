"""Small explicit repositories written by the real icechunk (1.1 and 2.x), each once refused or misread.

The random differential test (test_differential.py) hunts for such cases; each one it finds is kept
here or as a committed seed there.
"""

from __future__ import annotations

import base64
import json

import pytest

from toolkit.cli import run_zs
from toolkit.peers import run_peer_json
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
    theirs = run_peer_json(python, MAKE, str(repo))
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


ZERO_D = r"""
import json, sys, icechunk as ic, zarr, numpy as np
repo = ic.Repository.create(ic.local_filesystem_storage(sys.argv[1]))
s = repo.writable_session("main")
root = zarr.group(store=s.store)
root.create_array("scalar", shape=(), dtype="f8", fill_value=0.0)[...] = 2.5
s.commit("set", metadata={"a": {"\u00e9": 1, "\U0001F600": ["x", {"\u00fc": None}]}})
s = repo.writable_session("main")
zarr.open_array(store=s.store, path="scalar")[...] = 4.0
s.commit("again")
import asyncio, base64
from zarr.core.buffer import default_buffer_prototype
raw = asyncio.run(repo.readonly_session("main").store.get("scalar/c", default_buffer_prototype())).to_bytes()
print(json.dumps({"history": [[i.id, i.message, dict(i.metadata)] for i in repo.ancestry(branch="main")],
                  "chunk": base64.b64encode(raw).decode()}))
"""


@pytest.mark.parametrize("version", [1, 2])
def test_zero_d_chunk_and_non_ascii_metadata_keys(version, request, tmp_path):
    """An empty COORDS addresses a 0-d array's one chunk in every command taking COORDS; commit
    metadata keys below the top level are UTF-8 (V2 stores them as FlexBuffers keys)."""
    repo, out = tmp_path / "repo", tmp_path / "repo.zs"
    theirs = run_peer_json(request.getfixturevalue(f"icechunk{version}_python"), ZERO_D, str(repo))
    export(repo, out)
    log = run_zs("log", str(out), "main", "--json", text=False)
    assert log.returncode == 0, log.stderr
    assert [[r["id"], r["message"], r["metadata"]] for r in map(json.loads, log.stdout.splitlines())] == theirs[
        "history"
    ]
    chunk = run_zs("chunk", str(out), "main", "scalar", "", "--data", "--repo", str(repo), text=False)
    assert chunk.returncode == 0, chunk.stderr
    assert chunk.stdout == base64.b64decode(theirs["chunk"])
    changed = run_zs("chunk-log", str(out), "main", "scalar", "", "--json", text=False)
    assert changed.returncode == 0, changed.stderr
    assert [json.loads(r)["id"] for r in changed.stdout.splitlines()] == [h[0] for h in theirs["history"][:2]]


V1_REF_NAMES = r"""
import json, sys, icechunk as ic, zarr
repo = ic.Repository.create(ic.local_filesystem_storage(sys.argv[1]))
s = repo.writable_session("main")
zarr.group(store=s.store)
sid = s.commit("root")
names = ["a~b", "\u00e9", "a%b", "x{y}", "a b"]
for name in names:
    repo.create_tag(name, sid)
repo.create_branch("br~\u00fc", sid)
print(json.dumps({"tags": {n: repo.lookup_tag(n) for n in names}, "branch": repo.lookup_branch("br~\u00fc"),
                  "listed_tags": sorted(repo.list_tags()), "listed_branches": sorted(repo.list_branches())}))
"""


def test_v1_ref_names_are_percent_decoded(icechunk1_python, tmp_path):
    """icechunk 1.1 stores refs under percent-encoded paths (refs/tag.a%7Eb/); the names are the
    ones it was given and looks refs up by, though its own listing shows branches encoded and
    leaves such tags out."""
    theirs = run_peer_json(icechunk1_python, V1_REF_NAMES, str(tmp_path / "repo"))
    assert "br%7E%C3%BC" in theirs["listed_branches"] and theirs["listed_tags"] == ["a b"]
    repo = Repository.open(str(tmp_path / "repo"))
    assert repo.tags() == theirs["tags"]
    assert repo.branches() == {"br~\u00fc": theirs["branch"], "main": theirs["branch"]}
