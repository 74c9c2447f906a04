"""``zs backup`` through the life of a real icechunk 2.3 repository (commits, a new branch, a branch reset, a
tag deleted, ``expire_snapshots``, a long run of commits that triggers consolidation), on a local directory
and on moto's S3 server: after every run the set answers as a full export made then, ``main~N`` names
icechunk's ancestry, ``zs status`` names exactly what changed by icechunk's own view before the run and
nothing after it, and a run without changes writes nothing."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from toolkit.archives import assert_chain_is_full_export
from toolkit.cli import one_line_error, run_zs, terminated
from toolkit.lifecycle import (
    Dest,
    Life,
    check_names_agree_with_ancestry,
    expected_status,
    local_listing,
    s3_listing,
    wait_for,
)
from toolkit.oracle import repo_path
from toolkit.peers import run_peer_script
from toolkit.servers import ObjectStoreProxy, azurite, moto_s3  # noqa: F401
from zsarchive import open_store
from zsarchive.archive import RepoArchive, export
from zsarchive.archive.backup import backup
from zsarchive.archive.read.backupset import BackupSet
from zsarchive.archive.read.validate import validate_file
from zsarchive.errors import ZSError


@pytest.fixture(params=["local", "s3"])
def place(request, tmp_path):
    """(repository location for icechunk, the same for zsarchive, the DEST)."""
    if request.param == "local":
        yield (
            {"kind": "local", "path": str(tmp_path / "repo")},
            str(tmp_path / "repo"),
            Dest(str(tmp_path / "dest"), {}, lambda: local_listing(tmp_path / "dest")),
        )
        return
    with moto_s3({"life": {}}) as client:
        endpoint = os.environ["AWS_ENDPOINT_URL"]
        env = {k: os.environ[k] for k in os.environ if k.startswith("AWS_")}
        yield (
            {"kind": "s3", "bucket": "life", "prefix": "repo", "endpoint": endpoint},
            "s3://life/repo",
            Dest("s3://life/dest/", env, lambda: s3_listing(client, "life", "dest/")),
        )


def test_backups_follow_a_repository_through_its_life(place, icechunk2_python, tmp_path):
    where, repo, dest = place
    life = Life(icechunk2_python, where)
    runs = 0
    last: dict = {}

    def run_backup(*args: str, expect: str) -> list[str]:
        """One ``zs backup`` run; the archives it added."""
        nonlocal runs, last
        before = dest.listing()
        proc = run_zs("backup", repo, dest.url, *args, env=dest.env)
        assert proc.returncode == 0, proc.stderr
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(expect), proc.stderr
        added = sorted(set(dest.listing()) - set(before) - {"zsbackup.json"})
        assert all(dest.listing()[name] == size for name, size in before.items() if name != "zsbackup.json")
        runs += 1
        full = tmp_path / f"full{runs}.zs"
        export(repo, full)  # what a full export made now holds
        assert_chain_is_full_export(dest.url, full, tmp_path / f"view{runs}.zs")
        with RepoArchive(dest.url) as archive:
            check_names_agree_with_ancestry(archive, life.view)
            assert all(row["state"] == "up to date" for row in archive.status(repo))
        after = dest.listing()
        again = backup(repo, dest.url)  # nothing changed since: nothing written
        assert again.up_to_date and dest.listing() == after
        last = life.view
        return added

    def check_status() -> None:
        """Before a run: the set lacks exactly what icechunk's view says changed since the last run."""
        proc = run_zs("status", dest.url, repo, "--json", env=dest.env)
        rows = [json.loads(line) for line in proc.stdout.splitlines()]
        expected = expected_status(last, life.view)
        assert rows == expected
        assert proc.returncode == (1 if any(row["state"] != "up to date" for row in expected) else 0), proc.stderr

    try:
        life.step(do="create")
        first = run_backup("--max-chain", "5", "--max-fragments-size", "1000", expect="wrote ")
        assert [name.endswith("-full.zs") for name in first] == [True]
        steps = [
            dict(do="commit", n=2),
            dict(do="branch", name="dev"),
            dict(do="reset", name="dev"),
            dict(do="delete-tag", name="v1"),
            dict(do="expire"),
        ]
        for step in steps:
            view = life.step(**step)
            if step["do"] == "expire":
                assert view["extra"], "icechunk expired nothing"
            check_status()
            added = run_backup(expect="wrote ")
            assert [name.endswith("-fragment.zs") for name in added] == [True]
        # the sixth fragment is past --max-chain 5: a consolidated full archive follows it, validated
        life.step(do="commit")
        check_status()
        added = run_backup(expect="wrote ")
        assert [name.rsplit("-", 1)[1] for name in added] == ["fragment.zs", "full.zs"]
        with RepoArchive(dest.url) as archive:
            assert [os.path.basename(m["location"]) for m in archive.chain()] == [added[1]]
        for _ in range(2):
            life.step(do="commit")
            run_backup(expect="wrote ")
        assert sorted(n for n in dest.listing() if n.endswith(".zs")) == sorted(
            dest.listing().keys() - {"zsbackup.json"}
        )
        # the settings are remembered: a ratio given once makes this run consolidate at once
        life.step(do="commit", branch="dev")
        added = run_backup("--max-fragments-size", "0.01", expect="wrote ")
        assert [name.rsplit("-", 1)[1] for name in added] == ["fragment.zs", "full.zs"]
        settings = BackupSet(dest.url).settings()
        assert (settings.max_chain, settings.max_fragments_size) == (5, 0.01)
        proc = run_zs("backup", repo, dest.url, "--prune", env=dest.env)
        assert proc.returncode == 0 and proc.stderr.startswith("up to date: "), proc.stderr
        pruned = proc.stdout.split()
        names = sorted(n for n in dest.listing() if n.endswith(".zs"))
        assert [p.rsplit("/", 1)[1] for p in pruned] == names[:-1]  # all but the newest (consolidated) one
    finally:
        life.close()
    for name in names:
        validate_file(dest.url.rstrip("/") + "/" + name)


def test_a_second_run_holding_the_lock_refuses_in_one_line(icechunk2_python, tmp_path):
    """Two runs at once, for real: the first stopped while it holds the lock, the second refuses naming it
    (or waits with --wait); the first then completes."""
    life = Life(icechunk2_python, {"kind": "local", "path": str(tmp_path / "repo")})
    try:
        life.step(do="create")
    finally:
        life.close()
    dest = tmp_path / "dest"
    first = subprocess.Popen(
        [sys.executable, "-m", "zsarchive", "backup", str(tmp_path / "repo"), str(dest)],
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_for(lambda: (dest / "zsbackup.lock").exists(), first)
        os.kill(first.pid, 19)  # SIGSTOP: it holds the lock for as long as this test likes
        second = run_zs("backup", str(tmp_path / "repo"), str(dest))
        one_line_error(second, f"{dest}/zsbackup.lock: another run holds the lock (host ")
        assert f"pid {first.pid}," in second.stderr
        waited = run_zs("backup", str(tmp_path / "repo"), str(dest), "--wait", "1s")
        one_line_error(waited, "another run holds the lock")
    finally:
        os.kill(first.pid, 18)  # SIGCONT
    assert first.wait(timeout=120) == 0, first.stderr.read()
    assert not (dest / "zsbackup.lock").exists()
    assert run_zs("backup", str(tmp_path / "repo"), str(dest)).stderr.startswith("up to date")


def _partials(directory: Path) -> set[str]:
    """The archives being written below ``directory`` (a writer's ``.NAME.PID.partial``)."""
    return {
        os.path.join(top, name) for top, _, names in os.walk(directory) for name in names if name.endswith(".partial")
    }


def _kill_mid_export(args: list[str], workdir: Path, env: dict) -> None:
    """Start ``zs backup ARGS``, and SIGKILL it while it writes an archive below ``workdir``."""
    before = _partials(workdir)
    run = subprocess.Popen(
        [sys.executable, "-m", "zsarchive", "backup", *args], stderr=subprocess.PIPE, env={**os.environ, **env}
    )
    try:
        wait_for(lambda: _partials(workdir) - before, run)
    finally:
        run.kill()
        run.wait(timeout=60)
    assert run.returncode == -9
    assert _partials(workdir) - before  # killed while the archive was half written


@pytest.mark.parametrize("kind", ["local", "s3"])
def test_a_run_killed_mid_export_leaves_the_set_whole_and_a_later_run_succeeds(kind, icechunk2_python, tmp_path):
    with contextlib.ExitStack() as stack:
        if kind == "s3":
            client = stack.enter_context(moto_s3({"killed": {}}))
            dest = Dest(
                "s3://killed/dest/",
                {k: os.environ[k] for k in os.environ if k.startswith("AWS_")},
                lambda: s3_listing(client, "killed", "dest/"),
            )
            workdir = tmp_path / "work"
            workdir.mkdir()
            extra = ["--workdir", str(workdir)]
        else:
            dest = Dest(str(tmp_path / "dest"), {}, lambda: local_listing(tmp_path / "dest"))
            workdir, extra = tmp_path / "dest", []
        repo = str(tmp_path / "repo")
        life = Life(icechunk2_python, {"kind": "local", "path": repo})
        try:
            life.step(do="create")
            life.step(do="bulk", mib=24)
            _kill_mid_export([repo, dest.url, "--include-chunks", "-j", "1", *extra], workdir, dest.env)
            assert set(dest.listing()) == {"zsbackup.lock"}  # no archive, no settings: the set as it was
            one_line_error(run_zs("log", dest.url, "main", env=dest.env), "holds no archive yet")
            stale = run_zs("backup", repo, dest.url, env=dest.env)
            one_line_error(stale, "which looks stale: no process", "runs here; --break-lock breaks it")
            # the killed run remembered nothing: its options are given again
            done = run_zs("backup", repo, dest.url, "--break-lock", "--include-chunks", *extra, env=dest.env)
            assert done.returncode == 0 and done.stderr.startswith("wrote "), done.stderr
            # the second run: killed while it writes a fragment; readers keep reading the full archive
            life.step(do="bulk", mib=24)
            held = dict(dest.listing())
            _kill_mid_export([repo, dest.url, "-j", "1", *extra], workdir, dest.env)
            assert dest.listing() == {**held, "zsbackup.lock": dest.listing()["zsbackup.lock"]}
            with RepoArchive(dest.url) as archive:
                assert (
                    len(archive.chain()) == 1 and archive.resolve("main") == life.view["ancestry"]["branch:main"][1][0]
                )
            done = run_zs("backup", repo, dest.url, "--break-lock", *extra, env=dest.env)
            assert done.returncode == 0 and done.stderr.startswith("wrote "), done.stderr
        finally:
            life.close()
        export(repo, tmp_path / "full.zs", include_chunks=True)
        assert_chain_is_full_export(dest.url, tmp_path / "full.zs", tmp_path / "view.zs")
        assert "zsbackup.lock" not in dest.listing()
        if kind == "local":
            assert not (tmp_path / "dest" / ".zsbackup-work").exists()


def test_sigterm_mid_export_releases_the_lock_and_leaves_the_set_as_it_was(icechunk2_python, tmp_path):
    """SIGTERM to a run writing its archive (a service manager stopping it) unwinds it as Ctrl-C does: one
    line, exit status 143, no lock left for the next run to break, no work directory, no archive; the next
    run, given no --break-lock, backs the repository up."""
    repo, dest = str(tmp_path / "repo"), tmp_path / "dest"
    life = Life(icechunk2_python, {"kind": "local", "path": repo})
    try:
        life.step(do="create")
        life.step(do="bulk", mib=24)
    finally:
        life.close()
    run = subprocess.Popen(
        [sys.executable, "-m", "zsarchive", "backup", repo, str(dest), "--include-chunks"],
        stderr=subprocess.PIPE,
        text=True,
    )
    terminated(run, lambda: (dest / "zsbackup.lock").exists() and bool(_partials(dest)), "backup")
    assert sorted(os.listdir(dest)) == [], sorted(os.listdir(dest))
    done = run_zs("backup", repo, str(dest), "--include-chunks")
    assert done.returncode == 0 and done.stderr.startswith("wrote "), done.stderr


ONE_MORE_COMMIT = r"""
import sys, zarr, icechunk as ic
repo = ic.Repository.open(ic.local_filesystem_storage(sys.argv[1]))
s = repo.writable_session("main")
zarr.open_group(store=s.store).create_array(sys.argv[2], shape=(4,), chunks=(2,), dtype="i4")[:] = 5
s.commit(sys.argv[2])
"""


@pytest.fixture
def fixture_copy(tmp_path):
    """A copy of the committed icechunk 2.3 repository, to change."""
    copy = tmp_path / "repo"
    shutil.copytree(repo_path(2), copy)
    return copy


def test_a_set_is_read_wherever_an_archive_is(fixture_copy, icechunk2_python, tmp_path):
    dest = tmp_path / "dest"
    backup(fixture_copy, dest, include_chunks=True)
    run_peer_script(icechunk2_python, ONE_MORE_COMMIT, str(fixture_copy), "later")
    result = backup(fixture_copy, dest)
    [full, fragment] = sorted(p.name for p in dest.glob("*.zs"))
    assert full.endswith("-full.zs") and fragment.endswith("-fragment.zs") and result.written[0].name == fragment
    summary = run_zs("summary", str(dest))
    assert summary.returncode == 0, summary.stderr
    assert f"chain        {dest / fragment} (fragment covering" in summary.stdout
    assert f"             {dest / full} (full archive" in summary.stdout
    checked = run_zs("validate", str(dest))
    assert checked.returncode == 0 and checked.stdout == "looks good!\n", checked.stderr
    log = run_zs("log", str(dest), "main~1", "-n", "1", "--json")
    assert json.loads(log.stdout)["message"] == "final commit"
    restored = tmp_path / "restored"
    assert run_zs("restore", str(dest), str(restored)).returncode == 0
    export(restored, tmp_path / "again.zs", include_chunks=True)
    assert_chain_is_full_export(str(dest), tmp_path / "again.zs", tmp_path / "view.zs")
    import zarr

    store = open_store(str(dest), ref="main")
    assert list(zarr.open_group(store=store, mode="r")["later"][:]) == [5, 5, 5, 5]
    # a newer fragment whose base is not in the set (copied from another set): passed over for the chain before it
    other = tmp_path / "other"
    backup(repo_path(2), other)
    run_peer_script(icechunk2_python, ONE_MORE_COMMIT, str(fixture_copy), "later-still")
    stray = backup(fixture_copy, other, max_fragments_size=1000).written[0]
    shutil.copyfile(stray.location, dest / "2099-01-01T000000Z-fragment.zs")
    with RepoArchive(dest) as archive:
        assert [m["location"] for m in archive.chain()] == [str(dest / fragment), str(dest / full)]
    (dest / full).unlink()  # now no chain opens
    one_line_error(run_zs("log", str(dest), "main"), "no chain of the set opens", "cannot open its base")


def test_what_the_records_hold_is_remembered_and_a_change_starts_a_new_chain(tmp_path):
    dest = tmp_path / "dest"
    first = backup(repo_path(2), dest)
    assert [w.kind for w in first.written] == ["full"]
    assert backup(repo_path(2), dest, codec="lzma").up_to_date  # how blocks are compressed: no new archive
    chunks = backup(repo_path(2), dest, include_chunks=True)
    assert [w.kind for w in chunks.written] == ["full"] and len(chunks.chain) == 1
    settings = BackupSet(str(dest)).settings()
    assert (settings.include_chunks, settings.codec) == (True, "lzma")
    assert backup(repo_path(2), dest).up_to_date  # the remembered options: the same records
    with RepoArchive(dest) as archive:
        assert archive.summary()["chunk_bytes"]["embedded"]


@pytest.mark.parametrize(
    "content, message",
    [
        (b"{not json", "zsbackup.json: not JSON"),
        (b'{"zsbackup": 1, "repository": "r", "max_chain": 0}', "max_chain 0 is not between 1 and 62"),
        (b'{"zsbackup": 1, "repository": "r", "include_chunks": "yes"}', "include_chunks 'yes' is not a bool"),
        (b'{"zsbackup": 9, "repository": "r"}', "settings version 9 is newer than this zsarchive reads (1): upgrade"),
        (b'{"repository": "r"}', 'no "zsbackup" version'),
    ],
)
def test_settings_a_run_cannot_read_are_one_line(tmp_path, content, message):
    dest = tmp_path / "dest"
    dest.mkdir()
    (dest / "zsbackup.json").write_bytes(content)
    one_line_error(run_zs("backup", str(repo_path(2)), str(dest)), message)
    assert sorted(p.name for p in dest.iterdir()) == ["zsbackup.json"]  # no lock left, nothing written


def test_what_is_not_a_set_is_said_in_one_line(tmp_path):
    (tmp_path / "empty").mkdir()
    one_line_error(run_zs("log", str(tmp_path / "empty")), "is no backup set (no archive, no zsbackup.json)")
    (tmp_path / "junk").mkdir()
    (tmp_path / "junk" / "2026-13-40T999999Z-full.zs").write_bytes(b"not an archive")  # no such time
    (tmp_path / "junk" / "notes.zs").write_bytes(b"")
    one_line_error(run_zs("log", str(tmp_path / "junk")), "is no backup set")
    one_line_error(run_zs("log", str(repo_path(2))), "is an Icechunk repository, not an archive")
    one_line_error(
        run_zs("backup", str(repo_path(2)), "https://example.invalid/dest/"), "a plain HTTP server cannot list it"
    )
    one_line_error(
        run_zs("backup", str(repo_path(2)), str(repo_path(2))),
        "holds an Icechunk repository; give the backups a directory or prefix of their own",
    )


def test_a_store_ignoring_create_only_writes_is_refused_and_no_lock_runs_anyway(tmp_path):
    with moto_s3({"careless": {}}) as client:
        port = int(os.environ["AWS_ENDPOINT_URL"].rsplit(":", 1)[1])
        proxy = ObjectStoreProxy(port, drop=("if-none-match",))
        try:
            env = {"AWS_ENDPOINT_URL": proxy.endpoint}
            one_line_error(
                run_zs("backup", str(repo_path(2)), "s3://careless/dest/", env=env),
                "s3://careless/dest/zsbackup.lock: the store ignores the condition of a create-only write",
            )
            assert s3_listing(client, "careless", "dest/") == {}
            done = run_zs("backup", str(repo_path(2)), "s3://careless/dest/", "--no-lock", env=env)
            assert done.returncode == 0 and done.stderr.startswith("wrote s3://careless/dest/20"), done.stderr
        finally:
            proxy.stop()
        with RepoArchive("s3://careless/dest") as archive:  # a prefix without its "/": read as the set too
            assert archive.resolve("main~1") == archive.resolve("main^")


def test_a_repository_in_azure_backed_up_into_azure(azurite, tmp_path, monkeypatch):  # noqa: F811
    for key in list(os.environ):
        if key.startswith("AZURE"):
            monkeypatch.delenv(key)
    monkeypatch.setenv("AZURE_STORAGE_CONNECTION_STRING", azurite["connection"])
    wrote = run_zs("backup", "az://lab/repos/one", "az://lab/backups/")
    assert wrote.returncode == 0 and wrote.stderr.startswith("wrote az://lab/backups/20"), wrote.stderr
    again = run_zs("backup", "az://lab/repos/one", "az://lab/backups/")
    assert again.returncode == 0 and again.stderr.startswith("up to date: az://lab/backups/20"), again.stderr
    status = run_zs("status", "az://lab/backups/", "az://lab/repos/one")
    assert status.returncode == 0 and status.stdout.splitlines()[-1] == "ops log: up to date", status.stderr
    export("az://lab/repos/one", tmp_path / "full.zs")
    assert_chain_is_full_export("az://lab/backups/", tmp_path / "full.zs", tmp_path / "view.zs")
    with RepoArchive("az://lab/backups/") as archive:
        assert archive.resolve("dev~1") == archive.resolve("tag:v1")  # dev was made at v1, then one commit


def test_a_consolidated_archive_failing_validation_is_not_put_into_the_set(
    fixture_copy, icechunk2_python, tmp_path, monkeypatch
):
    from zsarchive.archive.backup import run as run_module

    dest = tmp_path / "dest"
    backup(fixture_copy, dest, max_fragments_size=0.0001)
    run_peer_script(icechunk2_python, ONE_MORE_COMMIT, str(fixture_copy), "later")
    checked = []

    def failing(path, **_):
        checked.append(path)
        raise ZSError(f"{path}: a fault found")

    monkeypatch.setattr(run_module, "validate_file", failing)
    with pytest.raises(ZSError, match=r"-full.zs: the consolidated archive failed validation, so it was not added"):
        backup(fixture_copy, dest)
    [staged] = checked
    assert ".zsbackup-work" in staged  # checked where it was written, before it had its name in the set
    names = sorted(p.name for p in dest.glob("*.zs"))
    assert [n.rsplit("-", 1)[1] for n in names] == ["full.zs", "fragment.zs"]
    with RepoArchive(dest) as archive:  # the chain stays as it was, readable
        assert [m["location"] for m in archive.chain()] == [str(dest / names[1]), str(dest / names[0])]
    monkeypatch.undo()
    done = backup(fixture_copy, dest)  # nothing new in the repository, but the chain is still due
    assert [w.kind for w in done.written] == ["full"] and done.written[0].consolidated == 2
    assert backup(fixture_copy, dest).up_to_date
