"""An export engine on a dask.distributed cluster: workers decode manifests and transaction logs
straight from the repository's storage, the client writes the archive.

Each task runs on a worker, which opens the repository itself from its :class:`Location` (plain data,
so it travels), and returns its batches; the client takes them task by task in file order, exactly
as from the other engines, so the archive is byte for byte the one a single machine writes. A worker
that dies takes its results with it: the scheduler runs those tasks again elsewhere.
"""

from __future__ import annotations

import functools
import pickle
import threading
import uuid
from typing import Any, Iterator

from zsarchive.archive.write.engine import Batches, Task, forms_to_hand, worker_repo
from zsarchive.errors import ZSError
from zsarchive.heap import large_allocations_on_the_heap
from zsarchive.icechunk import Repository
from zsarchive.io.location import Location


CONNECT_GRACE = 5.0
"""Seconds past the connect timeout before a scheduler that has not finished its handshake is given up."""


def connect(address: str, timeout: float = 10.0):
    """A ``distributed.Client`` of the scheduler at ``address``; ZSError (one line) if none answers in time:
    refused, unreachable, or a listener that accepts and never speaks."""
    try:
        from distributed import Client
    except ImportError:
        raise ZSError("exporting on a cluster needs dask.distributed: pip install 'zsarchive[dask]'") from None
    # Client's own timeout covers the connection, not the handshake read that follows it (a silent
    # listener holds that forever): the whole connect runs on a daemon thread under our deadline.
    outcome: dict[str, Any] = {}

    def attempt() -> None:
        try:
            outcome["client"] = Client(address, timeout=timeout, set_as_default=False)
        except BaseException as exc:  # handed to the waiting thread
            outcome["error"] = exc

    thread = threading.Thread(target=attempt, name="zs-connect", daemon=True)
    thread.start()
    thread.join(timeout + CONNECT_GRACE)
    if thread.is_alive():
        raise ZSError(f"{address}: no dask scheduler answers (connected, but no handshake within {timeout:g} s)")
    exc = outcome.get("error")
    if isinstance(exc, (OSError, TimeoutError)):
        raise ZSError(
            f"{address}: no dask scheduler answers ({type(exc).__name__}: "
            f"{str(exc).splitlines()[0] if str(exc) else 'timed out'})"
        ) from None
    if exc is not None:
        raise exc
    return outcome["client"]


def _run(task: Task, location: Location, job: tuple, export: str) -> bytes:
    """On a worker: every batch of one task and the forms of the files the worker read that ``export`` lacks,
    pickled into one object (the cluster's own serialisation walks a list of many small records ~40x
    slower than one pickle of it)."""
    with large_allocations_on_the_heap():
        batches = list(task(worker_repo(location), *job))
        return pickle.dumps((batches, forms_to_hand(location, export)), protocol=pickle.HIGHEST_PROTOCOL)


def task_result(future) -> Any:
    """A task's result, its future released; the task's ZSError as it is, any other failure (a lost
    scheduler, a task the cluster gave up on) in one line."""
    try:
        result = future.result()
    except ZSError:
        raise
    except Exception as exc:
        raise ZSError(
            f"the dask cluster failed a task: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
        ) from None
    future.release()
    return result


def cancel(client: Any, futures: list) -> None:
    """Cancel ``futures`` of ``client`` that have not run (none: nothing asked of the cluster)."""
    if futures:
        try:
            client.cancel(futures)
        except Exception:  # the cluster is already gone: nothing is left to cancel
            pass


class ClusterEngine:
    """Runs the export's decoding tasks on the cluster a ``distributed.Client`` is connected to; ``repo``,
    this process's view of the repository, learns the forms of the files the workers read."""

    builds_blocks = True

    def __init__(self, repo: Repository, client, location: Location):
        self.repo = repo
        self.client = client
        self.location = location
        self._futures: list = []
        self._export = uuid.uuid4().hex

    def start(self, task: Task, jobs: list[tuple]) -> list[Batches]:
        """Submit every job now; each callable waits for its job's batches, then yields them."""
        futures = [self.client.submit(_run, task, self.location, job, self._export, pure=False) for job in jobs]
        self._futures += futures
        return [functools.partial(self._batches, future) for future in futures]

    def _batches(self, future) -> Iterator[Any]:
        batches, forms = pickle.loads(task_result(future))
        self.repo.add_file_forms(forms)
        return iter(batches)

    def close(self) -> None:
        """Cancel what has not run; the client stays the caller's."""
        cancel(self.client, self._futures)
        self._futures = []
