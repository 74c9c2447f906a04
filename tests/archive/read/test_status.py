"""``zs status ARCHIVE REPO`` against a repository real icechunk keeps in moto's S3: what changed since the
archive, as icechunk's own view says, read from the refs and the ``repo`` file alone (a proxy in front
of the server logs every request: no snapshot, manifest, transaction log or chunk is fetched)."""

from __future__ import annotations

import json
import os

from toolkit.cli import run_zs
from toolkit.lifecycle import Life, expected_status
from toolkit.oracle import repo_path
from toolkit.servers import ObjectStoreProxy, moto_s3
from zsarchive.archive import RepoArchive, export


def test_status_reads_only_the_repo_file_and_names_what_changed(icechunk2_python, tmp_path):
    with moto_s3({"status": {}}):
        endpoint = os.environ["AWS_ENDPOINT_URL"]
        life = Life(icechunk2_python, {"kind": "s3", "bucket": "status", "prefix": "repo", "endpoint": endpoint})
        try:
            archived = life.step(do="create")
            export("s3://status/repo", tmp_path / "a.zs")
            life.step(do="commit", n=2)
            life.step(do="branch", name="dev")
            life.step(do="delete-tag", name="v1")
            now = life.step(do="expire")
        finally:
            life.close()
        proxy = ObjectStoreProxy(int(endpoint.rsplit(":", 1)[1]))
        try:
            proc = run_zs(
                "status", str(tmp_path / "a.zs"), "s3://status/repo", "--json", env={"AWS_ENDPOINT_URL": proxy.endpoint}
            )
        finally:
            proxy.stop()
        with RepoArchive(tmp_path / "a.zs") as archive:  # the Python API gives the same rows
            api = archive.status("s3://status/repo")
    assert proc.returncode == 1, proc.stderr  # behind
    rows = [json.loads(line) for line in proc.stdout.splitlines()]
    assert rows == expected_status(archived, now)
    states = {(row["type"], row["name"]): row["state"] for row in rows[:-1]}
    assert states == {("branch", "dev"): "new", ("branch", "main"): "moved", ("tag", "v1"): "deleted"}
    assert archived["branches"]["main"] in now["extra"]  # main moved on, and its archived snapshot expired
    assert rows[-1]["expired_snapshots"] == len(set(archived["snapshots"]) & set(now["extra"])) > 0
    assert proxy.seen == [("GET", "/status/repo/repo")]
    assert api == rows


def test_status_of_an_archive_up_to_date_is_exit_0_and_a_table(tmp_path):
    export(repo_path(2), tmp_path / "a.zs")
    proc = run_zs("status", str(tmp_path / "a.zs"), str(repo_path(2)))
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].split() == ["REF", "STATE", "NEW", "NEWEST", "ARCHIVED", "CURRENT"]
    assert all(" up to date " in line for line in lines[1:-1]) and lines[-1] == "ops log: up to date"
