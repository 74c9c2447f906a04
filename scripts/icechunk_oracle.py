"""Print, as one JSON document, everything the real icechunk says about a repository.

Run under an icechunk Python (``.peers/ic1/bin/python`` or ``.peers/ic2/bin/python``)::

    icechunk_oracle.py REPO_PATH [--virtual-prefix PREFIX=DIR ...]

The answer is the oracle that tests compare zsarchive's reader and archives against. Every
value comes from icechunk's public API (``list_*``, ``ancestry``, ``inspect_*``, ``ops_log``,
``diff``, config, read-only sessions of every snapshot and their zarr store); the only thing
read directly is the list of files in ``snapshots/``, so that snapshots no ref reaches any more
are inspected too. Our own times are RFC 3339 UTC with microseconds and ``Z`` (``inspect_*``
strings are icechunk's, which trims trailing zeros of the fraction); bytes are base64.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import os
import sys
import warnings
from datetime import datetime, timezone
from pathlib import Path
from typing import Any


def link_virtual_prefix(prefix: str, directory: Path) -> None:
    """Make the ``file://`` URL ``prefix`` resolve to ``directory`` through a symlink.

    icechunk resolves ``file://`` virtual refs by their absolute path, so fixtures refer to a
    fixed path under /tmp and every clone points that path at its own committed data.
    """
    if not prefix.startswith("file:///"):
        raise SystemExit(f"icechunk_oracle: virtual prefix {prefix!r} is not a file:/// URL")
    link = Path(prefix[len("file://") :].rstrip("/"))
    target = Path(directory).resolve()
    if link.resolve() == target:  # the prefix already names the directory: nothing to map
        return
    if link.is_symlink() and Path(os.readlink(link)) == target:
        return
    if link.exists() and not link.is_symlink():
        raise SystemExit(f"icechunk_oracle: {link} exists and is not a symlink; cannot map {prefix}")
    link.parent.mkdir(parents=True, exist_ok=True)
    # Replace atomically: a concurrent run from another clone sees either link, both valid.
    tmp = link.with_name(f".{link.name}.{os.getpid()}")
    os.symlink(target, tmp)
    os.replace(tmp, link)


def first_line(exc: BaseException) -> str:
    """icechunk's error message without its report decoration (1.x prefixes ``  x ``)."""
    line = next((ln for ln in str(exc).splitlines() if ln.strip()), type(exc).__name__).strip()
    return line[2:] if line.startswith("x ") else line


def rfc3339(value: datetime) -> str:
    """UTC, microseconds, ``Z``: the one time format of every oracle answer."""
    return value.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def jsonable(value: Any) -> Any:
    """Turn icechunk's Python answers (datetimes, sets, tuples, bytes) into JSON values."""
    if isinstance(value, datetime):
        return rfc3339(value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (set, frozenset)):
        return sorted((jsonable(v) for v in value), key=lambda v: json.dumps(v, sort_keys=True))
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if hasattr(value, "item"):  # numpy scalars
        return value.item()
    return str(value)


def snapshot_info(info: Any) -> dict:
    """A ``SnapshotInfo`` as a dict (1.x also carries manifest file infos)."""
    out = {
        "id": info.id,
        "parent_id": info.parent_id,
        "message": info.message,
        "metadata": jsonable(dict(info.metadata)),
        "written_at": rfc3339(info.written_at),
    }
    if hasattr(info, "manifests"):
        out["manifests"] = [
            {"id": m.id, "size_bytes": m.size_bytes, "num_chunk_refs": m.num_chunk_refs} for m in info.manifests
        ]
    return out


def update(entry: Any) -> dict:
    """One ops-log entry: its kind's class name, the kind's fields, and its time."""
    kind = entry.kind
    fields = {
        name: jsonable(getattr(kind, name))
        for name in dir(kind)
        if not name.startswith("_") and not isinstance(getattr(kind, name), type)
    }
    if "status" in fields:
        fields["status"] = repo_status(kind.status)
    return {
        "kind": type(kind).__name__,
        "fields": fields,
        "updated_at": rfc3339(entry.updated_at),
        "backup_path": getattr(entry, "backup_path", None),
    }


def diff(d: Any) -> dict:
    """A ``Diff`` with every field as sorted JSON lists."""
    names = [
        "new_groups",
        "new_arrays",
        "deleted_groups",
        "deleted_arrays",
        "updated_groups",
        "updated_arrays",
        "updated_chunks",
        "moved_nodes",
    ]
    return {name: jsonable(getattr(d, name)) for name in names if hasattr(d, name)}


def inspected(value: Any) -> Any:
    """``inspect_*`` returns a JSON string in 1.x and a dict in 2.x."""
    return json.loads(value) if isinstance(value, str) else jsonable(value)


async def read_tree(session: Any) -> dict:
    """Everything the session's zarr store says: keys, metadata documents, chunk bytes and kinds."""
    import icechunk as ic
    from zarr.core.buffer import default_buffer_prototype

    store = session.store
    keys = sorted([k async for k in store.list()])
    proto = default_buffer_prototype()
    metadata: dict[str, Any] = {}
    chunks: dict[str, Any] = {}
    arrays: dict[str, dict] = {}
    for key in keys:
        if key == "zarr.json" or key.endswith("/zarr.json"):
            raw = (await store.get(key, proto)).to_bytes()
            metadata[key] = {"bytes_b64": base64.b64encode(raw).decode("ascii"), "json": json.loads(raw)}
    for key, doc in metadata.items():
        if doc["json"].get("node_type") == "array":
            path = key[: -len("zarr.json")].rstrip("/")
            coords = [list(c) async for c in session.chunk_coordinates("/" + path)]
            arrays[path] = {"chunk_coordinates": sorted(coords)}
    # Split each chunk key at its own array's "c" (a group may itself be named "c").
    prefixes = [((p + "/" if p else "") + "c", p) for p in arrays]
    for key in keys:
        if key in metadata:
            continue
        path, coord = next(
            ((p, key[len(c) :].lstrip("/")) for c, p in prefixes if key == c or key.startswith(c + "/")), ("", key)
        )
        index = [int(c) for c in coord.split("/")] if coord else []
        entry: dict[str, Any] = {}
        try:
            kind = session.chunk_type("/" + path, index)
            entry["chunk_type"] = str(kind).rsplit(".", 1)[-1].lower()
        except Exception as exc:  # an API the version lacks or a key it cannot classify: say so
            entry["chunk_type_error"] = first_line(exc)
        try:
            entry["bytes_b64"] = base64.b64encode((await store.get(key, proto)).to_bytes()).decode("ascii")
        except ic.IcechunkError as exc:
            entry["error"] = first_line(exc)
        chunks[key] = entry
    locations = (
        await session.all_virtual_chunk_locations_async()
        if hasattr(session, "all_virtual_chunk_locations_async")
        else session.all_virtual_chunk_locations()
    )
    return {
        "keys": keys,
        "metadata": metadata,
        "arrays": arrays,
        "chunks": chunks,
        "virtual_chunk_locations": sorted(locations),
    }


def nodes(session: Any) -> list[dict]:
    """The node listing through zarr: every group and array with its kind and attributes."""
    import zarr

    root = zarr.open_group(store=session.store, mode="r")
    out = [{"path": "", "kind": "group", "attributes": jsonable(dict(root.attrs))}]
    for path, node in root.members(max_depth=None):
        item = {
            "path": path,
            "kind": "array" if isinstance(node, zarr.Array) else "group",
            "attributes": jsonable(dict(node.attrs)),
        }
        if isinstance(node, zarr.Array):
            item.update(
                shape=list(node.shape),
                chunks=list(node.chunks),
                dtype=str(node.dtype),
                dimension_names=jsonable(node.metadata.dimension_names),
            )
        out.append(item)
    return sorted(out, key=lambda n: n["path"])


def oracle(repo_path: Path, prefixes: dict[str, Path]) -> dict:
    """Ask icechunk everything about the repository at ``repo_path``."""
    import icechunk as ic

    major = int(ic.__version__.split(".")[0])
    for prefix, directory in prefixes.items():
        link_virtual_prefix(prefix, directory)
    no_auth = ic.credentials.LocalFileSystemAccess if major >= 2 else None
    repo = ic.Repository.open(
        ic.local_filesystem_storage(str(repo_path)),
        authorize_virtual_chunk_access={p: no_auth for p in prefixes} or None,
    )
    out: dict[str, Any] = {"icechunk_version": ic.__version__}
    branches = ref_names(repo.list_branches(), repo.lookup_branch)
    tags = ref_names(repo.list_tags(), repo.lookup_tag)
    out["branches"], out["tags"] = branches, tags
    out["config"] = config(repo.config)
    out["ancestry"] = {"branch:" + b: [snapshot_info(i) for i in repo.ancestry(branch=b)] for b in branches}
    out["ancestry"].update({"tag:" + t: [snapshot_info(i) for i in repo.ancestry(tag=t)] for t in tags})
    reachable = {i["id"] for chain in out["ancestry"].values() for i in chain}
    out["spec_version"] = int(repo.spec_version) if major >= 2 else 1
    if out["spec_version"] >= 2:  # icechunk 2.x keeps no repo info, ops log or metadata for a V1 repository
        out["repo_info"] = inspected(repo.inspect_repo_info())
        out["ops_log"] = [update(u) for u in repo.ops_log()]
        out["metadata"] = jsonable(repo.get_metadata())
        out["status"] = repo_status(repo.get_status())
        out["feature_flags"] = [
            {
                "id": f.id,
                "name": f.name,
                "default_enabled": f.default_enabled,
                "setting": f.setting,
                "enabled": f.enabled,
            }
            for f in repo.feature_flags()
        ]
        known = {s["id"] for s in out["repo_info"]["snapshots"]}
    else:
        known = set()
    files = {p.name for p in (repo_path / "snapshots").iterdir()} if (repo_path / "snapshots").is_dir() else set()
    snapshot_ids = sorted(reachable | known | files)
    out["snapshots"] = {
        sid: dict(inspected(repo.inspect_snapshot(sid)), reachable=sid in reachable) for sid in snapshot_ids
    }
    if major >= 2:
        manifests = sorted({m["id"] for s in out["snapshots"].values() for m in s.get("manifests", [])})
        out["manifests"] = {}
        for mid in manifests:
            try:
                out["manifests"][mid] = inspected(repo.inspect_manifest(mid))
            except ic.IcechunkError as exc:  # an expired snapshot's manifest that garbage collection removed
                out["manifests"][mid] = {"error": first_line(exc)}
        out["transaction_logs"] = {}
        for sid in snapshot_ids:
            try:
                out["transaction_logs"][sid] = inspected(repo.inspect_transaction_log(sid))
            except ic.IcechunkError as exc:  # the root snapshot has none: record icechunk's words
                out["transaction_logs"][sid] = {"error": first_line(exc)}
    # Parents: V1 snapshots carry them, V2 keeps them in the repo info; ancestry has both.
    parents = {sid: snap.get("parent_id") for sid, snap in out["snapshots"].items()}
    parents.update({s["id"]: s.get("parent_id") for s in out.get("repo_info", {}).get("snapshots", [])})
    parents.update({i["id"]: i["parent_id"] for chain in out["ancestry"].values() for i in chain})
    out["diffs"] = diffs(
        repo,
        parents,
        {**{"branch:" + b: sid for b, sid in branches.items()}, **{"tag:" + t: sid for t, sid in tags.items()}},
    )
    out["refs"] = {f"branch:{b}": sid for b, sid in branches.items()}
    out["refs"].update({f"tag:{t}": sid for t, sid in tags.items()})
    out["trees"] = {}
    for sid in snapshot_ids:
        try:
            session = repo.readonly_session(snapshot_id=sid)
        except ic.IcechunkError as exc:  # a migrated repo's unreachable V1 snapshot: icechunk's words
            out["trees"][sid] = {"error": first_line(exc)}
            continue
        try:
            tree = asyncio.run(read_tree(session))
        except ic.IcechunkError as exc:  # e.g. a stray snapshot whose manifest garbage collection removed
            out["trees"][sid] = {"error": first_line(exc)}
            continue
        # The repository's first snapshot is empty: not even a root group for zarr to open.
        tree["nodes"] = nodes(session) if "zarr.json" in tree["keys"] else []
        out["trees"][sid] = tree
    return out


def ref_names(listed: Any, lookup: Any) -> dict[str, str]:
    """Ref name -> snapshot id, by the names icechunk looks refs up with.

    icechunk 1.1 lists a ref whose name holds characters its storage paths percent-encode (``{``,
    ``~``, non-ASCII ...) by the encoded name, which its own lookup then refuses; the decoded name,
    the one the ref was created with, is the one lookup takes.
    """
    import icechunk as ic
    from urllib.parse import unquote

    out = {}
    for name in sorted(listed):
        try:
            out[name] = lookup(name)
        except ic.IcechunkError:
            out[unquote(name)] = lookup(unquote(name))
    return dict(sorted(out.items()))


def config(cfg: Any) -> dict:
    """The stored repository config, as far as icechunk's Python objects expose it."""

    def store(obj: Any) -> dict:
        # ObjectStoreConfig variants are tuple-like: the variant's class name plus field _0.
        kind = type(obj).__name__.rsplit("_", 1)[-1]
        return {"kind": kind, "options": jsonable(getattr(obj, "_0", None))}

    containers = {
        prefix: {"url_prefix": c.url_prefix, "store": store(c.store)}
        for prefix, c in sorted((cfg.virtual_chunk_containers or {}).items())
    }
    out = {
        "virtual_chunk_containers": containers,
        "inline_chunk_threshold_bytes": cfg.inline_chunk_threshold_bytes,
        "num_updates_per_repo_info_file": getattr(cfg, "num_updates_per_repo_info_file", None),
    }
    # the manifest splitting and preload rules and the compression settings, as icechunk prints them
    out["manifest"] = None if cfg.manifest is None else repr(cfg.manifest)
    out["compression"] = None if cfg.compression is None else repr(cfg.compression)
    compression = getattr(cfg.manifest, "virtual_chunk_location_compression", None) if cfg.manifest else None
    if compression is not None:
        out["virtual_chunk_location_compression"] = {
            name: getattr(compression, name)
            for name in (
                "min_num_chunks",
                "dictionary_max_training_samples",
                "dictionary_max_size_bytes",
                "compression_level",
            )
        }
    return out


def repo_status(status: Any) -> dict:
    """A ``RepoStatus`` as JSON."""
    return {
        "availability": str(status.availability).rsplit(".", 1)[-1],
        "set_at": rfc3339(status.set_at) if status.set_at else None,
        "limited_availability_reason": status.limited_availability_reason,
    }


def diffs(repo: Any, parents: dict[str, str | None], refs: dict) -> list[dict]:
    """``diff`` of every snapshot against its parent, and of every two refs on one line of history.

    icechunk only diffs a snapshot against one of its ancestors, so unrelated refs are skipped.
    """

    def ancestors(sid: str) -> list[str]:
        chain = []
        while sid:
            chain.append(sid)
            sid = parents.get(sid)
        return chain

    pairs = [(parent, sid) for sid, parent in parents.items() if parent]
    names = sorted(refs)
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            old, new = refs[a], refs[b]
            if old == new:
                continue
            if new in ancestors(old):
                old, new = new, old
            if old in ancestors(new):
                pairs.append((old, new))
    out = []
    for old, new in sorted(set(pairs)):
        try:
            out.append({"from": old, "to": new, "diff": diff(repo.diff(from_snapshot_id=old, to_snapshot_id=new))})
        except Exception as exc:  # e.g. a transaction log that garbage collection removed
            out.append({"from": old, "to": new, "error": str(exc).strip().splitlines()[0]})
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("repo", type=Path, help="local icechunk repository directory")
    parser.add_argument(
        "--virtual-prefix",
        action="append",
        default=[],
        metavar="PREFIX=DIR",
        help="authorize a file:// virtual chunk container and map it to DIR",
    )
    args = parser.parse_args()
    prefixes = {}
    for item in args.virtual_prefix:
        prefix, sep, directory = item.partition("=")
        if not sep:
            parser.error(f"--virtual-prefix {item!r}: expected PREFIX=DIR")
        prefixes[prefix] = Path(directory)
    if not args.repo.is_dir():
        parser.error(f"{args.repo}: not a directory")
    warnings.simplefilter("ignore")
    # icechunk 1.x logs to stdout: keep fd 1 for the JSON answer and send everything else to stderr.
    answer = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    import icechunk as ic

    ic.set_logs_filter("error")
    json.dump(oracle(args.repo.resolve(), prefixes), answer, indent=1, sort_keys=True)
    answer.write("\n")
    answer.close()
    # icechunk 2.3 sometimes segfaults in its runtime's teardown (seen in about 1 exit in 30 here),
    # after the answer is complete: skip the teardown so the exit status reports the answer.
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
