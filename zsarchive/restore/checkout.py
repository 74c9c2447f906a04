"""``checkout``: one snapshot of a repo archive written out as a plain Zarr v3 hierarchy.

Every node's ``zarr.json`` is written byte for byte as icechunk stored it, and every chunk under the
key its array's chunk key encoding gives, with the bytes as stored (inline, embedded, from the
original repository or from an authorized virtual location; shards stay shards). Chunks never
written stay absent, so they read as the fill value. The target is a directory, a ``.zip`` in the
layout zarr-python's ``ZipStore`` reads, or an object-store prefix; see docs/checkout.rst.
"""

from __future__ import annotations

import os
import secrets
import shutil
import time
from dataclasses import dataclass
from functools import partial
from typing import Any, Callable, Iterable, Iterator, Mapping

from zsarchive.archive import NodeInfo, RepoArchive
from zsarchive.archive.format import schema
from zsarchive.archive.format.chunkkeys import ChunkKeys
from zsarchive.archive.format.header import has_chunk_pieces
from zsarchive.archive.format.pieces import file_size, stream_file
from zsarchive.archive.format.views import is_id
from zsarchive.archive.read.invariants import RefReach
from zsarchive.archive.format.schema import fault
from zsarchive.errors import RecordFault, ZSCorrupt, ZSError
from zsarchive.io.location import Location, parse_location
from zsarchive.io.outfile import start_writeback, write_all
from zsarchive.io.names import unportable
from zsarchive.io.sink import OBJECT_WINDOW, LocalSink, ObjectSink, Sink, Stream, Totals, check_room, write_error
from zsarchive.io.zipsink import ZipSink

ROOT_META = "zarr.json"


@dataclass
class CheckoutSummary:
    """What :func:`checkout` wrote: where, which snapshot, how many nodes and chunks, how many bytes."""

    target: str
    snapshot_id: str
    nodes: int
    chunks: int
    bytes: int
    seconds: float


@dataclass
class _Node:
    key: str  # its zarr.json's key below the target root
    node: NodeInfo
    keys: ChunkKeys | None  # how its chunk keys are spelled; None for a group


def checkout(
    archive: RepoArchive | str | os.PathLike,
    ref: str,
    target: str | os.PathLike | Location,
    *,
    group: str | None = None,
    repo: str | os.PathLike | Location | None = None,
    authorize: Iterable[str] | Mapping[str, Mapping[str, Any]] = (),
    storage_options: Mapping[str, object] | None = None,
    anon: bool = False,
    window: int | None = None,
    progress: Callable[[int, int], None] | None = None,
    client: Any = None,
    max_bytes: int | None = None,
    announce: Callable[[Totals], None] | None = None,
) -> CheckoutSummary:
    """Write the snapshot REF names as a plain Zarr v3 hierarchy at ``target`` (absent or empty).

    ``target``: a directory, a ``*.zip`` path, or an ``s3://``/``gs://``/``az://`` URL; ``group``: write only
    the node at that path and its descendants, that node becoming the root; ``repo``: the original
    repository, for native chunks the archive does not embed; ``storage_options`` and ``anon`` reach
    ``target`` and ``repo`` when they are URLs (give a :class:`~zsarchive.io.location.Location` to reach one
    otherwise), as for every command that writes; ``authorize``: virtual chunk prefixes to read;
    ``window``: transfers in flight; ``progress(done, total)``: objects written so far; ``client``: a
    ``distributed.Client`` whose workers write the chunks (they open ``archive``, ``target`` and ``repo``
    themselves: paths they see, or URLs). Before anything is written, every chunk is walked once:
    ``announce(totals)`` is told the files and bytes to come, and a checkout that would write more than
    ``max_bytes`` or, locally, more than the free space, or whose records break an invariant it relies on,
    is refused.
    """
    started = time.monotonic()
    if client is not None and isinstance(archive, RepoArchive):
        raise ZSError(
            "a checkout on a cluster takes the archive's path or URL (its workers open it), not a RepoArchive"
        )
    if isinstance(archive, RepoArchive):
        if authorize:
            raise ZSError("give authorize= to the RepoArchive, not checkout, when passing one")
        arc, owned = archive, False
    else:
        arc, owned = (
            RepoArchive(archive, authorize=dict(authorize) if isinstance(authorize, Mapping) else list(authorize)),
            True,
        )
    try:
        where_repo = None if repo is None else parse_location(repo, storage_options, anon)
        where = parse_location(target, storage_options, anon)
        out = _open_target(where, window)
        if client is not None and isinstance(out, _ZipTarget):
            raise ZSError(
                f"{target}: a .zip is written by one machine; check out on a cluster into a directory "
                "or an object store"
            )
        if not out.is_empty():
            raise ZSError(f"{target}: not empty; checkout writes only to an absent or empty target")
        snapshot_id = arc.resolve(ref)
        nodes = _select(arc, snapshot_id, ref, group)
        try:
            totals, embedded = _plan(
                arc, ref, nodes, repo_given=where_repo is not None, room=partial(check_room, where, max_bytes=max_bytes)
            )
        except RecordFault as exc:
            raise exc.named(arc.name) from None
        if announce is not None:
            announce(totals)
        out.sink.limit = max_bytes
        written = {"objects": 0, "chunks": 0, "bytes": 0}

        def advance(objects: int, size: int) -> None:
            written["objects"] += objects
            written["bytes"] += size
            if progress is not None:
                progress(written["objects"], totals.files)

        def done(key: str, size: int) -> None:
            advance(1, size)

        try:
            if client is not None:
                from zsarchive.restore.cluster import checkout_chunks

                sink_type = TaskTreeSink if isinstance(out.sink, _TreeSink) else type(out.sink)
                written["chunks"] = checkout_chunks(
                    client,
                    archive,
                    dict(authorize) if isinstance(authorize, Mapping) else list(authorize),
                    ref,
                    nodes,
                    sink_type,
                    out.sink,
                    where_repo,
                    advance,
                )
            else:
                written["chunks"] = _copy_chunks(arc, ref, nodes, out.sink, where_repo, out.local, done, embedded)
            # the root's zarr.json last, create-only: a target looks whole only when it is
            metas = sorted(((n.key, n.node.user_data) for n in nodes), key=lambda m: m[0] == ROOT_META)
            out.sink.put_all(metas[:-1], done)
            if metas:
                out.sink.put_new(*metas[-1])
                done(metas[-1][0], len(metas[-1][1]))
            out.commit()
        except BaseException as exc:
            out.abort()
            if isinstance(exc, ZSError):
                raise out.restate(exc) from None
            raise
        return CheckoutSummary(
            out.sink.name if not out.local else str(target),
            snapshot_id,
            len(nodes),
            written["chunks"],
            written["bytes"],
            time.monotonic() - started,
        )
    finally:
        if owned:
            arc.close()


def _select(arc: RepoArchive, snapshot_id: str, ref: str, group: str | None) -> list[_Node]:
    """The nodes to write, with their keys below the target root (the reader refuses nodes that are no
    tree of plain names); ZSError for a name that is not portable (a directory and a zip are read alike
    everywhere: no backslash, drive letter, NUL or control character) or that would be a node's own
    ``zarr.json``."""
    top = "/" + (group or "").strip("/")
    base = "" if top == "/" else top
    nodes: list[_Node] = []
    for node in arc.node_infos(f"snapshot:{snapshot_id}"):
        path = node.path
        if not (path == top or path.startswith(base + "/")):
            continue
        rel = "" if path == top else path[len(base) + 1 :]
        for part in rel.split("/") if rel else []:
            problem = unportable(part) or ("is a node's metadata document" if part == ROOT_META else None)
            if problem is not None:
                raise ZSError(
                    f"{arc.name}: node {path!r} at {ref!r}: its name {part!r} {problem}, not a "
                    "portable name; nothing written"
                )
        keys = None
        if node.is_array:
            keys = ChunkKeys(path, node.zarr_json, node.num_chunks, f"{rel}/" if rel else "")
            if keys.sep not in ("/", "."):
                raise ZSCorrupt(
                    f"{arc.name}: array {path!r} at {ref!r}: chunk key separator {keys.sep!r} "
                    "is neither '/' nor '.'; nothing written"
                )
        nodes.append(_Node(f"{rel}/{ROOT_META}" if rel else ROOT_META, node, keys))
    if base and not any(n.key == ROOT_META for n in nodes):
        raise ZSError(f"{arc.name}: no node {top!r} at {ref!r}")
    return nodes


def _plan(
    arc: RepoArchive, ref: str, nodes: list[_Node], repo_given: bool, room: Callable[[Totals], None]
) -> tuple[Totals, dict[str, int]]:
    """Every chunk the checkout writes, walked once before anything is written: what it writes (files and
    bytes, held against ``room`` every ``_ROOM_EVERY`` objects and at the end, so that what could never fit
    is refused before the walk is over), the size of each chunk file the archive embeds, and the invariants
    the chunks rely on (each ref within its embedded file, each kept shard index the embedded shard's own;
    the reader itself refuses two records of one chunk); ZSError if native chunks are neither in the archive
    nor reachable (no ``repo``), saying how many chunk files are missing."""
    totals, reach = Totals(complete=False), RefReach()
    shards = has_chunk_pieces(arc.format_version) and arc.holds(schema.SHARD_INDEX)

    for item in nodes:
        totals.add(len(item.node.user_data))
        if item.keys is None:
            continue
        for chunk in arc.array_chunks(item.node):
            if totals.files % _ROOM_EVERY == 0:
                room(totals)
            if chunk.kind == "inline":
                totals.add(len(chunk.inline))
                continue
            key = (item.node.id, chunk.coords)
            if not all(type(n) is int and n >= 0 for n in (chunk.offset, chunk.length)):
                raise fault(schema.CHUNK_REF, key, "offset and length must be integers >= 0")
            totals.add(chunk.length)
            if chunk.kind != "native":
                continue
            if not is_id(chunk.chunk_id):
                raise fault(schema.CHUNK_REF, key, f"chunk id {chunk.chunk_id!r} is not in icechunk's spelling")
            reach.note(chunk.chunk_id, chunk.offset + chunk.length, key)
            if shards:
                arc.shard_index(chunk)  # refuses a kept index that is not the embedded shard's own
    embedded = {}
    if arc.holds(schema.CHUNK_DATA):
        for chunk_id in reach.ends:
            size = file_size(arc.zs, chunk_id)
            if size is not None:
                reach.check(chunk_id, size)
                embedded[chunk_id] = size
    missing = len(reach.ends) - len(embedded)
    if missing and not repo_given:
        raise ZSError(
            f"{arc.name}: {missing} chunk file{'s' if missing != 1 else ''} that {ref!r} uses are not "
            "in the archive (it was exported without --include-chunks): give the original repository "
            "with --repo SOURCE; nothing written"
        )
    totals.complete = True
    room(totals)
    return totals, embedded


_ROOM_EVERY = 4096
"""Objects counted between two checks of the room a checkout has (a statvfs each: cheap at this rate)."""


def _copy_chunks(
    arc: RepoArchive,
    ref: str,
    nodes: list[_Node],
    sink: Sink,
    repo: Location | None,
    zero_copy: bool,
    done: Callable[[str, int], None],
    embedded: dict[str, int],
) -> int:
    """Write every chunk of the arrays among ``nodes``, bytes as stored (an embedded chunk streamed from its
    pieces, whatever its length); returns how many."""
    count = 0

    def items() -> Iterator[tuple[str, Any]]:
        nonlocal count
        for item in nodes:
            if item.keys is None:
                continue
            for chunk in arc.array_chunks(item.node):
                count += 1
                key = item.keys.key(chunk.coords)
                if chunk.kind == "inline":
                    yield key, chunk.inline
                elif chunk.kind == "native" and chunk.chunk_id in embedded:
                    yield (
                        key,
                        Stream(
                            chunk.length,
                            partial(
                                stream_file,
                                arc.zs,
                                chunk.chunk_id,
                                chunk.offset + chunk.length,
                                zero_copy,
                                chunk.offset,
                            ),
                            f"{arc.name}: embedded chunk {chunk.chunk_id}",
                        ),
                    )
                else:
                    yield key, partial(arc.read_chunk, chunk, ref, repo, zero_copy)

    sink.put_all(items(), done)
    return count


class _Target:
    """A write target: its sink, how a finished write is put in place, how a failed one is dropped."""

    local = False

    def __init__(self, sink: Sink) -> None:
        self.sink = sink

    def is_empty(self) -> bool:
        """Whether the target holds nothing (or does not exist)."""
        return self.sink.is_empty()

    def commit(self) -> None:
        """Make the written objects the target (they are in place already on an object store)."""

    def abort(self) -> None:
        """Drop what a failed write left (on an object store, without its root zarr.json, it looks unfinished)."""

    def restate(self, exc: ZSError) -> ZSError:
        """``exc`` as the user should read it (naming the target, not a temporary name)."""
        return exc


class _TreeSink(LocalSink):
    """The hidden temporary copy of a directory checkout, which only this checkout writes and which
    moves into place whole: each object is created where it belongs (no temporary name of its own),
    its bytes -- a view of the archive's, or a list of them -- written with no copy of Python's."""

    exclusive = True
    """Whether an object is created only where none is (no one else writes here)."""

    def put(self, key: str, data: bytes | memoryview | list) -> None:
        path = self._place(key)
        try:
            fd = os.open(
                path,
                os.O_WRONLY
                | os.O_CREAT
                | (os.O_EXCL if self.exclusive else os.O_TRUNC)
                | getattr(os, "O_BINARY", 0)
                | getattr(os, "O_CLOEXEC", 0),
                0o666,
            )
        except OSError as exc:
            raise write_error(exc, path) from None
        try:
            write_all(fd, self.parts(data))
            start_writeback(fd, 0, 0)  # to the disk while the next are written: the final sync waits less
        except OSError as exc:
            path.unlink(missing_ok=True)
            raise write_error(exc, path) from None
        except BaseException:
            path.unlink(missing_ok=True)
            raise
        finally:
            os.close(fd)


class TaskTreeSink(_TreeSink):
    """The same, written by a cluster's tasks, which may run twice (a worker lost midway): an object
    written again replaces what the first run left."""

    exclusive = False


class _DirTarget(_Target):
    """A directory: written under a hidden temporary directory, moved into place when complete
    (beside the target if it is absent; inside it, entry by entry with zarr.json last, if it is an
    empty directory, which may be a mount point)."""

    local = True

    def __init__(self, path: str, window: int) -> None:
        self.path = os.path.realpath(path)
        self.inside = os.path.isdir(self.path)
        name = f".zs-checkout.{secrets.token_hex(6)}.tmp"
        self.temp = (
            os.path.join(self.path, name)
            if self.inside
            else os.path.join(os.path.dirname(self.path), f".{os.path.basename(self.path)}{name}")
        )
        super().__init__(_TreeSink(Location(self.temp, "file"), window))

    def is_empty(self) -> bool:
        return LocalSink(Location(self.path, "file")).is_empty()

    def commit(self) -> None:
        try:
            os.sync()  # the files reach the disk before they appear at the target
            os.makedirs(self.temp, exist_ok=True)  # an empty snapshot is an empty directory
            if not self.inside:
                os.rename(self.temp, self.path)
                return
            entries = sorted(os.listdir(self.temp), key=lambda e: e == ROOT_META)
            for entry in entries:
                os.rename(os.path.join(self.temp, entry), os.path.join(self.path, entry))
            os.rmdir(self.temp)
        except OSError as exc:
            raise write_error(exc, self.path) from None

    def abort(self) -> None:
        shutil.rmtree(self.temp, ignore_errors=True)

    def restate(self, exc: ZSError) -> ZSError:
        return type(exc)(str(exc).replace(self.temp, self.path))


class _ZipTarget(_Target):
    local = True

    def commit(self) -> None:
        self.sink.commit()

    def abort(self) -> None:
        self.sink.abort()


def _open_target(where: Location, window: int | None) -> _Target:
    if where.kind == "http":
        raise ZSError(
            f"{where.url}: cannot write over plain HTTP (give a directory, a .zip path or an s3://, gs:// or az:// URL)"
        )
    if not where.is_local:
        return _Target(ObjectSink(where, window or OBJECT_WINDOW))
    if where.url.lower().endswith(".zip"):
        return _ZipTarget(ZipSink(where, window or 8))
    return _DirTarget(where.url, window or 8)
