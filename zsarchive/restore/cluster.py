"""Restore and checkout on a dask.distributed cluster. A restore: workers make and write the manifests and
copy the chunk files, the client writes the rest and, last, the file that makes the target a repository.
A checkout: workers write the chunks, a range of an array's first axis each, the client the zarr.json files.

The client plans (the archive's history, what comes back) and checks the target, as one machine does.
Then each task runs on a worker, which opens the archive itself from its location (a path every worker
sees, an HTTP URL or an object-store URL: read by range) and the target: it reads the chunk ref
timelines of its arrays, gives back their transaction logs' chunk coordinates and encodes their
manifests, keeping the bytes. Once every manifest's native chunk files are known and found (the one-line
refusal comes before anything is written), further tasks write the manifests where they were made, read
them back, and copy the chunk files, a share each. The client then writes the transaction logs,
snapshots and repo info files and, last, the final one. The files are the bytes one machine writes;
a worker that dies only costs its tasks again (the scheduler runs them, and what they depend on, elsewhere),
and the client removes the temporary files it was writing into a directory before the final file.
"""

from __future__ import annotations

import collections
import os
import uuid
from typing import Any, Callable, Iterable

from zsarchive.archive.format.header import history_from_timeline
from zsarchive.archive.write.cluster import cancel, task_result
from zsarchive.heap import large_allocations_on_the_heap
from zsarchive.errors import ZSError
from zsarchive.icechunk.manifest.decode import decode_manifest
from zsarchive.icechunk.storage import open_storage
from zsarchive.io.sink import open_sink
from zsarchive.restore.plan import ManifestContents, RestorePlan, select
from zsarchive.restore.repository import Restore, RestoreSummary, manifest_order, reach
from zsarchive.restore.source import array_coords, read_history, set_chunk_coords

TASK_REFS = 1 << 20
"""Chunk refs one task's manifests hold at most (an array's manifests stay together: one timeline read)."""
TASK_FILES = 256
"""Chunk files one copying task writes."""


class ClusterRestore(Restore):
    """A :class:`Restore` whose manifests and chunk files are made and written on the cluster a
    ``distributed.Client`` is connected to."""

    def __init__(self, archive: Any, target: Any, *, client, **options):
        super().__init__(archive, target, **options)
        self.client = client
        self.options = options
        self.archive = archive
        self.token = uuid.uuid4().hex
        self._futures: list = []

    def _args(self) -> tuple:
        """What a worker needs to open the same restore (plain data: it travels)."""
        keep = {k: v for k, v in self.options.items() if k not in ("progress", "announce")}
        return self.token, self.archive, self.location, tuple(sorted(keep.items(), key=lambda kv: kv[0]))

    def plan(self) -> RestorePlan:
        """The plan, the transaction logs' chunk coordinates left to the workers where the arrays' timelines
        give them (format 5)."""
        timeline = history_from_timeline(self.reader.records_format)
        return select(read_history(self.reader, self.timelines, coords=not timeline), self.refs, self.shallow)

    def run(self) -> RestoreSummary:
        plan = self.plan()
        sink, storage = self.open_target(plan)
        try:
            made = self._make_manifests(plan)
            needed: dict[str, int] = {}
            for _, summary in made:
                reach(needed, summary["chunks"])
            embedded, source = self.chunk_sources(needed)
            if source is not None:
                source.close()  # the workers open their own
            files = self.metadata_files(plan, {})
            final = self.final_file(plan)
            sizes = [size for _, summary in made for size in summary["sizes"]]
            self.before_writing(sink, self.totals(needed, embedded, [*sizes, *map(len, (*files.values(), final))]))
            with self.undone_on_failure():
                chunk_files, chunk_bytes = self._write(made, needed, embedded)
                for directory in ("manifests", "chunks"):  # a worker killed midway leaves its temporaries
                    sink.remove_leftovers(directory)
                return self.finish(plan, sink, storage, files, final, len(plan.manifests), chunk_files, chunk_bytes)
        except BaseException:
            self._cancel()
            raise

    def _make_manifests(self, plan: RestorePlan) -> list[tuple[Any, dict]]:
        """(the future holding a task's manifests, its summary) of every task; the chunk coordinates and
        manifest sizes the tasks found are in ``plan``."""
        timeline = history_from_timeline(self.reader.records_format)
        tasks = _tasks(manifest_order(plan), sorted(plan.history.logged) if timeline else [])
        args = self._args()
        futures = [self.client.submit(_make, args, manifests, nodes, pure=False) for manifests, nodes in tasks]
        summaries = [self.client.submit(_summary, future, pure=False) for future in futures]
        self._futures += futures + summaries
        found: dict[str, dict] = {}
        made = []
        for done, (future, summary) in enumerate(zip(futures, _results(summaries)), 1):
            found.update(summary["coords"])
            plan.resized.update(summary["resized"])
            self.notes += summary["notes"]
            made.append((future, summary))
            self.progress("manifests", done, len(futures))
        if timeline:
            set_chunk_coords(plan.history, found)
        return made

    def _write(self, made: list[tuple[Any, dict]], needed: dict[str, int], embedded: dict[str, int]) -> tuple[int, int]:
        """Write the manifests where they were made and copy the chunk files (``embedded``: the size of each the
        archive holds); (chunk files, their bytes)."""
        args = self._args()
        writes = [self.client.submit(_write_manifests, args, future, pure=False) for future, _ in made]
        ids = sorted(needed)
        copies = [
            self.client.submit(
                _copy,
                args,
                {cid: needed[cid] for cid in group},
                {cid: embedded[cid] for cid in group if cid in embedded},
                pure=False,
            )
            for group in (ids[at : at + TASK_FILES] for at in range(0, len(ids), TASK_FILES))
        ]
        self._futures += writes + copies
        files = written = 0
        total = sum(needed.values())
        for _ in _results(writes):
            pass
        for count, size in _results(copies):
            files += count
            written += size
            self.progress("chunks", written, max(total, written))
        for future, _ in made:
            future.release()
        return files, written

    def _cancel(self) -> None:
        cancel(self.client, self._futures)
        self._futures = []

    def close(self) -> None:
        self._cancel()
        super().close()


def _tasks(order: list, logged: list[str]) -> list[tuple[list[str], list[str]]]:
    """(manifest ids, array node ids whose log coordinates to find) of each task: the manifests of an array
    and its coordinates in one task (its timeline read once), arrays together up to TASK_REFS refs."""
    by_array: dict[str, list] = collections.defaultdict(list)
    for manifest in order:
        by_array[manifest.users[0][1].id if manifest.users else ""].append(manifest)
    arrays = sorted(set(by_array) | set(logged))
    logged_set = set(logged)
    tasks: list[tuple[list[str], list[str]]] = []
    refs = TASK_REFS
    for node_id in arrays:
        weight = sum(max(m.num_refs, 1) for m in by_array.get(node_id, ())) or 1
        if refs + weight > TASK_REFS:
            tasks.append(([], []))
            refs = 0
        refs += weight
        tasks[-1][0].extend(m.id for m in by_array.get(node_id, ()))
        if node_id in logged_set:
            tasks[-1][1].append(node_id)
    return tasks


def _results(futures: list) -> Iterable[Any]:
    """Each future's result, in order (:func:`~zsarchive.archive.write.cluster.task_result`)."""
    return map(task_result, futures)


# -- on a worker ---------------------------------------------------------------------------------------


_JOBS: collections.OrderedDict = collections.OrderedDict()
"""The restores this worker process has opened (the last few), by token."""


def _job(args: tuple) -> tuple[Restore, RestorePlan, ManifestContents]:
    """The restore ``args`` names, opened once per worker process: its archive, target and plan."""
    token, archive, target, options = args
    found = _JOBS.get(token)
    if found is None:
        job = Restore(archive, target, **dict(options))
        plan = select(read_history(job.reader, job.timelines, coords=False), job.refs, job.shallow)
        found = _JOBS[token] = job, plan, ManifestContents(job.reader, plan, job.timelines)
        while len(_JOBS) > 2:
            _JOBS.popitem(last=False)[1][0].close()
    return found


def _make(args: tuple, manifests: list[str], nodes: list[str]) -> dict:
    """The coordinates of the chunks each of ``nodes``'s transaction logs name, and the manifests' bytes."""
    with large_allocations_on_the_heap():
        job, plan, contents = _job(args)
        job.notes = []
        coords = {node_id: array_coords(job.reader, job.timelines, plan.history, node_id) for node_id in nodes}
        files: dict[str, bytes] = {}
        chunks: dict[str, int] = {}
        resized = {}
        for manifest_id in manifests:
            manifest = plan.manifests[manifest_id]
            files[manifest_id], named = job.encode_manifest(contents, manifest)
            reach(chunks, named)
            if manifest_id in plan.resized:
                resized[manifest_id] = plan.resized[manifest_id]
        return {
            "coords": coords,
            "manifests": files,
            "chunks": chunks,
            "resized": resized,
            "notes": job.notes,
            "sizes": [len(raw) for raw in files.values()],
        }


def _summary(made: dict) -> dict:
    """A task's result without the manifests' bytes, which stay on the worker."""
    return {key: value for key, value in made.items() if key != "manifests"}


def _write_manifests(args: tuple, made: dict) -> int:
    """Write a task's manifests, read each back and decode it; durable before this returns."""
    job, _, _ = _job(args)
    sink = open_sink(job.location, window=job.transfers)
    sink.put_all((f"manifests/{mid}", raw) for mid, raw in made["manifests"].items())
    storage = open_storage(job.location)
    try:
        for mid, raw in made["manifests"].items():
            name = f"{storage.name.rstrip('/')}/manifests/{mid}"
            back = storage.read(f"manifests/{mid}")
            if back is None or back != raw:
                raise ZSError(f"{name}: reads back differently from what was written")
            decode_manifest(back, name)
    finally:
        storage.close()
    sink.flush()
    return len(made["manifests"])


def _copy(args: tuple, needed: dict[str, int], embedded: dict[str, int]) -> tuple[int, int]:
    """Copy chunk files ``needed`` (``embedded`` from the archive, each of the size given, the rest from the
    source repository); (files, bytes), durable before this returns."""
    with large_allocations_on_the_heap():
        job, _, _ = _job(args)
        sink = open_sink(job.location, window=job.transfers)
        source = None if job.repo is None or len(embedded) == len(needed) else open_storage(job.repo)
        try:
            files, written = job.copy_chunks(sink, needed, embedded, source)
        finally:
            if source is not None:
                source.close()
        sink.flush()
        return files, written


# -- checkout ----------------------------------------------------------------------------------------


TASK_CHUNKS = 4096
"""Chunks one checkout task writes at most (a range of an array's first axis)."""


def checkout_chunks(
    client,
    archive: Any,
    authorize: Any,
    ref: str,
    nodes: list,
    sink_type: type,
    sink,
    repo: Any,
    advance: Callable[[int, int], None],
) -> int:
    """Write every chunk of the arrays among ``nodes`` (checkout's) on the cluster: each task a range of one
    array's first axis, written by a worker into a ``sink_type`` at ``sink``'s place; how many.
    ``advance(chunks, bytes)`` as each task is done."""
    args = (uuid.uuid4().hex, archive, authorize, sink_type, sink.location, sink.window, repo)
    futures = []
    for item in nodes:
        if item.keys is None:
            continue
        for start, stop in _axis_ranges(item.node.num_chunks):
            futures.append(client.submit(_checkout, args, ref, item, start, stop, pure=False))
    count = 0
    try:
        for chunks, size in _results(futures):
            count += chunks
            advance(chunks, size)
    except BaseException:
        client.cancel(futures)
        raise
    return count


def _axis_ranges(num_chunks: list[int] | None) -> list[tuple[tuple | None, tuple | None]]:
    """(start, stop) coordinate bounds cutting an array's chunk grid along its first axis into pieces of at
    most TASK_CHUNKS chunks (the whole array, unbounded, for a 0-d array or an unknown grid)."""
    if not num_chunks:
        return [(None, None)]
    rest = 1
    for n in num_chunks[1:]:
        rest *= max(n, 1)
    step = max(1, TASK_CHUNKS // rest)
    zeros = (0,) * (len(num_chunks) - 1)
    cuts = list(range(0, num_chunks[0], step))
    return [
        ((lo, *zeros) if lo else None, (lo + step, *zeros) if lo + step < num_chunks[0] else None) for lo in cuts
    ] or [(None, None)]


_ARCHIVES: collections.OrderedDict = collections.OrderedDict()
"""The archives this worker process has opened for checkouts (the last few), by token."""


def _checkout(args: tuple, ref: str, item: Any, start: tuple | None, stop: tuple | None) -> tuple[int, int]:
    """On a worker: write one range of an array's chunks; (chunks, bytes), on disk before this returns."""
    from functools import partial

    from zsarchive.archive import RepoArchive

    token, archive, authorize, sink_type, location, window, repo = args
    arc = _ARCHIVES.get(token)
    if arc is None:
        arc = _ARCHIVES[token] = RepoArchive(archive, authorize=authorize)
        while len(_ARCHIVES) > 2:
            _ARCHIVES.popitem(last=False)[1].close()
    sink = sink_type(location, window)
    count = 0

    def items():
        nonlocal count
        for chunk in arc.array_chunks(item.node, start, stop):
            count += 1
            key = item.keys.key(chunk.coords)
            yield (
                key,
                chunk.inline
                if chunk.kind == "inline"
                else partial(arc.read_chunk, chunk, ref, repo, location.is_local),
            )

    with large_allocations_on_the_heap():
        written = sink.put_all(items())
    if location.is_local:
        os.sync()  # on this machine's disks before the client moves the checkout into place
    return count, written
