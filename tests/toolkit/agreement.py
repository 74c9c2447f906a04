"""Checks that zsarchive says what the real icechunk says about one repository.

``answers`` is the oracle's JSON (scripts/icechunk_oracle.py, see oracle.py). The fixture tests
(system/test_archive.py, icechunk/test_oracle.py, archive/zarrstore/test_zarr_store.py) and the random differential test
(system/test_differential.py) hold zsarchive's reader, archive and zarr store against it with these.
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import datetime
import re
from pathlib import Path
from typing import Iterable

import pytest

from zsarchive import open_store
from zsarchive.archive import NotFound, RepoArchive
from zsarchive.errors import ZSError
from zsarchive.icechunk import Repository, format_time
from zsarchive.icechunk import inspect as views

_TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{1,9})?Z")
_TIME_US = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z")
SET_FIELDS = ("new_groups", "new_arrays", "deleted_groups", "deleted_arrays", "updated_groups", "updated_arrays")


def b64(text: str) -> bytes:
    return base64.b64decode(text)


def instant(text: str) -> datetime.datetime:
    return datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))


def same_time(micros: int, theirs: str) -> bool:
    """Whether our microsecond timestamp is the instant icechunk printed."""
    return instant(format_time(micros)) == instant(theirs)


def assert_superset(ours, theirs, where: str = "$") -> None:
    """Every key icechunk reports is in ours with the same value (lists: same length, element-wise)."""
    if isinstance(theirs, dict):
        assert isinstance(ours, dict), f"{where}: expected an object, got {ours!r}"
        for key, value in theirs.items():
            assert key in ours, f"{where}: key {key!r} missing (icechunk says {value!r})"
            assert_superset(ours[key], value, f"{where}.{key}")
    elif isinstance(theirs, list):
        assert isinstance(ours, list) and len(ours) == len(theirs), f"{where}: {ours!r} != {theirs!r}"
        for i, (a, b) in enumerate(zip(ours, theirs)):
            assert_superset(a, b, f"{where}[{i}]")
    elif isinstance(theirs, str) and _TIME.fullmatch(theirs):
        # icechunk trims the fraction (.947Z for .947000Z); we always print microseconds.
        assert _TIME_US.fullmatch(ours), f"{where}: {ours!r} is not RFC 3339 with microseconds and Z"
        assert instant(ours) == instant(theirs), f"{where}: {ours!r} != {theirs!r}"
    else:
        assert ours == theirs, f"{where}: {ours!r} != {theirs!r}"


def chunk_key(zarr_json: dict, path: str, coords: Iterable[int]) -> str:
    """The zarr key of a chunk of the array at ``path`` (``/a/b`` or ``a/b``)."""
    encoding = zarr_json.get("chunk_key_encoding", {"name": "default"})
    sep = encoding.get("configuration", {}).get("separator", "/" if encoding["name"] == "default" else ".")
    coords = [str(c) for c in coords]
    key = sep.join(["c", *coords]) if encoding["name"] == "default" else (sep.join(coords) or "0")
    path = path.strip("/")
    return f"{path}/{key}" if path else key


def component_order(paths: Iterable[str]) -> list[str]:
    """``paths`` in the archive's node order: component by component (``/a``, ``/a/b``, ``/a-b``)."""
    return sorted(paths, key=lambda p: [] if p.strip("/") == "" else p.strip("/").split("/"))


def sorted_diff(diff: dict) -> dict:
    """An icechunk diff with its sets as sorted lists (their order means nothing)."""
    out = dict(diff)
    for name in SET_FIELDS:
        out[name] = sorted(out[name])
    out["updated_chunks"] = {p: sorted(c) for p, c in sorted(out["updated_chunks"].items())}
    out["moved_nodes"] = sorted([list(m) for m in out.get("moved_nodes", [])])
    return out


# -- zsarchive.icechunk: the repository reader ----------------------------------------------------------


def check_reader(answers: dict, repo: Repository, deleted_tags: list[str]) -> None:
    """Refs, histories and every file as ``zs icechunk inspect`` shows it, against icechunk."""
    assert repo.spec_version == answers["spec_version"]
    assert repo.branches() == answers["branches"]
    assert repo.tags() == answers["tags"]
    assert repo.deleted_tags() == sorted(deleted_tags)
    for key, chain in answers["ancestry"].items():
        ours = repo.ancestry(key.split(":", 1)[1])
        assert [s.id for s in ours] == [s["id"] for s in chain], key
        for mine, theirs in zip(ours, chain):
            assert (mine.parent_id, mine.message, mine.metadata) == (
                theirs["parent_id"],
                theirs["message"],
                theirs["metadata"],
            ), (key, mine.id)
            assert same_time(mine.flushed_at, theirs["written_at"]), (key, mine.id)
            if "manifests" in theirs:
                files = repo.snapshot(mine.id).manifest_files
                assert [
                    {"id": m.id, "size_bytes": m.size_bytes, "num_chunk_refs": m.num_chunk_refs} for m in files
                ] == theirs["manifests"], (key, mine.id)
    for sid, theirs in answers["snapshots"].items():
        theirs = {k: v for k, v in theirs.items() if k != "reachable"}
        assert_superset(views.inspect_snapshot(repo, sid), theirs, f"snapshot {sid}")
    if "repo_info" in answers:
        assert_superset(views.inspect_repo_info(repo), answers["repo_info"], "repo_info")
        assert repo.metadata() == answers["metadata"]
    for mid, theirs in answers.get("manifests", {}).items():
        assert_superset(views.inspect_manifest(repo, mid), theirs, f"manifest {mid}")
    for sid, theirs in answers.get("transaction_logs", {}).items():
        if "error" in theirs:  # icechunk has no log to show (the root snapshot's): nor have we
            with pytest.raises(ZSError):
                views.inspect_transaction_log(repo, sid)
            continue
        if "synthetic_composite" in theirs:  # the same merged logs; the note is prose of each tool's own
            theirs = {
                **theirs,
                "synthetic_composite": {k: v for k, v in theirs["synthetic_composite"].items() if k != "note"},
            }
        assert_superset(views.inspect_transaction_log(repo, sid), theirs, f"transaction log {sid}")
    compared = check_transaction_logs(answers, repo)
    children = {s["id"] for chain in answers["ancestry"].values() for s in chain if s["parent_id"]}
    assert compared >= 1 or not children, "no transaction log was held against icechunk's diff"


def check_transaction_logs(answers: dict, repo: Repository) -> int:
    """Each child's transaction log, node ids named by path, is icechunk's diff(parent, child); returns
    how many were compared (every child icechunk diffed against its parent)."""
    parents = {s.id: s.parent_id for s in repo.snapshots()}
    theirs_parent = {s["id"]: s["parent_id"] for chain in answers["ancestry"].values() for s in chain}
    compared = 0
    for item in answers["diffs"]:
        old, new = item["from"], item["to"]
        if theirs_parent.get(new, parents.get(new)) != old or "error" in item:
            continue
        assert parents.get(new) == old, (new, "parent", parents.get(new), "icechunk says", old)
        changes = repo.changes(new)
        log = dataclasses.replace(changes.log, moved_nodes=list(changes.moves))
        after = {n.id: n.path for n in repo.snapshot(new).nodes}
        before = {n.id: n.path for n in repo.snapshot(old).nodes}
        # an amended commit's log can name a node it created and deleted: no path, no diff entry
        path = {**before, **after}.get
        ours = {name: [path(i) for i in getattr(log, name) if path(i)] for name in SET_FIELDS}
        ours.update(
            {
                "updated_chunks": {
                    path(i): [list(c) for c in coords] for i, coords in log.updated_chunks.items() if path(i)
                },
                "moved_nodes": [[m.from_path, m.to_path] for m in log.moved_nodes],
            }
        )
        theirs = sorted_diff(item["diff"])
        assert {k: v for k, v in sorted_diff(ours).items() if k in theirs} == theirs, (old, new)
        compared += 1
    return compared


# -- the archive ------------------------------------------------------------------------------------------


def check_refs(answers: dict, archive: RepoArchive, deleted_tags: list[str]) -> None:
    refs = archive.refs()
    assert {r["name"]: r["snapshot_id"] for r in refs if r["type"] == "branch"} == answers["branches"]
    assert {r["name"]: r["snapshot_id"] for r in refs if r["type"] == "tag"} == answers["tags"]
    assert sorted(r["name"] for r in refs if r["type"] == "deleted_tag") == sorted(deleted_tags)


def check_ancestry(answers: dict, archive: RepoArchive) -> None:
    assert answers["ancestry"], "oracle gave no ancestry"
    for ref, history in answers["ancestry"].items():
        ours = archive.log(ref)
        assert [(s["id"], s["parent_id"], s["message"], s["metadata"], s["flushed_at"]) for s in ours] == [
            (s["id"], s["parent_id"], s["message"], s["metadata"], s["written_at"]) for s in history
        ], ref
        check_parent_names(archive, ref, [s["id"] for s in history])


def check_parent_names(archive: RepoArchive, ref: str, history: list[str]) -> None:
    """``REF~N`` and ``REF^...`` name icechunk's ancestry[N] for every N to the first commit; one step
    further is a one-line NotFound saying how deep the history is."""
    for n, sid in enumerate(history):
        assert archive.resolve(f"{ref}~{n}") == sid, (ref, n)
        if n <= 3:
            assert archive.resolve(ref + "^" * n) == sid, (ref, n)
    with pytest.raises(NotFound) as beyond:
        archive.resolve(f"{ref}~{len(history)}")
    assert (
        f"holds {len(history)} snapshot" in str(beyond.value)
        and f"{ref}~{len(history) - 1} is its first" in str(beyond.value)
        and "\n" not in str(beyond.value)
    )


def check_snapshot(answers: dict, archive: RepoArchive, ref: str, repo: Path | None) -> None:
    """``ls`` (nodes, their order, zarr.json), every chunk ref and its bytes at REF, against icechunk."""
    sid = archive.resolve(ref)
    tree = answers["trees"][sid]
    nodes = archive.ls(ref)
    paths = [n["path"] for n in nodes]
    assert paths == component_order(paths), ref
    # icechunk's own node list (zarr's members() skips some names, e.g. ones holding a backslash)
    assert sorted((n["path"], n["node_type"], n["id"]) for n in nodes) == sorted(
        (n["path"], n["node_type"], n["id"]) for n in answers["snapshots"][sid]["nodes"]
    ), ref
    seen = set()
    for node in nodes:
        key = (node["path"].lstrip("/") + "/zarr.json").lstrip("/")
        assert node["user_data"] == b64(tree["metadata"][key]["bytes_b64"]), (ref, key)
        seen.add(key)
        if node["node_type"] != "array":
            continue
        chunks = list(archive.chunk_refs(ref, node["path"]))
        coords = [c["coords"] for c in chunks]
        assert coords == tree["arrays"][node["path"].lstrip("/")]["chunk_coordinates"], (ref, node["path"])
        for chunk in chunks:
            key = chunk_key(node["zarr_json"], node["path"], chunk["coords"])
            expected = tree["chunks"][key]
            seen.add(key)
            assert "chunk_type" in expected, (ref, key, expected.get("chunk_type_error"))
            assert expected["chunk_type"] == chunk["kind"], (ref, key)
            if "error" in expected:  # icechunk refuses it (e.g. its virtual file changed): so must we
                with pytest.raises(ZSError, match="changed since the virtual ref was written"):
                    archive.read_chunk(chunk, ref, repo)
                continue
            assert archive.read_chunk(chunk, ref, repo) == b64(expected["bytes_b64"]), (ref, key)
    assert seen == set(tree["keys"]), (ref, sorted(set(tree["keys"]) ^ seen))


def check_diffs(answers: dict, archive: RepoArchive) -> None:
    assert answers["diffs"], "oracle gave no diffs"
    for item in answers["diffs"]:
        if "error" in item:  # icechunk cannot: a transaction log between them is gone
            left_out = any("error" in answers["trees"].get(item[end], {}) for end in ("from", "to"))
            with pytest.raises(
                ZSError, match="unknown snapshot" if left_out else "its transaction log was no longer in the repository"
            ):
                archive.diff(f"snapshot:{item['from']}", f"snapshot:{item['to']}")
            continue
        ours = archive.diff(f"snapshot:{item['from']}", f"snapshot:{item['to']}")
        expected = sorted_diff(item["diff"])
        ours["moved_nodes"] = sorted(ours["moved_nodes"])
        assert ours == expected, (item["from"], item["to"])


def check_ops_log(answers: dict, archive: RepoArchive) -> None:
    ours = archive.ops_log()
    expected = answers.get("ops_log") or []
    assert len(ours) == len(expected)
    for mine, theirs in zip(ours, expected):
        assert mine["type"] == theirs["kind"] + "Update"
        assert mine["updated_at"] == theirs["updated_at"]
        assert mine["backup_path"] == theirs["backup_path"]
        for name, value in theirs["fields"].items():
            assert mine.get(name) == value, (theirs, mine)


async def _store_keys_and_values(store) -> tuple[list[str], dict]:
    from zarr.core.buffer import default_buffer_prototype

    keys = sorted([k async for k in store.list()])
    values = {}
    for key in keys:
        try:
            value = await store.get(key, default_buffer_prototype())
            values[key] = None if value is None else value.to_bytes()
        except ZSError as exc:
            values[key] = exc
    return keys, values


def check_store(store, tree: dict, ref: str) -> None:
    """The zarr store of an archive snapshot lists the keys and serves the bytes icechunk's store does."""
    keys, values = asyncio.run(_store_keys_and_values(store))
    assert keys == tree["keys"], ref
    for key in keys:
        expected = tree["metadata"].get(key) or tree["chunks"][key]
        if "bytes_b64" in expected:
            assert values[key] == b64(expected["bytes_b64"]), (ref, key)
        else:  # icechunk refuses this chunk (its file changed): so must we, loudly
            assert isinstance(values[key], ZSError), (ref, key)
            assert "changed since the virtual ref was written" in str(values[key])


def every_ref(answers: dict) -> dict[str, str]:
    """Every branch and tag, and every snapshot icechunk can open, by id (reachable or not)."""
    refs = dict(answers["refs"])
    refs.update({f"snapshot:{sid}": sid for sid, tree in answers["trees"].items() if "error" not in tree})
    return refs


def check_archive(
    answers: dict, archive_path: Path, repo: Path, deleted_tags: list[str], authorize: Iterable[str]
) -> None:
    """Every answer of the archive (refs, logs, ls and chunks at every snapshot, bytes, diffs, ops log,
    zarr store) against icechunk's."""
    with RepoArchive(archive_path, authorize=authorize) as archive:
        check_refs(answers, archive, deleted_tags)
        check_ancestry(answers, archive)
        for ref, sid in every_ref(answers).items():
            check_snapshot(answers, archive, ref, repo)
            check_store(open_store(archive, ref, repo=repo), answers["trees"][sid], ref)
        check_diffs(answers, archive)
        check_ops_log(answers, archive)


def check_chunk_history(repo: Repository, archive_path: Path) -> None:
    """The archive's per-chunk history (whatever its format keeps of it) is every chunk each exported
    snapshot's transaction log names, logs held against icechunk's diff by :func:`check_transaction_logs`."""
    with RepoArchive(archive_path) as archive:
        exported = {entry["id"] for entry in archive.log()}
        expected, nodes = set(), set()
        for info in repo.snapshots():
            if info.id not in exported:
                continue
            nodes.update(n.id for n in repo.snapshot(info.id).nodes if n.shape is not None)
            log = repo.changes(info.id).log if info.parent_id is not None else None
            for node_id, coords in ({} if log is None else log.updated_coords).items():
                nodes.add(node_id)
                expected.update((node_id, tuple(int(x) for x in row), info.id) for row in coords)
        found = {(node_id, coords, sid) for node in nodes for node_id, coords, _, sid in archive.history_entries(node)}
        assert found == expected
        for name in [ref["name"] for ref in archive.refs() if ref["type"] == "branch"]:  # the views' bulk decoding
            history = {entry["id"] for entry in archive.log(name)}
            for node in archive.ls(name):
                if node["node_type"] != "array":
                    continue
                changes = archive.chunk_changes(name, node["path"])
                ids = [commit["id"] for commit in changes["commits"]]
                rows = [(tuple(c), ids[i]) for c, i in zip(changes["coords"].tolist(), changes["commit"].tolist())]
                assert sorted(rows) == sorted(
                    (coords, sid) for node_id, coords, sid in expected if node_id == node["id"] and sid in history
                ), (name, node["path"])
