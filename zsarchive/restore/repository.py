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

import json
import os
import shutil
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping
from urllib.parse import quote

import zstandard

from zsarchive.archive.format import schema
from zsarchive.archive.format.pieces import file_size, read_pieces, stream_file
from zsarchive.archive.read.invariants import fault, shard_indexes
from zsarchive.archive.read.reader import ArchiveReader, guarded, records_under
from zsarchive.errors import ZSError
from zsarchive.icechunk.manifest import RefBatch, decode_manifest, encode_manifest
from zsarchive.icechunk.model import RefKind, RepoInfo
from zsarchive.icechunk.repo_info import decode_repo_info, encode_repo_info
from zsarchive.icechunk.snapshot import decode_snapshot, encode_snapshot
from zsarchive.icechunk.txlog import decode_transaction_log, encode_transaction_log
from zsarchive.io.location import Location, parse_location
from zsarchive.io.sink import AlreadyExists, Sink, Stream, Totals, check_room, open_sink
from zsarchive.icechunk.storage import Storage, open_storage
from zsarchive.restore.plan import ManifestContents, RestorePlan, select
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
        raise ZSError(f"{sink.name}: holds an unfinished restore (repository files but no "
                      f"'{final_key(spec_version)}', so icechunk cannot open it); remove it and restore again")
    raise ZSError(f"{sink.name}: is not empty; restore into an empty or new location")


_PATH_ESCAPES = set('/\\{^}%`]">[~<#|\r\n*?')
"""ASCII characters the storage layer under icechunk 1.x (object_store paths) percent-encodes in a key,
besides control characters and every non-ASCII byte."""


def _ref_dir(kind: str, name: str) -> str:
    encoded = "".join(quote(c, safe="") if c in _PATH_ESCAPES or ord(c) < 32 or ord(c) > 126 else c for c in name)
    return f"refs/{kind}.{encoded}"


def _yaml_config(config: Mapping[str, Any]) -> bytes:
    """config.yaml of a V1 repository: a virtual chunk container's store as icechunk's tagged YAML."""
    import yaml

    class Tagged(dict):
        pass

    class Dumper(yaml.SafeDumper):
        pass

    def represent(dumper, value):
        (tag, inner), = value.items()
        if isinstance(inner, dict):
            return dumper.represent_mapping("!" + tag, inner)
        if isinstance(inner, list):
            return dumper.represent_sequence("!" + tag, inner)
        return dumper.represent_scalar("!" + tag, str(inner))

    Dumper.add_representer(Tagged, represent)
    config = json.loads(json.dumps(config))
    for container in (config.get("virtual_chunk_containers") or {}).values():
        if isinstance(container, dict) and isinstance(container.get("store"), dict) and len(container["store"]) == 1:
            container["store"] = Tagged(container["store"])
    return yaml.dump(config, Dumper=Dumper, sort_keys=False, allow_unicode=True).encode("utf-8")


class Restore:
    """One restore job: the archive, the plan, the target and where chunk bytes come from."""

    def __init__(self, archive: Any, target: str | os.PathLike | Location, *, repo: Any = None,
                 refs: Iterable[str] = (), shallow: bool = False,
                 storage_options: Mapping[str, object] | None = None, anon: bool = False,
                 repo_storage_options: Mapping[str, object] | None = None, repo_anon: bool = False,
                 progress: Progress | None = None, max_bytes: int | None = None,
                 announce: Callable[[Totals], None] | None = None):
        self.reader = ArchiveReader(archive)
        self.max_bytes = max_bytes
        self.announce = announce or (lambda totals: None)
        self.location = parse_location(target, storage_options, anon)
        self.repo = None if repo is None else parse_location(repo, repo_storage_options, repo_anon)
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
    def encode_manifests(self, plan: RestorePlan) -> tuple[dict[str, bytes], set[str]]:
        """Every manifest file's bytes, and the native chunk ids they name."""
        contents = ManifestContents(self.reader, plan, self.timelines)
        files, chunk_ids = {}, set()
        order = sorted(plan.manifests.values(), key=lambda m: (m.users[0][1].id if m.users else "", m.id))
        for done, manifest in enumerate(order, 1):
            arrays = contents.refs(manifest)
            count = sum(len(refs.kind) if isinstance(refs, RefBatch) else len(refs) for _, refs in arrays)
            if manifest.num_refs and count != manifest.num_refs:
                self.notes.append(f"manifest {manifest.id}: {count} refs restored, the original held "
                                  f"{manifest.num_refs} (refs the archive does not keep: hidden by another manifest)")
            for _, refs in arrays:
                if isinstance(refs, RefBatch):
                    chunk_ids.update(c for c in refs.chunk_id if c is not None)
                else:
                    chunk_ids.update(r.chunk_id for r in refs if r.kind is RefKind.NATIVE)
            form = {"implementation": manifest.implementation, "location_dictionary": manifest.location_dictionary}
            try:
                try:
                    files[manifest.id] = encode_manifest(manifest.id, arrays, manifest.spec_version,
                                                         size=manifest.size, **form)
                except ValueError:  # it encodes to more: the snapshots name the size it has
                    files[manifest.id] = encode_manifest(manifest.id, arrays, manifest.spec_version, **form)
                    plan.resized[manifest.id] = len(files[manifest.id])
                    self.notes.append(f"manifest {manifest.id}: {len(files[manifest.id])} bytes, the original "
                                      f"{manifest.size}: the snapshots name the new size")
            except zstandard.ZstdError as exc:  # a dictionary zstd cannot use (made up, or too large)
                raise fault(schema.FILES, (f"manifests/{manifest.id}",),
                            f"its location dictionary ({len(manifest.location_dictionary or b''):,} bytes) "
                            f"compresses no location: {exc}") from None
            self.progress("manifests", done, len(order))
        return files, chunk_ids

    @guarded
    def chunk_sources(self, needed: set[str]) -> tuple[dict[str, int], Storage | None]:
        """(size of each file the archive embeds, the source repository's storage if given); one line if
        some chunk file has no source, or if a ref reaches past its embedded file or a shard index record
        disagrees with its embedded shard (:mod:`~zsarchive.archive.read.invariants`)."""
        embedded = {}
        for cid in needed:
            size = file_size(self.reader.zs, cid)
            if size is not None:
                self.timelines.reach.check(cid, size)
                embedded[cid] = size
        if self.reader.holds(schema.SHARD_INDEX):
            shard_indexes(records_under(self.reader.zs, schema.SHARD_INDEX), lambda cid, start, stop: read_pieces(
                self.reader.zs, cid, start, stop) if cid in embedded else None)
        source = None if self.repo is None else open_storage(self.repo)
        missing = len(needed) - len(embedded)
        if missing and source is None:
            raise ZSError(f"{self.reader.name}: {missing} of {len(needed)} chunk files are not in the archive "
                          f"(export it with --include-chunks, or give the original repository with --repo)")
        return embedded, source

    def totals(self, needed: set[str], embedded: dict[str, int], files: dict[str, bytes], final: bytes) -> Totals:
        """What the restore will write: every chunk file (one copied from the source repository counted
        as long as its furthest ref reaches: it is at least that long) and every metadata file."""
        totals = Totals()
        reach = self.timelines.reach.ends
        for cid in needed:
            totals.add(embedded[cid] if cid in embedded else reach.get(cid, (0,))[0])
        for raw in (*files.values(), final):
            totals.add(len(raw))
        return totals

    def copy_chunks(self, sink: Sink, needed: set[str], embedded: dict[str, int],
                    source: Storage | None) -> tuple[int, int]:
        """Copy every chunk file as stored: the archive's embedded ones, then the rest from the source."""
        total, done = len(needed), [0]

        def tick(key: str, size: int) -> None:
            done[0] += 1
            self.progress("chunks", done[0], total)

        def pieces(cid: str) -> Stream:
            return Stream(embedded[cid], lambda: stream_file(self.reader.zs, cid, embedded[cid], views=True),
                          f"{self.reader.name}: embedded chunk {cid}")

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

        rest = sorted(needed.difference(embedded))
        if rest:
            written += sink.put_all(((f"chunks/{cid}", fetch(cid)) for cid in rest), tick)
        return len(needed), written

    @guarded
    def metadata_files(self, plan: RestorePlan, manifests: dict[str, bytes]) -> dict[str, bytes]:
        """Every metadata file but the final one: manifests, transaction logs, snapshots (and V1 refs)."""
        files = {f"manifests/{mid}": raw for mid, raw in manifests.items()}
        for log in plan.transaction_logs():
            files[f"transactions/{log.id}"] = encode_transaction_log(log, log.header.spec_version,
                                                                     log.header.implementation)
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
                files[f"{_ref_dir('tag', name)}/ref.json"] = _ref_json(plan.history.deleted_tag_snapshots.get(name, main))
                files[f"{_ref_dir('tag', name)}/ref.json.deleted"] = b""
            config = plan.history.facts.get("config")
            if config is not None:
                files["config.yaml"] = _yaml_config(config)
        return files

    @guarded
    def final_file(self, plan: RestorePlan) -> bytes:
        """The bytes of the file that makes the target a repository."""
        if plan.spec_version == 1:
            return _ref_json(plan.branches["main"])
        _, info = self._repo_infos(plan)[0]
        if info.config is not None and not self.location.is_local and "storage" in info.config:
            self.notes.append("the configuration's storage settings are left out: they belong to the original "
                              "backend")
        return encode_repo_info(info, info.header.implementation)

    def _repo_infos(self, plan: RestorePlan) -> list[tuple[str, RepoInfo]]:
        """The V2 repo info files (``repo`` first); on an object store without the original storage's
        settings (retries, conditional updates ...), which would bind this one."""
        infos = plan.repo_infos()
        if self.location.is_local:
            return infos
        return [(key, _without_storage_settings(info) if info.config is not None and "storage" in info.config
                 else info) for key, info in infos]

    def verify(self, storage: Storage, files: dict[str, bytes], final: bytes) -> None:
        """Read every metadata file back from the target and decode it with zsarchive's own reader."""
        decoders = {"snapshots": decode_snapshot, "manifests": decode_manifest,
                    "transactions": decode_transaction_log, "overwritten": decode_repo_info}
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

    def run(self) -> RestoreSummary:
        """All stages, in order; nothing is written when a check before the copy fails."""
        plan = self.plan()
        sink = open_sink(self.location)
        storage = open_storage(self.location) if not self.location.is_local or self.location.path.is_dir() \
            else None
        if storage is not None:
            check_target(sink, storage, plan.spec_version)
        manifests, needed = self.encode_manifests(plan)
        embedded, source = self.chunk_sources(needed)
        existed = self.location.is_local and os.path.lexists(self.location.path)
        try:
            files = self.metadata_files(plan, manifests)
            final = self.final_file(plan)
            totals = self.totals(needed, embedded, files, final)
            check_room(self.location, totals, self.max_bytes)
            self.announce(totals)
            sink.limit = self.max_bytes
            chunk_files, chunk_bytes = self.copy_chunks(sink, needed, embedded, source)
            done = [0]

            def tick(key: str, size: int) -> None:
                done[0] += 1
                self.progress("metadata", done[0], len(files))

            sink.put_all(files.items(), tick)
            self.verify(storage or open_storage(self.location), files, final)
            sink.flush()  # everything else durable before the file that makes it a repository
            sink.put_new(final_key(plan.spec_version), final)
        except AlreadyExists:  # another writer's repository appeared meanwhile: its files stay
            raise
        except BaseException:
            if self.location.is_local:  # it was absent or empty: a failed restore leaves it so
                _empty(self.location.path, existed)
            raise
        finally:
            if source is not None:
                source.close()
        return RestoreSummary(self.location.url, plan.spec_version, len(plan.snapshots), len(manifests),
                              sum(k.startswith("transactions/") for k in files), chunk_files, chunk_bytes,
                              len(plan.branches), len(plan.tags), self.notes)

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


def _ref_json(sid: str) -> bytes:
    return json.dumps({"snapshot": sid}, separators=(",", ":")).encode("ascii")


def _without_storage_settings(info: RepoInfo) -> RepoInfo:
    return replace(info, config={k: v for k, v in info.config.items() if k != "storage"} | {"storage": None})


def restore(archive: Any, target: str | os.PathLike | Location, *, repo: Any = None, refs: Iterable[str] = (),
            shallow: bool = False, storage_options: Mapping[str, object] | None = None, anon: bool = False,
            repo_storage_options: Mapping[str, object] | None = None, repo_anon: bool = False,
            progress: Progress | None = None, max_bytes: int | None = None,
            announce: Callable[[Totals], None] | None = None) -> RestoreSummary:
    """Write the repository ``archive`` holds into ``target`` (an absent or empty directory, or an
    ``s3://``, ``gs://``, ``az://`` URL); chunk bytes from the archive or the original repository ``repo``.
    ``refs``: only the history these branches and tags reach; ``shallow``: only their tips. Before anything
    is written, ``announce(totals)`` is told the files and bytes to come, and a restore that would write more
    than ``max_bytes`` or, locally, more than the free space is refused."""
    job = Restore(archive, target, repo=repo, refs=refs, shallow=shallow, storage_options=storage_options,
                  anon=anon, repo_storage_options=repo_storage_options, repo_anon=repo_anon, progress=progress,
                  max_bytes=max_bytes, announce=announce)
    try:
        return job.run()
    finally:
        job.close()
