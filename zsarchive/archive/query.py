"""``RepoArchive``: answer questions about an exported repository from the archive alone.

Each concept of a query lives in its own module, stacked on the one below it:
:mod:`reading <zsarchive.archive.reading>` (opening, records by family, header, chain),
:mod:`history <zsarchive.archive.history>` (refs, snapshots, REF@TIME, ancestry, log),
:mod:`nodes <zsarchive.archive.nodes>` (a snapshot's tree),
:mod:`chunkqueries <zsarchive.archive.chunkqueries>` (chunk refs and bytes, shards),
:mod:`changes <zsarchive.archive.changes>` (chunk history, diff, ops log) and
:mod:`commits <zsarchive.archive.commits>` (the snapshot tree with ref names, one commit's changes).
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

from zsarchive.archive.chunkqueries import ChunkQueries
from zsarchive.archive.commits import CommitQueries
from zsarchive.archive.reading import guarded


class RepoArchive(ChunkQueries, CommitQueries):
    """Queries over a repo archive (a local path, an ``http(s)://`` or object-store URL, or a ZS).

    ``authorize``: location prefixes (e.g. ``file:///data/``) under which virtual chunk refs may be
    read by :meth:`chunk_data`, or a mapping of such prefixes to the storage options of each;
    nothing outside them is ever opened. Every query fails with a one-line ZSError, whatever the
    archive holds.
    """

    def __init__(self, source: Any, authorize: Iterable[str] | Mapping[str, Mapping[str, Any]] = ()):
        super().__init__(source, authorize)


for _name in ("header", "repo_facts", "refs", "snapshot", "resolve", "ancestry", "log", "ls", "node", "chunk_ref",
              "node_chunk_ref", "chunk_refs", "node_chunk_refs", "node_chunk_coords", "chunk_data", "read_chunk",
              "shard_index", "inner_chunk", "chunk_history", "diff", "ops_log", "ref_names", "graph", "show", "chunk_changes"):
    setattr(RepoArchive, _name, guarded(getattr(RepoArchive, _name)))
