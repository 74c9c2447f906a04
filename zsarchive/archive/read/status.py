"""What a repository has that an archive of it lacks (``zs status``), read from the repository's refs and
``repo`` file only: its branches, tags, snapshot list with parents and times, and ops log are all there
(spec V2), so no snapshot, manifest, transaction log or chunk is read. A spec V1 repository has no
``repo`` file: its refs and snapshot files are read.

One row per branch and tag of either side, and one for the ops log:

* a ref is ``up to date`` (same snapshot), ``ahead`` (the archived snapshot is in the repository's
  history of it: ``new_snapshots`` commits since), ``moved`` (it is not: the branch was reset, or the
  snapshot expired), ``new`` (only the repository has it) or ``deleted`` (only the archive has it);
  ``new_snapshots`` counts the commits of its history down to the first one the archive holds;
* the ops log is ``ahead`` by the entries the archive does not hold (compared by time and type, never by
  comparing clocks), counted by type, and then says how many archived snapshots the repository no
  longer has (``expired_snapshots``: expiration and garbage collection are the only ways it loses one).
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Mapping

from zsarchive.archive.format import schema
from zsarchive.archive.format.views import OpsValue, SnapshotKey
from zsarchive.archive.read.history import HistoryQueries
from zsarchive.icechunk import Repository
from zsarchive.times import format_time
from zsarchive.walk import parent_chain

UP_TO_DATE, AHEAD, MOVED, NEW, DELETED = "up to date", "ahead", "moved", "new", "deleted"
_REWRITES = ("ExpirationRanUpdate", "GCRanUpdate")
"""Ops-log entries after which a repository may lack snapshots an archive of it holds."""


def repository_status(
    archive: HistoryQueries, repo: Any, storage_options: Mapping[str, str] | None = None, anon: bool = False
) -> list[dict]:
    """The rows of ``zs status`` (see the module's docstring), refs sorted by type and name, the ops log last."""
    repository = Repository.open(repo, storage_options, anon)
    try:
        infos = {info.id: info for info in repository.snapshots()}
        archived = {(r["type"], r["name"]): r.get("snapshot_id") for r in archive.refs() if r["type"] != "deleted_tag"}
        current = {("branch", name): sid for name, sid in repository.branches().items()}
        current.update({("tag", name): sid for name, sid in repository.tags().items()})
        held: dict[str, bool] = {}

        def holds(sid: str) -> bool:
            if sid not in held:
                held[sid] = archive._snapshot_value(sid) is not None
            return held[sid]

        rows = [
            _ref_row(kind, name, archived.get((kind, name)), current.get((kind, name)), infos, holds)
            for kind, name in sorted(archived.keys() | current.keys())
        ]
        rows.append(_ops_row(archive, repository, infos))
    finally:
        repository.storage.close()
    return rows


def _ref_row(kind: str, name: str, before: str | None, now: str | None, infos: dict, holds) -> dict:
    new, state = 0, DELETED if now is None else UP_TO_DATE if now == before else None
    if state is None:
        reached = False
        for sid in parent_chain(now, lambda s: infos[s].parent_id if s in infos else None):
            if sid == before:
                reached = True
                break
            if holds(sid):  # the rest of this history is archived already
                break
            new += 1
        state = NEW if before is None else AHEAD if reached else MOVED
    newest = format_time(infos[now].flushed_at) if new and now in infos else None
    return {
        "type": kind,
        "name": name,
        "state": state,
        "archived": before,
        "current": now,
        "new_snapshots": new,
        "newest": newest,
    }


def _ops_row(archive: HistoryQueries, repository: Repository, infos: dict) -> dict:
    kinds: Counter = Counter()
    newest = None
    for update in repository.ops_log():  # newest first: the first entry the archive holds ends the news
        if any(OpsValue.decode(v).type == update.type for _, v in archive._records(schema.OPS, (update.updated_at,))):
            break
        kinds[update.type] += 1
        newest = newest or update.updated_at
    rewritten = repository.spec_version == 1 or any(kinds[k] for k in _REWRITES)
    expired = 0
    if rewritten:  # only then may the repository lack a snapshot the archive holds
        expired = sum(1 for k, _ in archive._records(schema.SNAPSHOT) if SnapshotKey.decode(k).snapshot_id not in infos)
    new = sum(kinds.values())
    return {
        "type": "ops_log",
        "state": AHEAD if new or expired else UP_TO_DATE,
        "new_entries": new,
        "newest": None if newest is None else format_time(newest),
        "entries": dict(sorted(kinds.items())),
        "expired_snapshots": expired,
    }


def behind(rows: list[dict]) -> bool:
    """Whether the status rows say the archive lacks anything."""
    return any(row["state"] != UP_TO_DATE for row in rows)
