"""``RepoArchive``: answer questions about an exported repository from the archive alone.

Each concept of a query lives in its own module, stacked on the one below it:
:mod:`reader <zsarchive.archive.read.reader>` (opening, records by family, header, chain),
:mod:`history <zsarchive.archive.read.history>` (refs, snapshots, REF~N and REF@TIME, ancestry, log),
:mod:`nodes <zsarchive.archive.read.nodes>` (a snapshot's tree),
:mod:`chunks <zsarchive.archive.read.chunks>` (chunk refs and bytes, shards),
:mod:`changes <zsarchive.archive.read.changes>` (chunk history, diff, ops log) and
:mod:`commits <zsarchive.archive.read.commits>` (the snapshot tree with ref names, one commit's changes).
"""

from __future__ import annotations

from typing import Any, Iterable, Iterator

from zsarchive.archive.read.chunks import ChunkQueries
from zsarchive.archive.read.commits import CommitQueries
from zsarchive.archive.read.reader import guarded
from zsarchive.archive.read.refspec import TimeBound


class RepoArchive(ChunkQueries, CommitQueries):
    """Queries over a repo archive (a local path, an ``http(s)://`` or object-store URL, or a ZS).

    ``authorize``: location prefixes (e.g. ``file:///data/``) under which virtual chunk refs may be
    read by :meth:`chunk_data`, or a mapping of such prefixes to the storage options of each;
    nothing outside them is ever opened. Every query fails with a one-line ZSError, whatever the
    archive holds.
    """

    def summary(self) -> dict[str, Any]:
        """What the archive holds, at a glance (``zs summary``): ``archive`` (location, size in bytes, format
        version, export time, chain), ``source`` (spec version, metadata, virtual chunk containers),
        ``snapshots`` (total, unreachable), ``branches`` (commits, first and last flush), ``tags``,
        ``deleted_tags``, ``arrays`` at each branch tip (shape, dtype, chunk shape) and ``chunk_bytes``
        (embedded or not, records, bytes of the archive holding them)."""
        from zsarchive.archive.read.summary import summarize  # here: a lookup does not pay for it

        return summarize(self)

    # The names of the ``zs`` commands, for who reads the command line's help first.
    def chunk(self, ref: str, path: str, coords: Iterable[int]) -> dict:
        """``zs chunk``: the same as :meth:`chunk_ref`."""
        return self.chunk_ref(ref, path, coords)

    def chunks(self, ref: str, path: str) -> Iterator[dict]:
        """``zs chunks``: the same as :meth:`chunk_refs`."""
        return self.chunk_refs(ref, path)

    def chunk_log(self, ref: str, path: str, coords: Iterable[int]) -> list[dict]:
        """``zs chunk-log``: :meth:`chunk_history`, its arguments in the command's order."""
        return self.chunk_history(path, coords, ref=ref)

    def ops(self, since: TimeBound = None, until: TimeBound = None) -> list[dict]:
        """``zs ops``: the same as :meth:`ops_log`."""
        return self.ops_log(since=since, until=until)


for _name in ("header", "repo_facts", "refs", "snapshot", "resolve", "ancestry", "log", "ls", "node_infos", "node",
              "node_info", "chunk_ref", "chunk_info", "node_chunk_ref", "array_chunk", "chunk_refs", "node_chunk_refs",
              "array_chunks", "node_chunk_coords", "chunk_data", "read_chunk",
              "shard_index", "inner_chunk", "chunk_history", "diff", "ops_log", "reached_by", "summary", "ref_names",
              "graph", "show", "chunk_changes"):
    setattr(RepoArchive, _name, guarded(getattr(RepoArchive, _name)))
