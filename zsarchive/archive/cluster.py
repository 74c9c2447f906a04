"""An export engine on a dask.distributed cluster: workers decode manifests and transaction logs
straight from the repository's storage, the client writes the archive.

Each task runs on a worker, which opens the repository itself from its :class:`Location` (plain data,
so it travels), and returns its batches; the client takes them task by task in file order, exactly
as from the other engines, so the archive is byte for byte the one a single machine writes. A worker
that dies takes its results with it: the scheduler runs those tasks again elsewhere.
"""

from __future__ import annotations

import pickle
from typing import Any, Iterator

from zsarchive.archive.engine import Batches, Task, worker_repo
from zsarchive.errors import ZSError
from zsarchive.io.location import Location


def connect(address: str, timeout: float = 10.0):
    """A ``distributed.Client`` of the scheduler at ``address``; ZSError (one line) if none answers in time."""
    try:
        from distributed import Client
    except ImportError:
        raise ZSError("exporting on a cluster needs dask.distributed: pip install 'zsarchive[dask]'") from None
    try:
        return Client(address, timeout=timeout, set_as_default=False)
    except (OSError, TimeoutError) as exc:
        raise ZSError(f"{address}: no dask scheduler answers ({type(exc).__name__}: "
                      f"{str(exc).splitlines()[0] if str(exc) else 'timed out'})") from None


def _run(task: Task, location: Location, job: tuple) -> bytes:
    """On a worker: every batch of one task, pickled into one object (the cluster's own serialisation
    walks a list of many small records ~40x slower than one pickle of it)."""
    return pickle.dumps(list(task(worker_repo(location), *job)), protocol=pickle.HIGHEST_PROTOCOL)


class ClusterEngine:
    """Runs the export's decoding tasks on the cluster a ``distributed.Client`` is connected to."""

    def __init__(self, client, location: Location):
        self.client = client
        self.location = location
        self._futures: list = []

    def start(self, task: Task, jobs: list[tuple]) -> list[Batches]:
        """Submit every job now; each callable waits for its job's batches, then yields them."""
        futures = [self.client.submit(_run, task, self.location, job, pure=False) for job in jobs]
        self._futures += futures
        return [lambda future=future: self._batches(future) for future in futures]

    def _batches(self, future) -> Iterator[Any]:
        try:
            batches = future.result()
        except ZSError:
            raise
        except Exception as exc:  # a lost scheduler, a task the cluster gave up on
            raise ZSError(f"the dask cluster failed a task: {type(exc).__name__}: "
                          f"{str(exc).splitlines()[0] if str(exc) else ''}") from None
        future.release()
        return iter(pickle.loads(batches))

    def close(self) -> None:
        """Cancel what has not run; the client stays the caller's."""
        if self._futures:
            try:
                self.client.cancel(self._futures)
            except Exception:  # the cluster is already gone: nothing is left to cancel
                pass
        self._futures = []
