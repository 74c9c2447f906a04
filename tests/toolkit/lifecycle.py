"""A repository that real icechunk changes step by step, with icechunk's own view after each step, and what
a backup set or ``zs status`` must say about it: for the tests of ``zs backup`` and ``zs status``."""

from __future__ import annotations

import contextlib
import json
import subprocess
import time
from collections import Counter
from pathlib import Path

import pytest

from toolkit.oracle import CLEAN_EXIT
from zsarchive.archive import NotFound, RepoArchive

LIFE = r"""
import sys, json, datetime, numpy as np, zarr, icechunk as ic
where = json.loads(sys.argv[1])
if where["kind"] == "s3":
    storage = ic.s3_storage(bucket=where["bucket"], prefix=where["prefix"], endpoint_url=where["endpoint"],
                            allow_http=True, region="us-east-1", access_key_id="testing",
                            secret_access_key="testing", force_path_style=True)
else:
    storage = ic.local_filesystem_storage(where["path"])
repo = None
counter = 0

def utc(t):
    return t.astimezone(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")

def commit(branch, message):
    global counter
    counter += 1
    s = repo.writable_session(branch)
    root = zarr.open_group(store=s.store)
    root["small"][counter % 16] = counter
    if counter % 3 == 0:
        root["native"][:, counter % 16] = float(counter)
    return s.commit(message)

def view(extra):
    branches = {b: repo.lookup_branch(b) for b in sorted(repo.list_branches())}
    tags = {t: repo.lookup_tag(t) for t in sorted(repo.list_tags())}
    ancestry = {f"branch:{b}": [[i.id, utc(i.written_at)] for i in repo.ancestry(branch=b)] for b in branches}
    ancestry.update({f"tag:{t}": [[i.id, utc(i.written_at)] for i in repo.ancestry(tag=t)] for t in tags})
    ops = [[type(u.kind).__name__ + "Update", utc(u.updated_at)] for u in repo.ops_log()]
    snapshots = sorted(s["id"] for s in repo.inspect_repo_info()["snapshots"])
    print(json.dumps({"branches": branches, "tags": tags, "ancestry": ancestry, "ops": ops,
                      "snapshots": snapshots, "extra": extra}), flush=True)

for line in sys.stdin:
    step = json.loads(line)
    extra = None
    if step["do"] == "create":
        repo = ic.Repository.create(storage)
        s = repo.writable_session("main")
        root = zarr.group(store=s.store)
        root.create_array("small", shape=(16,), chunks=(2,), dtype="i4", fill_value=0)
        root.create_array("native", shape=(16, 16), chunks=(16, 16), dtype="f8", fill_value=0)[:] = 1.0
        s.commit("layout")
        commit("main", "first values")
        repo.create_tag("v1", repo.lookup_branch("main"))
    elif step["do"] == "commit":
        for _ in range(step.get("n", 1)):
            commit(step.get("branch", "main"), f"commit {counter + 1}")
    elif step["do"] == "branch":
        repo.create_branch(step["name"], repo.lookup_branch("main"))
        commit(step["name"], "on a branch")
        commit(step["name"], "on a branch again")
    elif step["do"] == "reset":
        ids = [i.id for i in repo.ancestry(branch=step["name"])]
        repo.reset_branch(step["name"], ids[1])
    elif step["do"] == "bulk":  # incompressible native chunks, 1 MiB each: an export that takes a while
        s = repo.writable_session("main")
        rows = 256 * step["mib"]
        data = np.random.default_rng(counter).random((rows, 1024), dtype="f4")
        zarr.open_group(store=s.store).create_array(f"bulk{counter}", shape=data.shape, chunks=(256, 1024),
                                                    dtype="f4", compressors=None)[:] = data
        counter += 1
        s.commit("bulk data")
    elif step["do"] == "delete-tag":
        repo.delete_tag(step["name"])
    elif step["do"] == "expire":
        commit("main", "before the cutoff")
        cutoff = datetime.datetime.now(datetime.timezone.utc)
        commit("main", "after the cutoff")
        extra = sorted(repo.expire_snapshots(older_than=cutoff))
    view(extra)
"""
"""Runs under icechunk 2.x with ``WHERE`` (JSON: a local path or an S3 bucket, prefix and endpoint):
reads steps as JSON lines and answers each with icechunk's view of the repository after it."""


class Life:
    """A repository that icechunk changes step by step, with icechunk's view after each step."""

    def __init__(self, python: Path, where: dict):
        self.process = subprocess.Popen(
            [str(python), "-c", LIFE + CLEAN_EXIT, json.dumps(where)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self.view: dict = {}

    def step(self, **command) -> dict:
        self.process.stdin.write(json.dumps(command) + "\n")
        self.process.stdin.flush()
        line = self.process.stdout.readline()
        assert line, f"the icechunk peer stopped at {command}"
        self.view = json.loads(line)
        return self.view

    def close(self) -> None:
        with contextlib.suppress(BrokenPipeError):
            self.process.stdin.close()
        assert self.process.wait(timeout=120) == 0


def expected_status(before: dict, now: dict) -> list[dict]:
    """The rows ``zs status`` must give for an archive made at ``before``, from icechunk's two views."""
    archived = set(before["snapshots"])
    rows = []
    plural = {"branch": "branches", "tag": "tags"}
    for kind, name in sorted(
        {(kind, name) for view in (before, now) for kind in plural for name in view[plural[kind]]}
    ):
        was, current = before[plural[kind]].get(name), now[plural[kind]].get(name)
        row = {"type": kind, "name": name, "archived": was, "current": current, "new_snapshots": 0, "newest": None}
        if current is None:
            row["state"] = "deleted"
        elif current == was:
            row["state"] = "up to date"
        else:
            history = now["ancestry"][f"{kind}:{name}"]
            ids = [sid for sid, _ in history]
            new = ids.index(was) if was in ids else next((i for i, sid in enumerate(ids) if sid in archived), len(ids))
            row.update(
                state="new" if was is None else "ahead" if was in ids else "moved",
                new_snapshots=new,
                newest=history[0][1] if new else None,
            )
        rows.append(row)
    old = {tuple(entry) for entry in before["ops"]}
    fresh = [entry for entry in now["ops"] if tuple(entry) not in old]
    expired = len(archived - set(now["snapshots"]))
    rows.append(
        {
            "type": "ops_log",
            "state": "ahead" if fresh or expired else "up to date",
            "new_entries": len(fresh),
            "newest": max((t for _, t in fresh), default=None),
            "entries": dict(sorted(Counter(kind for kind, _ in fresh).items())),
            "expired_snapshots": expired,
        }
    )
    return rows


def check_names_agree_with_ancestry(archive: RepoArchive, view: dict) -> None:
    """Every branch and tag, ``REF~N`` for every N to the first commit: icechunk's ancestry; one more: an error."""
    refs = archive.refs()
    assert {r["name"]: r["snapshot_id"] for r in refs if r["type"] == "branch"} == view["branches"]
    assert {r["name"]: r["snapshot_id"] for r in refs if r["type"] == "tag"} == view["tags"]
    for ref, history in view["ancestry"].items():
        for n, (sid, _) in enumerate(history):
            assert archive.resolve(f"{ref}~{n}") == sid
        if len(history) > 2:
            assert archive.resolve(ref + "^^") == history[2][0]
        with pytest.raises(NotFound, match=rf"holds {len(history)} snapshot"):
            archive.resolve(f"{ref}~{len(history)}")


class Dest:
    """Where the set lives and how to list it: names -> sizes of the archives, lock and settings."""

    def __init__(self, url: str, env: dict, listing):
        self.url, self.env, self.listing = url, env, listing


def local_listing(root: Path) -> dict[str, int]:
    return {p.name: p.stat().st_size for p in root.iterdir() if p.is_file()} if root.exists() else {}


def s3_listing(client, bucket: str, prefix: str) -> dict[str, int]:
    found = client.list_objects_v2(Bucket=bucket, Prefix=prefix).get("Contents", [])
    return {item["Key"][len(prefix) :]: item["Size"] for item in found}


def wait_for(condition, process: subprocess.Popen, seconds: float = 60) -> None:
    """Return once ``condition()`` holds (polled every 2 ms); fail if ``process`` ends first or time runs out."""
    deadline = time.monotonic() + seconds
    while not condition():
        assert process.poll() is None, "the run ended before the moment the test waits for"
        assert time.monotonic() < deadline
        time.sleep(0.002)
