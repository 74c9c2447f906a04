"""Where an export's decoding tasks run: in this process, or in a pool of worker processes.

A task is a function ``task(repo, *args)`` that yields picklable batches (the exporter's are typed:
:class:`~zsarchive.archive.write.exporter.ChangeBatch`, :class:`~zsarchive.archive.write.exporter.LogBatch`). An engine starts a list of tasks and hands back, for each, a
callable that yields its batches, in the order the tasks were given: the exporter consumes them in
file order whatever order they finish in. Worker processes spill their batches to run files, so
memory holds at most a batch per task however far decoding runs ahead of writing; each task hands
back the forms of the files its worker read (:func:`forms_to_hand`), which this process's
repository learns, so that the archive's file-form records read no file twice. Another engine (a
distributed one) implements the same :class:`Engine` protocol.
"""

from __future__ import annotations

import functools
import os
import pickle
import tempfile
import uuid
from typing import Any, Callable, Iterable, Iterator, Protocol

from zsarchive.icechunk import Repository
from zsarchive.icechunk.repository import FileForm
from zsarchive.io.location import Location, parse_location

Task = Callable[..., Iterable[Any]]
Batches = Callable[[], Iterator[Any]]


class Engine(Protocol):
    """Runs decoding tasks over one repository."""

    builds_blocks: bool
    """Whether tasks compress the data blocks they cut themselves (they run beside this process, which
    would otherwise compress every block alone) or leave that to the writer's threads."""

    def start(self, task: Task, jobs: list[tuple]) -> list[Batches]:
        """Start ``task(repo, *job)`` for every job; return, per job, a callable yielding its batches."""

    def close(self) -> None:
        """Stop the tasks not yet run and release workers and spilled files."""


class InProcess:
    """Runs each task in this process, when its batches are asked for (nothing runs ahead)."""

    builds_blocks = False

    def __init__(self, repo: Repository):
        self.repo = repo

    def start(self, task: Task, jobs: list[tuple]) -> list[Batches]:
        """Lazily: each callable runs its task as it is iterated."""
        return [functools.partial(self._run, task, job) for job in jobs]

    def _run(self, task: Task, job: tuple) -> Iterator[Any]:
        return iter(task(self.repo, *job))

    def close(self) -> None:
        """Nothing to release."""


class ProcessPool:
    """Runs tasks in ``workers`` forked processes, all submitted at once; results come back through run
    files in ``workdir`` (the GIL would serialise threads: decoding is Python and numpy), the forms of
    the files read into ``repo``, this process's view of the same repository."""

    builds_blocks = True

    def __init__(self, repo: Repository, location: str | Location, workers: int, workdir: str):
        self.repo = repo
        self.location = location = parse_location(location)
        self._work = tempfile.TemporaryDirectory(dir=workdir, prefix=".zsarchive-work-")
        # obstore's async runtime does not survive a fork: workers reading object storage start afresh
        # (and see the credentials in the environment as it is now).
        context = "fork" if location.is_local else "spawn"
        import multiprocessing  # here: an export that decodes in this process does without it (~6 ms)
        from concurrent.futures import ProcessPoolExecutor

        self._pool = ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context(context))
        self._runs = 0
        self._export = uuid.uuid4().hex

    def start(self, task: Task, jobs: list[tuple]) -> list[Batches]:
        """Submit every job now; each callable waits for its job, then streams its run file."""
        out: list[Batches] = []
        for job in jobs:
            path = os.path.join(self._work.name, f"run{self._runs}")
            self._runs += 1
            future = self._pool.submit(_spill, task, self.location, job, path, self._export)
            out.append(functools.partial(self._finished, future, path))
        return out

    def _finished(self, future, path: str) -> Iterator[Any]:
        self.repo.add_file_forms(future.result())
        return read_run(path)

    def close(self) -> None:
        """Cancel what has not started, wait for the rest, drop the run files."""
        self._pool.shutdown(wait=True, cancel_futures=True)
        self._work.cleanup()


_WORKER_REPOS: dict[Location, Repository] = {}


def worker_repo(location: Location) -> Repository:
    """The repository at ``location``, opened once per worker process."""
    repo = _WORKER_REPOS.get(location)
    if repo is None:
        repo = _WORKER_REPOS[location] = Repository.open(location)
    return repo


_HANDED: dict[tuple[Location, str], int] = {}


def forms_to_hand(location: Location, export: str) -> dict[str, FileForm]:
    """In a worker: the forms of the files its repository at ``location`` read that it has not yet handed
    to ``export`` (an engine's own name: a cluster's workers outlive exports, and each needs them)."""
    forms, _HANDED[location, export] = worker_repo(location).file_forms_since(_HANDED.get((location, export), 0))
    return forms


def _spill(task: Task, location: Location, job: tuple, path: str, export: str) -> dict[str, FileForm]:
    """In a worker: run the task into its run file; return the forms ``export`` has not had from this worker."""
    write_run(task(worker_repo(location), *job), path)
    return forms_to_hand(location, export)


def write_run(batches: Iterable[Any], path: str) -> None:
    """Spill batches to a run file, pickled (loading a batch is C-speed, a loop is not)."""
    with open(path, "wb") as out:
        for batch in batches:
            pickle.dump(batch, out, protocol=pickle.HIGHEST_PROTOCOL)


def read_run(path: str) -> Iterator[Any]:
    """The batches of a run file (our own, just written), then the file is removed."""
    with open(path, "rb") as run:
        while True:
            try:
                yield pickle.load(run)
            except EOFError:
                break
    os.unlink(path)


SPAWN_REFS = 500_000
"""Chunk refs an export must decode for worker processes that start afresh (those reading object storage:
each imports numpy and the decoders, ~0.3 s, before its first task) to pay for themselves; this process
decodes fewer itself (~1 µs a ref)."""


def open_engine(
    repo: Repository, location: Location, parallelism: int, tasks: int, workdir: str, refs: int = 0
) -> Engine:
    """Worker processes when there is more than one worker and more than one task (and, for workers that
    start afresh, at least :data:`SPAWN_REFS` chunk refs to decode), else this process."""
    if parallelism > 1 and tasks > 1 and (parse_location(location).is_local or refs >= SPAWN_REFS):
        return ProcessPool(repo, location, parallelism, workdir)
    return InProcess(repo)
