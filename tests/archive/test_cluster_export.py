"""Export on a real dask.distributed LocalCluster (two worker processes): the archive is byte for byte a
single-machine export's — the fixtures, and a million refs whose blocks the workers compress — also
when a worker is killed mid-export; a scheduler that does not answer, or is lost mid-export, is one
line and leaves no archive."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from distributed import Client, LocalCluster

from hostile import one_line_error, zs
from servers import free_port
from zsarchive import ZSError
from zsarchive.archive import export
from zsarchive.archive import exporter as exporter_module
from zsarchive.zs.writer import ZSWriter

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "testdata" / "icechunk"
sys.path.insert(0, str(ROOT / "scripts"))

import bench_icechunk_manifest  # noqa: E402  (builds the million-ref repository with icechunk 2.x)


@pytest.fixture(scope="module")
def million(tmp_path_factory, icechunk2_python) -> Path:
    """A repository of one array with 1,000,000 virtual refs in one manifest, written by icechunk 2.x."""
    return bench_icechunk_manifest.ensure_repo(1_000_000, tmp_path_factory.mktemp("million") / "repo",
                                               python=icechunk2_python)


def _count_built_blocks(monkeypatch) -> list:
    """Blocks the client's writer receives already compressed (by a worker), counted."""
    built: list = []
    real = ZSWriter.add_built_block

    def counted(self, block):
        built.append(block.count)
        real(self, block)
    monkeypatch.setattr(ZSWriter, "add_built_block", counted)
    return built


@pytest.fixture(scope="module")
def client():
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0") as cluster, \
            Client(cluster) as connected:
        yield connected


@pytest.mark.parametrize("name", ["v1", "v2", "v1-migrated"])
def test_cluster_export_equals_the_single_machine_one(client, tmp_path, name):
    here, there = tmp_path / "here.zs", tmp_path / "there.zs"
    export(FIXTURES / name, here, export_time=1, parallelism=1)
    export(FIXTURES / name, there, export_time=1, client=client)
    assert there.read_bytes() == here.read_bytes()


def test_a_million_refs_compressed_by_the_workers_equal_the_single_machine_export(client, million, tmp_path,
                                                                                 monkeypatch):
    here, there, pool = tmp_path / "here.zs", tmp_path / "there.zs", tmp_path / "pool.zs"
    built = _count_built_blocks(monkeypatch)
    export(million, here, export_time=1, parallelism=1)
    assert not built  # one process: its writer's threads compress every block
    export(million, there, export_time=1, client=client)
    assert there.read_bytes() == here.read_bytes()
    assert sum(built) == 1_000_000  # every chunk ref reached the client in a block a worker compressed
    built.clear()
    export(million, pool, export_time=1, parallelism=2)
    assert pool.read_bytes() == here.read_bytes() and sum(built) == 1_000_000


def test_small_tasks_on_the_cluster_still_give_the_same_bytes(client, tmp_path, monkeypatch):
    """Every fixture manifest counts as large and splits into tasks of 3 refs: workers cut and compress
    blocks per task, and the archive is still the single machine's."""
    monkeypatch.setattr(exporter_module, "_TASK_REFS", 3)
    built = _count_built_blocks(monkeypatch)
    for name in ("v1", "v2"):
        here, there = tmp_path / f"{name}-here.zs", tmp_path / f"{name}-there.zs"
        export(FIXTURES / name, here, export_time=1, parallelism=1, include_chunks=True)
        export(FIXTURES / name, there, export_time=1, client=client, include_chunks=True)
        assert there.read_bytes() == here.read_bytes()
    assert built


def test_a_worker_killed_mid_export_changes_nothing(client, tmp_path):
    here, there = tmp_path / "here.zs", tmp_path / "there.zs"
    export(FIXTURES / "v2", here, export_time=1, parallelism=1, include_chunks=True)
    killed = []

    def kill_a_worker(done: int, total: int) -> None:
        if not killed:  # the first report: every task is submitted, results sit on the workers
            pid = next(iter(client.run(os.getpid).values()))
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)

    export(FIXTURES / "v2", there, export_time=1, include_chunks=True, client=client, progress=kill_a_worker)
    assert killed and there.read_bytes() == here.read_bytes()
    client.wait_for_workers(2, timeout=60)  # the nanny brought it back


def test_a_scheduler_that_does_not_answer_is_one_line(tmp_path):
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "zsarchive", "export", str(FIXTURES / "v2"), str(tmp_path / "x.zs"),
                           "--scheduler", f"tcp://127.0.0.1:{free_port()}"], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 1 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "no dask scheduler answers" in done.stderr
    assert time.monotonic() - started < 60 and not (tmp_path / "x.zs").exists()


def test_a_scheduler_that_accepts_and_never_speaks_is_one_line(tmp_path):
    """A listener that accepts the connection and stays silent: the handshake has a deadline too."""
    with socket.create_server(("127.0.0.1", 0)) as silent:
        address = f"tcp://127.0.0.1:{silent.getsockname()[1]}"
        done = zs("export", str(FIXTURES / "v2"), str(tmp_path / "x.zs"), "--scheduler", address)
    one_line_error(done, address, "no dask scheduler answers", "no handshake within 10 s")
    assert not (tmp_path / "x.zs").exists()


def test_a_repository_read_error_on_a_worker_is_one_line_and_no_archive(client, tmp_path):
    """A manifest the plan finds but a worker cannot decode (cut short): the worker's error reaches the
    user as the same one line a single machine gives, and nothing is written."""
    damaged = tmp_path / "repo"
    shutil.copytree(FIXTURES / "v2", damaged)
    manifest = max((damaged / "manifests").iterdir(), key=lambda p: p.stat().st_size)
    manifest.write_bytes(manifest.read_bytes()[:manifest.stat().st_size // 2])
    errors = []
    for options in ({"parallelism": 1}, {"client": client}):
        with pytest.raises(ZSError) as caught:
            export(damaged, tmp_path / "x.zs", **options)
        errors.append(str(caught.value))
        assert manifest.name in errors[-1] and "\n" not in errors[-1]
        assert not [p for p in tmp_path.iterdir() if p.name != "repo"]
    assert errors[0] == errors[1]


def test_a_scheduler_lost_mid_export_is_one_line_and_no_archive(million, tmp_path):
    port = free_port()
    dask = [sys.executable, "-m"]
    scheduler = subprocess.Popen([*dask, "distributed.cli.dask_scheduler", "--host", "127.0.0.1", "--port", str(port),
                                  "--dashboard-address", ":0"], stderr=subprocess.DEVNULL)
    workers = [subprocess.Popen([*dask, "distributed.cli.dask_worker", f"tcp://127.0.0.1:{port}", "--nthreads", "1",
                                 "--dashboard-address", ":0"], stderr=subprocess.DEVNULL) for _ in range(2)]
    try:
        with Client(f"tcp://127.0.0.1:{port}", timeout=60) as waiting:
            waiting.wait_for_workers(2, timeout=60)
        target = tmp_path / "lost.zs"
        export_run = subprocess.Popen([sys.executable, "-m", "zsarchive", "export", str(million), str(target),
                                       "--scheduler", f"tcp://127.0.0.1:{port}", "--no-progress"],
                                      stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 120
        while not any(p.name.endswith(".partial") for p in tmp_path.iterdir()):  # writing has begun
            assert export_run.poll() is None and time.monotonic() < deadline
            time.sleep(0.01)
        scheduler.kill()
        stderr = export_run.communicate(timeout=120)[1]
        assert export_run.returncode == 1 and len(stderr.strip().splitlines()) == 1, stderr
        assert "dask" in stderr and "Traceback" not in stderr
        assert list(tmp_path.iterdir()) == []  # neither the archive nor its partial file
    finally:
        for process in [scheduler, *workers]:
            process.kill()
            process.wait()
