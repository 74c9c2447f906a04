"""What an archive holds, at a glance: the source repository, branches and tags with their history,
the arrays at each branch tip, the chunk bytes embedded, and the archive itself (size, format, chain)."""

from __future__ import annotations

from typing import Any

from zsarchive.archive.format import schema
from zsarchive.archive.read.chain import Chain


def summarize(archive: Any) -> dict[str, Any]:
    """The summary of a :class:`RepoArchive <zsarchive.archive.read.repoarchive.RepoArchive>` as a JSON-ready dict."""
    header = archive.header()
    facts = archive.repo_facts()
    config = facts.get("config") if isinstance(facts.get("config"), dict) else {}
    containers = config.get("virtual_chunk_containers") if isinstance(config, dict) else None
    refs = archive.refs()
    reached = archive.reached_by()
    branches = []
    arrays: dict[str, list[dict]] = {}
    for ref in refs:
        if ref["type"] != "branch":
            continue
        history = archive.ancestry(f"branch:{ref['name']}")
        branches.append(
            {
                "name": ref["name"],
                "snapshot_id": ref["snapshot_id"],
                "commits": len(history),
                "first": history[-1]["flushed_at"],
                "last": history[0]["flushed_at"],
            }
        )
        arrays[ref["name"]] = [
            {"path": n.path, "shape": n.shape, "dtype": n.dtype, "chunk_shape": n.chunk_shape}
            for n in archive.node_infos(f"branch:{ref['name']}")
            if n.is_array
        ]
    tags = [
        {
            "name": r["name"],
            "snapshot_id": r["snapshot_id"],
            "flushed_at": archive.snapshot(r["snapshot_id"])["flushed_at"],
        }
        for r in refs
        if r["type"] == "tag"
    ]
    snapshots = header["counts"].get(schema.FAMILY_NAMES[schema.SNAPSHOT], 0)
    members = archive.zs.members if isinstance(archive.zs, Chain) else None
    readers = [m.zs for m in members] if members else [archive.zs]
    chain = archive.chain()
    for entry, zs in zip(chain, readers):
        entry["size"] = zs.total_file_length
    chunk_records = header["counts"].get(schema.FAMILY_NAMES[schema.CHUNK_DATA], 0)
    data_start = schema.key_prefix(schema.CHUNK_DATA)
    data_stop = bytes((schema.CHUNK_DATA[0] + 1,))
    return {
        "archive": {
            "location": archive.name,
            "size": sum(zs.total_file_length for zs in readers),
            "format_version": header["format_version"],
            "export_time": header["export_time"],
            "exporter": header["exporter"],
            "chain": chain,
        },
        "source": {
            "spec_version": header["source_spec_version"],
            "metadata": facts.get("metadata"),
            "virtual_chunk_containers": sorted(containers) if isinstance(containers, dict) else [],
        },
        "snapshots": {"total": snapshots, "unreachable": snapshots - len(reached)},
        "branches": branches,
        "tags": tags,
        "deleted_tags": [r["name"] for r in refs if r["type"] == "deleted_tag"],
        "arrays": arrays,
        "virtual_bytes": _virtual(archive, readers) if archive.keeps_virtual_data else None,
        "chunk_bytes": {
            "embedded": bool(chunk_records),
            "records": chunk_records,
            "bytes": sum(zs.block_bytes(data_start, data_stop) for zs in readers) if chunk_records else 0,
        },
    }


def _virtual(archive: Any, readers: list) -> dict[str, Any]:
    """Of an archive that may keep virtual chunk bytes (format 7): how many virtual refs it holds, how many
    of them it keeps the bytes of (in how many ranges and bytes of the archive), and per prefix the refs
    that stay references (outside the authorized prefixes at export, or not read then)."""
    from zsarchive.archive.format.pieces import kept_ranges
    from zsarchive.archive.read.sources import scan

    kept = kept_ranges(archive.zs)
    found, _ = scan(archive.zs, archive.records_format, kept, uses=False)
    not_kept: dict[str, int] = {}
    for source in found:
        if source.refs > source.kept_refs:
            prefix = source.location.rsplit("/", 1)[0] + "/"
            not_kept[prefix] = not_kept.get(prefix, 0) + source.refs - source.kept_refs
    start, stop = schema.key_prefix(schema.VIRTUAL_DATA), bytes((schema.VIRTUAL_DATA[0] + 1,))
    return {
        "refs": sum(s.refs for s in found),
        "kept_refs": sum(s.kept_refs for s in found),
        "kept_ranges": sum(target == key for key, target in kept.items()),
        "bytes": sum(zs.block_bytes(start, stop) for zs in readers),
        "not_kept": [{"prefix": prefix, "refs": n} for prefix, n in sorted(not_kept.items())],
    }
