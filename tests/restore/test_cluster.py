"""Restore on a real dask.distributed LocalCluster (two worker processes): the target holds, file for file
and byte for byte, what a single machine writes (committed fixtures, chunk files from the archive or
from the original repository, a repository with every kind of chunk ref), also when a worker is killed
midway; a scheduler that does not answer is one line, and a worker's failure leaves no repository."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest
from distributed import Client, LocalCluster

from toolkit import workers
from toolkit.cli import one_line_error, run_zs
from toolkit.places import ROOT
from toolkit.servers import free_port
from zsarchive import ZSError
from zsarchive.archive import export
from zsarchive.restore import cluster as cluster_module, restore

FIXTURES = ROOT / "testdata" / "icechunk"


@pytest.fixture(scope="module")
def client():
    with (
        LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0") as cluster,
        Client(cluster) as connected,
    ):
        yield connected


def files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("name", ["v1", "v2", "v1-migrated"])
def test_a_restore_on_the_cluster_writes_what_one_machine_writes(client, name, tmp_path):
    archive = tmp_path / "a.zs"
    export(FIXTURES / name, archive, include_chunks=True)
    restore(archive, tmp_path / "here")
    summary = restore(archive, tmp_path / "there", client=client)
    assert files(tmp_path / "there") == files(tmp_path / "here")
    assert summary.chunk_files and summary.manifests and summary.transaction_logs


def test_chunk_files_from_the_original_repository(client, tmp_path):
    """An archive without chunk bytes: the workers read each chunk file from the repository (``repo``)."""
    archive = tmp_path / "bare.zs"
    export(FIXTURES / "v2", archive)
    restore(archive, tmp_path / "here", repo=FIXTURES / "v2")
    restore(archive, tmp_path / "there", repo=FIXTURES / "v2", client=client)
    assert files(tmp_path / "there") == files(tmp_path / "here")


@pytest.mark.parametrize("under,after", [("manifests", 0), ("chunks", 1)])
def test_a_worker_killed_midway_changes_nothing(client, refs_history, under, after, tmp_path, monkeypatch):
    """Many small tasks (a manifest each, four chunk files each); a worker dies halfway through writing its
    first manifest (the others it made in memory), or through its second chunk file: its tasks, and the
    manifests it held, are made again elsewhere, the half-written file it left is gone, and the target is
    the same."""
    archive = tmp_path / "a.zs"
    export(refs_history, archive, include_chunks=True)
    restore(archive, tmp_path / "here")
    monkeypatch.setattr(cluster_module, "TASK_FILES", 4)
    monkeypatch.setattr(cluster_module, "TASK_REFS", 1)
    marker = tmp_path / "killed"
    client.run(workers.die_writing, str(marker), under, after)
    try:
        summary = restore(archive, tmp_path / "there", client=client)
    finally:
        client.run(workers.disarm)
    pid, half_written = marker.read_text().split(" ", 1)
    assert summary.chunk_files > 40 and Path(half_written).parent == tmp_path / "there" / under
    assert files(tmp_path / "there") == files(tmp_path / "here")
    client.wait_for_workers(2, timeout=60)  # the nanny brought it back
    assert int(pid) not in client.run(os.getpid).values()


def test_the_command_on_a_cluster(client, tmp_path):
    archive = tmp_path / "a.zs"
    export(FIXTURES / "v2", archive, include_chunks=True)
    restore(archive, tmp_path / "here")
    done = run_zs(
        "restore",
        str(archive),
        str(tmp_path / "there"),
        "--scheduler",
        client.scheduler.address,
        "--no-progress",
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert files(tmp_path / "there") == files(tmp_path / "here")


def test_a_scheduler_that_does_not_answer_is_one_line(tmp_path):
    archive = tmp_path / "a.zs"
    export(FIXTURES / "v2", archive)
    started = time.monotonic()
    done = run_zs(
        "restore", str(archive), str(tmp_path / "there"), "--scheduler", f"tcp://127.0.0.1:{free_port()}", timeout=120
    )
    one_line_error(done, "no dask scheduler answers")
    assert time.monotonic() - started < 60 and not (tmp_path / "there").exists()


def test_a_worker_that_cannot_read_a_chunk_file_is_one_line_and_no_repository(client, tmp_path):
    """An archive without chunk bytes whose original repository lost a chunk file: the worker's error
    reaches the user as the one line a single machine gives, and the target is not a repository."""
    archive = tmp_path / "bare.zs"
    export(FIXTURES / "v2", archive)
    source = tmp_path / "source"
    os.makedirs(source)
    for path in (FIXTURES / "v2").rglob("*"):
        if path.is_file():
            (source / path.relative_to(FIXTURES / "v2")).parent.mkdir(parents=True, exist_ok=True)
            (source / path.relative_to(FIXTURES / "v2")).write_bytes(path.read_bytes())
    lost = sorted((source / "chunks").iterdir())[0]
    lost.unlink()
    errors = []
    for target, options in ((tmp_path / "here", {}), (tmp_path / "there", {"client": client})):
        with pytest.raises(ZSError) as caught:
            restore(archive, target, repo=source, **options)
        errors.append(str(caught.value))
        assert lost.name in errors[-1] and "\n" not in errors[-1]
        assert not (target / "repo").exists()
    assert errors[0] == errors[1]


def test_a_checkout_on_the_cluster_writes_what_one_machine_writes(client, grid_repository, tmp_path, monkeypatch):
    """Every chunk of every array (ranges of the first axis, a task each) and every zarr.json, in a
    directory; a worker killed as the first range comes back changes nothing."""
    from zsarchive.restore import checkout as checkout_module

    archive = tmp_path / "a.zs"
    export(grid_repository, archive, include_chunks=True)
    checkout_module.checkout(archive, "main", tmp_path / "here")
    monkeypatch.setattr(cluster_module, "TASK_CHUNKS", 20)
    killed: list[int] = []

    def kill_a_worker(done: int, total: int) -> None:
        if done and not killed:
            pid = next(iter(client.run(os.getpid).values()))
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)

    summary = checkout_module.checkout(str(archive), "main", tmp_path / "there", client=client, progress=kill_a_worker)
    assert killed and summary.chunks > 200
    assert files(tmp_path / "there") == files(tmp_path / "here")
    client.wait_for_workers(2, timeout=60)
    done = run_zs(
        "checkout",
        str(archive),
        "main",
        str(tmp_path / "zipped.zip"),
        "--scheduler",
        client.scheduler.address,
        timeout=120,
    )
    one_line_error(done, "a .zip is written by one machine")
