"""``RepoArchive``: answer questions about an exported repository from the archive alone.

Each concept of a query lives in its own module, stacked on the one below it:
:mod:`reader <zsarchive.archive.read.reader>` (opening, records by family, header, chain),
:mod:`history <zsarchive.archive.read.history>` (refs, snapshots, REF@TIME, ancestry, log),
:mod:`nodes <zsarchive.archive.read.nodes>` (a snapshot's tree),
:mod:`chunks <zsarchive.archive.read.chunks>` (chunk refs and bytes, shards) and
:mod:`changes <zsarchive.archive.read.changes>` (chunk history, diff, ops log).
"""

from __future__ import annotations

from zsarchive.archive.read.changes import ChangeQueries
from zsarchive.archive.read.chunks import ChunkQueries
from zsarchive.archive.read.reader import guarded


class RepoArchive(ChunkQueries, ChangeQueries):
    """Queries over a repo archive (a local path, an ``http(s)://`` or object-store URL, or a ZS).

    ``authorize``: location prefixes (e.g. ``file:///data/``) under which virtual chunk refs may be
    read by :meth:`chunk_data`, or a mapping of such prefixes to the storage options of each;
    nothing outside them is ever opened. Every query fails with a one-line ZSError, whatever the
    archive holds.
    """


for _name in ("header", "repo_facts", "refs", "snapshot", "resolve", "ancestry", "log", "ls", "node", "chunk_ref",
              "node_chunk_ref", "chunk_refs", "node_chunk_refs", "node_chunk_coords", "chunk_data", "read_chunk",
              "shard_index", "inner_chunk", "chunk_history", "diff", "ops_log"):
    setattr(RepoArchive, _name, guarded(getattr(RepoArchive, _name)))
