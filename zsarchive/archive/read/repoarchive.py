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

from typing import Any, Callable, Iterable, Iterator, Mapping

from zsarchive.archive.read.chunks import ChunkQueries
from zsarchive.archive.read.commits import CommitQueries
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
        ``deleted_tags``, ``arrays`` at each branch tip (shape, dtype, chunk shape), ``virtual_bytes`` (format
        7: virtual refs, those kept, ranges and bytes of the archive keeping them, and per prefix the refs
        that stay references; null before) and ``chunk_bytes`` (embedded or not, records, bytes of the
        archive holding them)."""
        from zsarchive.archive.read.summary import summarize  # here: a lookup does not pay for it

        return summarize(self)

    def sources(self, check: bool = False, progress: Callable[[int, int], None] | None = None) -> dict[str, Any]:
        """``zs sources``: the objects the virtual chunk refs point into (``sources``: location, refs, ranges,
        bytes, the ranges and refs the archive keeps, the snapshots using it with the first and last),
        totals per prefix (``prefixes``) and overall counts. ``check``: ask each object under an authorized
        prefix for its current ETag, modification time and size, once (``progress(done, total)``), and say
        whether it is ``unchanged``, ``changed`` or ``missing`` and what is at risk (``at_risk``: objects
        changed or gone while some ref to them is not kept; ``at_risk_snapshots``: the snapshots using them)."""
        from zsarchive.archive.format.pieces import kept_ranges
        from zsarchive.archive.read import sources as found  # here: a lookup does not pay for it

        kept = kept_ranges(self.zs) if self.keeps_virtual_data else {}
        scanned, flushed = found.scan(self.zs, self.records_format, kept)
        if check:
            found.check(scanned, self._chunks.versions_of, self._chunks.authorized, progress)
        return found.overview(scanned, found.report(scanned, flushed))

    def status(self, repo: Any, storage_options: Mapping[str, str] | None = None, anon: bool = False) -> list[dict]:
        """What the repository at ``repo`` has that the archive lacks (``zs status``), from its refs and ``repo``
        file alone: a row per branch and tag (``state`` up to date, ahead, moved, new or deleted; new
        snapshots since and the newest's time), and one for the ops log (new entries by type, snapshots
        expired since)."""
        from zsarchive.archive.read.status import repository_status  # here: a lookup does not pay for it

        return repository_status(self, repo, storage_options, anon)

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
