"""The one walk from a snapshot through its parents (zsarchive/walk.py) and the places that walk with
it: the exporter's parents-first order, what branches and tags reach, the validation of an archive's
parent links, and a restore's ancestry; in hostile input the links loop, and every walk ends."""

from __future__ import annotations

import dataclasses
import shutil

import pytest

from toolkit.places import TESTDATA
from toolkit.archives import history_archive
from toolkit.cli import one_line_error, run_hostile
from zsarchive.archive.write.plan import parents_first
from zsarchive.errors import ZSCorrupt
from zsarchive.icechunk.model import SnapshotInfo
from zsarchive.icechunk.repo_info import decode_repo_info, encode_repo_info
from zsarchive.icechunk.repository import Repository
from zsarchive.walk import parent_chain

A, B, C, D = (letter * 19 + "0" for letter in "ABCD")  # snapshot ids in their canonical spelling


def test_the_walk_follows_parents_and_guards_loops():
    parents = {C: B, B: A, A: None}
    assert list(parent_chain(C, parents.__getitem__)) == [C, B, A]
    looping = {A: B, B: A}
    assert list(parent_chain(A, looping.__getitem__)) == [A, B]  # without a guard a loop ends where it closes
    with pytest.raises(ZSCorrupt, match=f"at {A}"):
        list(parent_chain(A, looping.__getitem__, lambda at: ZSCorrupt(f"loops at {at}")))
    asked = []
    walk = parent_chain(C, lambda sid: asked.append(sid) or parents[sid])
    assert next(walk) == C and asked == []  # the parent of an id is asked only after the caller took it


def _info(sid: str, parent: str | None) -> SnapshotInfo:
    return SnapshotInfo(sid, parent, 0, "", {})


def test_the_export_orders_snapshotsparents_first():
    snapshots = [_info(D, B), _info(C, B), _info(B, A), _info(A, None)]
    order = [info.id for info in parents_first(snapshots)]
    assert sorted(order) == [A, B, C, D]
    assert all(order.index(info.parent_id) < order.index(info.id) for info in snapshots if info.parent_id)
    # a parent the list lacks (expired) starts a history of its own
    assert [info.id for info in parents_first([_info(C, B), _info(D, C)])] == [C, D]
    with pytest.raises(ZSCorrupt, match=f"parent chain of snapshot {C} loops"):
        parents_first([_info(C, B), _info(B, C)])


def test_validation_names_a_loop_of_parent_links(tmp_path):
    path = history_archive(tmp_path / "loop.zs", {A: (B, 2 * 10**15, "a", "{}", ()), B: (A, 10**15, "b", "{}", ())})
    one_line_error(run_hostile("validate", str(path)), "parent links of snapshot", "loop at")


def test_an_ops_log_whose_older_files_loop_ends_in_one_error(tmp_path):
    # the ops log continues through repo_before_updates into overwritten/; a file naming itself loops
    repo = tmp_path / "repo"
    shutil.copytree(TESTDATA / "icechunk" / "v2", repo)
    older = Repository.open(str(repo)).repo_info().repo_before_updates
    path = repo / "overwritten" / older
    info = decode_repo_info(path.read_bytes(), str(path))
    path.write_bytes(encode_repo_info(dataclasses.replace(info, repo_before_updates=older)))
    whole = list(Repository.open(str(TESTDATA / "icechunk" / "v2")).ops_log())
    entries = []
    with pytest.raises(ZSCorrupt, match=f"repo_before_updates chain loops at {older}"):
        entries.extend(Repository.open(str(repo)).ops_log())
    assert entries == whole[: len(entries)] and any(e.backup_path == older for e in entries)
