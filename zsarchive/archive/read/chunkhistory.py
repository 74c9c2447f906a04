"""The per-chunk change history of an archive, whichever way its format keeps it (docs/archive-format.rst,
family ``H``): one ``H`` record per change up to format 3, the ``C`` timeline corrected by ``H``
exceptions from format 5. Nothing else reads ``H`` records."""

from __future__ import annotations

from typing import Any, Callable, Iterator

from zsarchive.archive.format import keys, schema
from zsarchive.archive.format.header import history_from_timeline
from zsarchive.archive.format.views import HistoryValue


def chunk_changes(zs: Any, view_format: int, flushed_at: Callable[[str], int],
                  key: tuple = ()) -> Iterator[tuple[str, tuple, int, str]]:
    """``(node_id, coords, flushed_at, snapshot_id)`` of every change a transaction log names, of the
    chunks whose ``(node_id[, coords])`` start with ``key`` (``()``: every chunk), in no particular order.
    ``zs``: the archive (a ZS or a chain); ``view_format``: the format its records follow;
    ``flushed_at``: a snapshot id's time (format 5 keeps it in the ``S`` record only)."""
    timeline = history_from_timeline(view_format)
    exceptions: dict[tuple, tuple[int, bool]] = {}
    for rec in zs.search(prefix=schema.key_prefix(schema.CHUNK_HISTORY, key)):
        _, k, v = schema.split(rec)
        if k[:len(key)] != key:
            continue  # the bytes of text "a" start those of "a\0b"
        if not timeline:
            yield k[0], k[1], k[2], k[3]
        else:
            exceptions[k[0], k[1], k[3]] = (k[2], HistoryValue.decode(v, schema.record_version(rec)).in_log)
    if not timeline:
        return
    for rec in zs.search(prefix=schema.key_prefix(schema.CHUNK_REF, key)):
        k, _ = keys.decode(rec, 1, what="chunk ref record key")
        if k[:len(key)] != key or (k[0], k[1], k[2]) in exceptions:
            continue
        yield k[0], k[1], flushed_at(k[2]), k[2]
    for (node_id, coords, sid), (time, in_log) in exceptions.items():
        if in_log:
            yield node_id, coords, time, sid
