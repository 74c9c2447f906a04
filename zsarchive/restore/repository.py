"""``restore``: an archive back into an Icechunk repository that icechunk opens, in any storage.

A pipeline of named stages: **read** the archive's history, **plan** what comes back, **encode** the
manifests (so that every native chunk file they name is known before anything is written), **check**
the target and the chunk sources, **copy** the chunk files (as stored, many in flight), **write** the
manifests, transaction logs and snapshots, **verify** each by reading it back with zsarchive's own
Icechunk reader, and only then **commit**: write the one file that makes the target a repository
(V2 ``repo``, V1 ``refs/branch.main/ref.json``) with a create-only put. An interrupted restore leaves no
such file, so icechunk refuses to open the target, and ``restore`` on it says so.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Mapping
from urllib.parse import quote

import numpy as np
import zstandard

from zsarchive.archive.format import schema
from zsarchive.archive.format.pieces import file_size, read_pieces, stream_file
from zsarchive.archive.read.invariants import check_reach, dictionary_fault, shard_indexes
from zsarchive.archive.read.reader import ArchiveReader, guarded, records_under
from zsarchive.errors import ZSError
from zsarchive.icechunk.config import dump_config
from zsarchive.icechunk.manifest.decode import decode_manifest
from zsarchive.icechunk.manifest.encode import encode_manifest
from zsarchive.icechunk.manifest.refs import NATIVE, RefTable
from zsarchive.icechunk.model import RefKind, RepoInfo
from zsarchive.icechunk.repo_info import decode_repo_info, encode_repo_info
from zsarchive.icechunk.snapshot import decode_snapshot, encode_snapshot
from zsarchive.icechunk.txlog import decode_transaction_log, encode_transaction_log
from zsarchive.io.location import Location, parse_location
from zsarchive.io.sink import AlreadyExists, Sink, Stream, Totals, check_room, open_sink
from zsarchive.icechunk.storage import Storage, open_storage
from zsarchive.restore.materialize import Materializer
from zsarchive.restore.plan import ManifestContents, ManifestPlan, RestorePlan, select
from zsarchive.restore.source import Timelines, read_history

Progress = Callable[[str, int, int], None]
"""``progress(stage, done, total)``: called as each stage advances."""


@dataclass
class RestoreSummary:
    """What a restore wrote."""

    target: str
    spec_version: int
    snapshots: int
    manifests: int
    transaction_logs: int
    chunk_files: int
    chunk_bytes: int
    branches: int
    tags: int
    notes: list[str] = field(default_factory=list)
    """What the restored repository holds differently from the original, and why."""


def final_key(spec_version: int) -> str:
    """The file whose presence makes a directory an Icechunk repository of that spec version."""
    return "repo" if spec_version >= 2 else "refs/branch.main/ref.json"


def check_target(sink: Sink, storage: Storage, spec_version: int) -> None:
    """Refuse (one line) a target that holds anything: a repository, an interrupted restore, other files."""
    if sink.is_empty():
        return
    if storage.read(final_key(spec_version)) is not None or storage.read("repo") is not None:
        raise ZSError(f"{sink.name}: already holds an Icechunk repository; restore into an empty or new location")
    if storage.list("snapshots/") or storage.list("manifests/") or storage.list("chunks/"):
        raise ZSError(
            f"{sink.name}: holds an unfinished restore (repository files but no "
            f"'{final_key(spec_version)}', so icechunk cannot open it); remove it and restore again"
        )
    raise ZSError(f"{sink.name}: is not empty; restore into an empty or new location")


_PATH_ESCAPES = set('/\\{^}%`]">[~<#|\r\n*?')
"""ASCII characters the storage layer under icechunk 1.x (object_store paths) percent-encodes in a key,
besides control characters and every non-ASCII byte."""


def _ref_dir(kind: str, name: str) -> str:
    encoded = "".join(quote(c, safe="") if c in _PATH_ESCAPES or ord(c) < 32 or ord(c) > 126 else c for c in name)
    return f"refs/{kind}.{encoded}"


class Restore:
    """One restore job: the archive, the plan, the target and where chunk bytes come from."""

    def __init__(
        self,
        archive: Any,
        target: str | os.PathLike | Location,
        *,
        repo: Any = None,
        refs: Iterable[str] = (),
        shallow: bool = False,
        storage_options: Mapping[str, object] | None = None,
        anon: bool = False,
        progress: Progress | None = None,
        transfers: int | None = None,
        materialize_virtual: bool = False,
        max_bytes: int | None = None,
        announce: Callable[[Totals], None] | None = None,
    ):
        self.reader = ArchiveReader(archive)
        self.transfers = transfers
        self.materializer = Materializer(self.reader) if materialize_virtual else None
        self.max_bytes = max_bytes
        self.announce = announce or (lambda totals: None)
        self.location = parse_location(target, storage_options, anon)
        self.repo = None if repo is None else parse_location(repo, storage_options, anon)
        self.refs, self.shallow = list(refs), shallow
        self.progress = progress or (lambda stage, done, total: None)
        self.notes: list[str] = []
        self.timelines = Timelines(self.reader)

    @property
    def name(self) -> str:
        """The archive's name (for messages)."""
        return self.reader.name

    # -- stages ----------------------------------------------------------------------------------

    @guarded
    def plan(self) -> RestorePlan:
        """Read the archive's history and decide what comes back."""
        return select(read_history(self.reader, self.timelines), self.refs, self.shallow)

    @guarded
    def encode_manifests(self, plan: RestorePlan) -> tuple[dict[str, bytes], dict[str, int]]:
        """Every manifest file's bytes, and the native chunk files they name (:meth:`encode_manifest`)."""
        contents = ManifestContents(self.reader, plan, self.timelines)
        files: dict[str, bytes] = {}
        needed: dict[str, int] = {}
        order = manifest_order(plan)
        for done, manifest in enumerate(order, 1):
            files[manifest.id], named = self.encode_manifest(contents, manifest)
            reach(needed, named)
            self.progress("manifests", done, len(order))
        return files, needed

    def encode_manifest(self, contents: ManifestContents, manifest: ManifestPlan) -> tuple[bytes, dict[str, int]]:
        """One manifest file's bytes (its size, where it cannot have the original's, in ``resized``), and the
        native chunk files it names, each with the furthest byte a ref reaches in it."""
        arrays = contents.refs(manifest)
        if self.materializer is not None:
            arrays = [(node_id, self.materializer.refs(refs)) for node_id, refs in arrays]
        count = sum(len(refs.kind) if isinstance(refs, RefTable) else len(refs) for _, refs in arrays)
        if manifest.num_refs and count != manifest.num_refs:
            self.notes.append(
                f"manifest {manifest.id}: {count} refs restored, the original held "
                f"{manifest.num_refs} (refs the archive does not keep: hidden by another manifest)"
            )
        chunk_ids: dict[str, int] = {}
        for _, refs in arrays:
            if isinstance(refs, RefTable):
                native = refs.kind == NATIVE
                if native.any():
                    ends = np.zeros(len(refs.texts), np.uint64)
                    np.maximum.at(ends, refs.text[native], refs.offset[native] + refs.length[native])
                    named = np.flatnonzero(np.bincount(refs.text[native], minlength=len(refs.texts)))
                    reach(chunk_ids, dict(zip(map(refs.texts.__getitem__, named.tolist()), ends[named].tolist())))
            else:
                reach(chunk_ids, {r.chunk_id: r.offset + r.length for r in refs if r.kind is RefKind.NATIVE})
        try:
            raw = encode_manifest(
                manifest.id,
                arrays,
                manifest.spec_version,
                manifest.implementation,
                manifest.size,
                manifest.location_dictionary,
                *_levels(contents.plan.history.facts.get("config")),
            )
        except zstandard.ZstdError as exc:  # a dictionary zstd cannot use (made up, or too large)
            raise dictionary_fault(f"manifests/{manifest.id}", manifest.location_dictionary or b"", exc) from None
        if manifest.size and len(raw) != manifest.size:  # the snapshots name the size it has
            contents.plan.resized[manifest.id] = len(raw)
            self.notes.append(
                f"manifest {manifest.id}: {len(raw)} bytes, the original {manifest.size}: the "
                f"snapshots name the new size"
            )
        return raw, chunk_ids

    @guarded
    def chunk_sources(self, needed: Mapping[str, int]) -> tuple[dict[str, int], Storage | None]:
        """(size of each file the archive embeds or a kept virtual range makes, the source repository's
        storage if given); one line if some chunk file has no source, or if a ref reaches past its embedded
        file (``needed``: how far the refs reach into each) or a shard index record disagrees with its
        embedded shard (:mod:`~zsarchive.archive.read.invariants`)."""
        made = (
            {}
            if self.materializer is None
            else {cid: self.materializer.files[cid].length for cid in needed.keys() & self.materializer.files.keys()}
        )
        embedded = dict(made)
        for cid, end in needed.items():
            size = None if cid in made else file_size(self.reader.zs, cid)
            if size is not None:
                check_reach(cid, end, size)
                embedded[cid] = size
        if self.reader.holds(schema.SHARD_INDEX):
            shard_indexes(
                records_under(self.reader.zs, schema.SHARD_INDEX),
                lambda cid, start, stop: (
                    read_pieces(self.reader.zs, cid, start, stop) if cid in embedded and cid not in made else None
                ),
            )
        source = None if self.repo is None else open_storage(self.repo)
        missing = len(needed) - len(embedded)
        if missing and source is None:
            raise ZSError(
                f"{self.reader.name}: {missing} of {len(needed)} chunk files are not in the archive "
                f"(export it with --include-chunks, or give the original repository with --repo)"
            )
        return embedded, source

    def totals(self, needed: Mapping[str, int], embedded: dict[str, int], sizes: Iterable[int]) -> Totals:
        """What the restore will write: every chunk file (one copied from the source repository counted
        as long as its furthest ref reaches: it is at least that long) and the metadata files of ``sizes``."""
        totals = Totals()
        for cid, end in needed.items():
            totals.add(embedded.get(cid, end))
        for size in sizes:
            totals.add(size)
        return totals

    def copy_chunks(
        self, sink: Sink, needed: Mapping[str, int], embedded: dict[str, int], source: Storage | None
    ) -> tuple[int, int]:
        """Copy every chunk file as stored: the archive's embedded ones (``embedded``: their sizes), then the
        rest from the source; progress in bytes (each file counted as long as its refs reach until it is
        written)."""
        total, done = sum(embedded.get(cid, end) for cid, end in needed.items()), [0]

        def tick(key: str, size: int) -> None:
            done[0] += size
            self.progress("chunks", done[0], max(total, done[0]))

        def pieces(cid: str) -> Stream | Callable[[], list]:
            if self.materializer is not None and cid in self.materializer.files:
                return lambda: self.materializer.pieces(cid)
            return Stream(
                embedded[cid],
                lambda: stream_file(self.reader.zs, cid, embedded[cid], zero_copy=True),
                f"{self.reader.name}: embedded chunk {cid}",
            )

        # each file as its pieces (views into the archive's map where it is one, written with no copy
        # here), read on the writer threads a window at a time: reading one file overlaps writing others,
        # and memory does not follow a file's length
        written = sink.put_all(((f"chunks/{cid}", pieces(cid)) for cid in sorted(embedded)), tick)

        def fetch(cid: str) -> Callable[[], bytes]:
            def read() -> bytes:
                raw = source.read(f"chunks/{cid}")
                if raw is None:
                    raise ZSError(f"{source.name}: chunks/{cid} is missing, but the archive's refs name it")
                return raw

            return read

        rest = sorted(needed.keys() - embedded.keys())
        if rest:
            written += sink.put_all(((f"chunks/{cid}", fetch(cid)) for cid in rest), tick)
        return len(needed), written

    @guarded
    def metadata_files(self, plan: RestorePlan, manifests: dict[str, bytes]) -> dict[str, bytes]:
        """Every metadata file but the final one: manifests, transaction logs, snapshots (and V1 refs)."""
        files = {f"manifests/{mid}": raw for mid, raw in manifests.items()}
        for log in plan.transaction_logs():
            files[f"transactions/{log.id}"] = encode_transaction_log(
                log, log.header.spec_version, log.header.implementation
            )
        for sid in plan.snapshots:
            snap = plan.snapshot(sid)
            files[f"snapshots/{sid}"] = encode_snapshot(snap, snap.header.spec_version, snap.header.implementation)
        if plan.spec_version >= 2:
            for key, info in self._repo_infos(plan)[1:]:  # the ops log's older files
                files[key] = encode_repo_info(info, info.header.implementation)
        if plan.spec_version == 1:
            main = plan.branches["main"]
            for name, sid in plan.branches.items():
                if name != "main":
                    files[f"{_ref_dir('branch', name)}/ref.json"] = _ref_json(sid)
            for name, sid in plan.tags.items():
                files[f"{_ref_dir('tag', name)}/ref.json"] = _ref_json(sid)
            for name in plan.deleted_tags:
                # the snapshot its ref.json named (format 6); older archives keep none: main's, never read
                files[f"{_ref_dir('tag', name)}/ref.json"] = _ref_json(
                    plan.history.deleted_tag_snapshots.get(name, main)
                )
                files[f"{_ref_dir('tag', name)}/ref.json.deleted"] = b""
            config = plan.history.facts.get("config")
            if config is not None:
                files["config.yaml"] = dump_config(config)
        return files

    @guarded
    def final_file(self, plan: RestorePlan) -> bytes:
        """The bytes of the file that makes the target a repository."""
        if plan.spec_version == 1:
            return _ref_json(plan.branches["main"])
        _, info = self._repo_infos(plan)[0]
        if info.config is not None and not self.location.is_local and "storage" in info.config:
            self.notes.append("the configuration's storage settings are left out: they belong to the original backend")
        return encode_repo_info(info, info.header.implementation)

    def _repo_infos(self, plan: RestorePlan) -> list[tuple[str, RepoInfo]]:
        """The V2 repo info files (``repo`` first); on an object store without the original storage's
        settings (retries, conditional updates ...), which would bind this one."""
        infos = plan.repo_infos()
        if self.location.is_local:
            return infos
        return [
            (key, _without_storage_settings(info) if info.config is not None and "storage" in info.config else info)
            for key, info in infos
        ]

    def verify(self, storage: Storage, files: dict[str, bytes], final: bytes) -> None:
        """Read every metadata file back from the target and decode it with zsarchive's own reader."""
        decoders = {
            "snapshots": decode_snapshot,
            "manifests": decode_manifest,
            "transactions": decode_transaction_log,
            "overwritten": decode_repo_info,
        }
        for done, (key, raw) in enumerate(sorted(files.items()), 1):
            back = storage.read(key)
            name = f"{storage.name.rstrip('/')}/{key}"
            if back != raw:
                raise ZSError(f"{name}: reads back differently from what was written")
            decode = decoders.get(key.partition("/")[0])
            if decode is not None:
                decode(back, name)
            self.progress("verify", done, len(files))
        if final.startswith(b"ICE"):
            decode_repo_info(final, "repo")

    def open_target(self, plan: RestorePlan) -> tuple[Sink, Storage | None]:
        """The target's sink, and its storage where it exists already (checked to be empty)."""
        sink = open_sink(self.location, window=self.transfers)
        storage = open_storage(self.location) if not self.location.is_local or self.location.path.is_dir() else None
        if storage is not None:
            check_target(sink, storage, plan.spec_version)
        return sink, storage

    def run(self) -> RestoreSummary:
        """All stages, in order; nothing is written when a check before the copy fails."""
        plan = self.plan()
        sink, storage = self.open_target(plan)
        manifests, needed = self.encode_manifests(plan)
        embedded, source = self.chunk_sources(needed)
        try:
            files = self.metadata_files(plan, manifests)
            final = self.final_file(plan)
            self.before_writing(sink, self.totals(needed, embedded, map(len, (*files.values(), final))))
            with self.undone_on_failure():
                chunk_files, chunk_bytes = self.copy_chunks(sink, needed, embedded, source)
                return self.finish(plan, sink, storage, files, final, len(manifests), chunk_files, chunk_bytes)
        finally:
            if source is not None:
                source.close()

    def before_writing(self, sink: Sink, totals: Totals) -> None:
        """Refuse what would pass ``max_bytes`` or, locally, the free space; show the totals; hold the sink
        to the limit."""
        check_room(self.location, totals, self.max_bytes)
        self.announce(totals)
        sink.limit = self.max_bytes

    @contextlib.contextmanager
    def undone_on_failure(self) -> Iterator[None]:
        """A local target, absent or empty before, is left so when the block fails or is interrupted."""
        existed = self.location.is_local and os.path.lexists(self.location.path)
        try:
            yield
        except AlreadyExists:  # another writer's repository appeared meanwhile: its files stay
            raise
        except BaseException:
            if self.location.is_local:
                _empty(self.location.path, existed)
            raise

    def finish(
        self,
        plan: RestorePlan,
        sink: Sink,
        storage: Storage | None,
        files: dict[str, bytes],
        final: bytes,
        manifest_count: int,
        chunk_files: int,
        chunk_bytes: int,
    ) -> RestoreSummary:
        """Write the metadata ``files`` (the manifests among them, those not written yet), read them back, then
        the ``final`` file that makes the target a repository."""
        done = [0]

        def tick(key: str, size: int) -> None:
            done[0] += 1
            self.progress("metadata", done[0], len(files))

        sink.put_all(files.items(), tick)
        self.verify(storage or open_storage(self.location), files, final)
        sink.flush()  # everything else durable before the file that makes it a repository
        sink.put_new(final_key(plan.spec_version), final)
        return RestoreSummary(
            self.location.url,
            plan.spec_version,
            len(plan.snapshots),
            manifest_count,
            sum(k.startswith("transactions/") for k in files),
            chunk_files,
            chunk_bytes,
            len(plan.branches),
            len(plan.tags),
            self.notes,
        )

    def close(self) -> None:
        """Release the archive."""
        self.reader.close()


def _empty(path: Path, keep: bool) -> None:
    """Remove what a failed restore wrote at ``path`` (the directory itself unless ``keep``: it existed)."""
    if not keep:
        shutil.rmtree(path, ignore_errors=True)
        return
    with os.scandir(path) as entries:
        for entry in list(entries):
            if entry.is_dir(follow_symlinks=False):
                shutil.rmtree(entry.path, ignore_errors=True)
            else:
                os.unlink(entry.path)


def reach(needed: dict[str, int], named: Mapping[str, int]) -> None:
    """Add chunk files ``named`` (id -> the furthest byte a ref reaches in it) to ``needed``."""
    for cid, end in named.items():
        if end > needed.get(cid, -1):
            needed[cid] = end


def manifest_order(plan: RestorePlan) -> list[ManifestPlan]:
    """The manifests in the order they are made: by the first array each serves (its timeline is read once)."""
    return sorted(plan.manifests.values(), key=lambda m: (m.users[0][1].id if m.users else "", m.id))


def _levels(config: Mapping[str, Any] | None) -> tuple[int, int]:
    """(zstd level of files, of compressed virtual locations) the repository's configuration sets (icechunk's
    defaults: 3 and 3)."""
    config = config if isinstance(config, Mapping) else {}
    files = (config.get("compression") or {}).get("level")
    locations = ((config.get("manifest") or {}).get("virtual_chunk_location_compression") or {}).get(
        "compression_level"
    )
    return (files if isinstance(files, int) else 3), (locations if isinstance(locations, int) else 3)


def _ref_json(sid: str) -> bytes:
    return json.dumps({"snapshot": sid}, separators=(",", ":")).encode("ascii")


def _without_storage_settings(info: RepoInfo) -> RepoInfo:
    return replace(info, config={k: v for k, v in info.config.items() if k != "storage"} | {"storage": None})


def restore(
    archive: Any,
    target: str | os.PathLike | Location,
    *,
    repo: Any = None,
    refs: Iterable[str] = (),
    shallow: bool = False,
    storage_options: Mapping[str, object] | None = None,
    anon: bool = False,
    progress: Progress | None = None,
    transfers: int | None = None,
    client: Any = None,
    materialize_virtual: bool = False,
    max_bytes: int | None = None,
    announce: Callable[[Totals], None] | None = None,
) -> RestoreSummary:
    """Write the repository ``archive`` holds into ``target`` (an absent or empty directory, or an
    ``s3://``, ``gs://``, ``az://`` URL); chunk bytes from the archive or the original repository ``repo``.
    ``storage_options`` and ``anon`` reach ``target`` and ``repo`` when they are URLs (give a
    :class:`~zsarchive.io.location.Location` to reach one otherwise), as for every command that writes;
    ``refs``: only the history these branches and tags reach; ``shallow``: only their tips; ``transfers``: writes
    in flight (default: 8 to a directory, 64 to an object store); ``progress(stage, done, total)``: as each
    stage advances (chunk files in bytes). ``client``: a
    ``distributed.Client`` whose cluster makes the manifests and copies the chunk files (its workers open
    ``archive``, ``target`` and ``repo`` themselves: paths they see, or URLs). ``materialize_virtual``: every
    virtual chunk ref whose bytes the archive keeps comes back as a native chunk (:mod:`materialize
    <zsarchive.restore.materialize>`), so that the repository needs no source (in this process only). Before
    anything is written, ``announce(totals)`` is told the files and bytes to come, and a restore that would
    write more than ``max_bytes`` or, locally, more than the free space is refused."""
    options = dict(
        repo=repo,
        refs=tuple(refs),
        shallow=shallow,
        storage_options=storage_options,
        anon=anon,
        progress=progress,
        transfers=transfers,
        max_bytes=max_bytes,
        announce=announce,
    )
    if client is not None:
        if materialize_virtual:
            raise ZSError(
                "restore: materializing virtual chunks runs in this process only; leave out the "
                "cluster (--scheduler) or --materialize-virtual"
            )
        from zsarchive.restore.cluster import ClusterRestore

        job: Restore = ClusterRestore(archive, target, client=client, **options)
    else:
        job = Restore(archive, target, materialize_virtual=materialize_virtual, **options)
    try:
        return job.run()
    finally:
        job.close()
