"""Export on a real dask.distributed LocalCluster (two worker processes): the archive is byte for byte a
single-machine export's, also when a worker is killed mid-export; a scheduler that does not answer is
one line."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from distributed import Client, LocalCluster

from servers import free_port
from zsarchive.archive import export

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "testdata" / "icechunk"


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
