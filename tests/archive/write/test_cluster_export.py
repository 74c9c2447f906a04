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

from toolkit.servers import free_port
from toolkit.cli import one_line_error, run_hostile, run_zs
from toolkit.peers import run_peer_script
from toolkit.reads import spy_on_metadata_reads
from zsarchive import ZSError
from zsarchive.archive import export
from zsarchive.archive.write import exporter as exporter_module
from zsarchive.zs.writer import ZSWriter
from toolkit.places import ROOT

FIXTURES = ROOT / "testdata" / "icechunk"

MILLION = r"""
import sys, icechunk as ic, zarr
out, n = sys.argv[1], int(sys.argv[2])
ic.set_logs_filter("error")
repo = ic.Repository.create(ic.local_filesystem_storage(out))
session = repo.writable_session("main")
zarr.group(store=session.store).create_array("v", shape=(n, 1000), chunks=(1, 1000), dtype="f4", compressors=None,
                                             fill_value=0)
for start in range(0, n, 100_000):
    specs = [ic.VirtualChunkSpec(index=[i, 0], location=f"s3://granules/file{i % 1000:04d}.nc",
                                 offset=(i // 1000) * 4000, length=4000) for i in range(start, min(n, start + 100_000))]
    session.store.set_virtual_refs("v", specs, validate_containers=False)
session.commit("a million virtual refs")
"""


@pytest.fixture(scope="module")
def million(tmp_path_factory, icechunk2_python) -> Path:
    """A repository of one array with 1,000,000 virtual refs in one manifest, written by icechunk 2.x."""
    repo = tmp_path_factory.mktemp("million") / "repo"
    run_peer_script(icechunk2_python, MILLION, str(repo), "1000000")
    return repo


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
    with (
        LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0") as cluster,
        Client(cluster) as connected,
    ):
        yield connected


@pytest.mark.parametrize("name", ["v1", "v2", "v1-migrated"])
def test_cluster_export_equals_the_single_machine_one(client, tmp_path, name, monkeypatch):
    """Also: the workers hand back the forms of the files they read, so the client reads no manifest or
    transaction log for the file-form records (the workers are processes of their own: the spy sees
    only the client's reads)."""
    here, there = tmp_path / "here.zs", tmp_path / "there.zs"
    export(FIXTURES / name, here, export_time=1, parallelism=1)
    read_by_client = spy_on_metadata_reads(monkeypatch, tmp_path / "worker-reads")
    export(FIXTURES / name, there, export_time=1, client=client)
    assert there.read_bytes() == here.read_bytes()
    assert read_by_client == []


def test_a_million_refs_compressed_by_the_workers_equal_the_single_machine_export(
    client, million, tmp_path, monkeypatch
):
    here, there, again, pool = (tmp_path / f"{name}.zs" for name in ("here", "there", "again", "pool"))
    built = _count_built_blocks(monkeypatch)
    export(million, here, export_time=1, parallelism=1)
    assert not built  # one process: its writer's threads compress every block
    read_by_client = spy_on_metadata_reads(monkeypatch, tmp_path / "worker-reads")
    export(million, there, export_time=1, client=client)
    assert there.read_bytes() == here.read_bytes()
    assert sum(built) == 1_000_000  # every chunk ref reached the client in a block a worker compressed
    # the workers keep the manifest they decoded: a second export gets its form from them all the same
    export(million, again, export_time=1, client=client)
    assert again.read_bytes() == here.read_bytes() and read_by_client == []
    built.clear()
    export(million, pool, export_time=1, parallelism=2)
    assert pool.read_bytes() == here.read_bytes() and sum(built) == 1_000_000 and read_by_client == []


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
    done = run_zs(
        "export",
        str(FIXTURES / "v2"),
        str(tmp_path / "x.zs"),
        "--scheduler",
        f"tcp://127.0.0.1:{free_port()}",
        timeout=120,
    )
    one_line_error(done, "no dask scheduler answers")
    assert time.monotonic() - started < 60 and not (tmp_path / "x.zs").exists()


def test_a_scheduler_that_accepts_and_never_speaks_is_one_line(tmp_path):
    """A listener that accepts the connection and stays silent: the handshake has a deadline too."""
    with socket.create_server(("127.0.0.1", 0)) as silent:
        address = f"tcp://127.0.0.1:{silent.getsockname()[1]}"
        done = run_hostile("export", str(FIXTURES / "v2"), str(tmp_path / "x.zs"), "--scheduler", address)
    one_line_error(done, address, "no dask scheduler answers", "no handshake within 10 s")
    assert not (tmp_path / "x.zs").exists()


def test_a_repository_read_error_on_a_worker_is_one_line_and_no_archive(client, tmp_path):
    """A manifest the plan finds but a worker cannot decode (cut short): the worker's error reaches the
    user as the same one line a single machine gives, and nothing is written."""
    damaged = tmp_path / "repo"
    shutil.copytree(FIXTURES / "v2", damaged)
    manifest = max((damaged / "manifests").iterdir(), key=lambda p: p.stat().st_size)
    manifest.write_bytes(manifest.read_bytes()[: manifest.stat().st_size // 2])
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
    scheduler = subprocess.Popen(
        [
            *dask,
            "distributed.cli.dask_scheduler",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--dashboard-address",
            ":0",
        ],
        stderr=subprocess.DEVNULL,
    )
    workers = [
        subprocess.Popen(
            [
                *dask,
                "distributed.cli.dask_worker",
                f"tcp://127.0.0.1:{port}",
                "--nthreads",
                "1",
                "--dashboard-address",
                ":0",
            ],
            stderr=subprocess.DEVNULL,
        )
        for _ in range(2)
    ]
    try:
        with Client(f"tcp://127.0.0.1:{port}", timeout=60) as waiting:
            waiting.wait_for_workers(2, timeout=60)
        target = tmp_path / "lost.zs"
        export_run = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "zsarchive",
                "export",
                str(million),
                str(target),
                "--scheduler",
                f"tcp://127.0.0.1:{port}",
                "--no-progress",
            ],
            stderr=subprocess.PIPE,
            text=True,
        )
        deadline = time.monotonic() + 120
        while not any(p.name.endswith(".partial") for p in tmp_path.iterdir()):  # writing has begun
            assert export_run.poll() is None and time.monotonic() < deadline
            time.sleep(0.01)
        scheduler.kill()
        _, stderr = export_run.communicate(timeout=120)
        one_line_error(subprocess.CompletedProcess(export_run.args, export_run.returncode, None, stderr), "dask")
        assert list(tmp_path.iterdir()) == []  # neither the archive nor its partial file
    finally:
        for process in [scheduler, *workers]:
            process.kill()
            process.wait()
