"""The per-chunk change history of an archive, whichever way its format keeps it (docs/archive-format.rst,
family ``H``): one ``H`` record per change up to format 3, the ``C`` timeline corrected by ``H``
exceptions from format 5. Nothing else reads ``H`` records."""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING, Any, Callable, Iterator

from zsarchive.archive.format import schema, tuples
from zsarchive.archive.format.refrecords import key_layout
from zsarchive.archive.format.tuplecolumns import decode_columns
from zsarchive.archive.format.header import history_from_timeline
from zsarchive.archive.format.views import ChunkRefKey, HistoryKey, HistoryValue, starts_with
from zsarchive.errors import ZSCorrupt

if TYPE_CHECKING:
    import numpy as np

_BATCH = 1 << 16  # records decoded together


def chunk_changes(
    zs: Any, records_format: int, flushed_at: Callable[[str], int], key: tuple = ()
) -> Iterator[HistoryKey]:
    """``(node_id, coords, flushed_at, snapshot_id)`` of every change a transaction log names, of the
    chunks whose ``(node_id[, coords])`` start with ``key`` (``()``: every chunk), in no particular order.
    ``zs``: the archive (a ZS or a chain); ``records_format``: the format its records follow;
    ``flushed_at``: a snapshot id's time (format 5 keeps it in the ``S`` record only)."""
    if not history_from_timeline(records_format):
        yield from (change for change, _ in _history_records(zs, key, timeline=False))
        return
    exceptions = {
        (change.node_id, change.coords, change.snapshot_id): (change, in_log)
        for change, in_log in _history_records(zs, key, timeline=True)
    }
    for rec in zs.search(prefix=schema.key_prefix(schema.CHUNK_REF, key)):
        k, _ = tuples.decode(rec, 1, what="chunk ref record key")
        if not starts_with(k, key) or k in exceptions:
            continue
        yield HistoryKey.of_chunk_ref(k, flushed_at)
    yield from (change for change, in_log in exceptions.values() if in_log)


def _history_records(zs: Any, key: tuple[Any, ...], timeline: bool) -> Iterator[tuple[HistoryKey, bool]]:
    """Each ``H`` record of the chunks whose ``(node_id[, coords])`` start with ``key``: the change its key
    names, and whether the commit's log names the chunk: always up to format 3 (``timeline`` false, one
    record per logged change); from format 5 (an exception to the ``C`` timeline) as its value says."""
    for rec in zs.search(prefix=schema.key_prefix(schema.CHUNK_HISTORY, key)):
        _, k, v = schema.split(rec)
        if starts_with(k, key):
            yield (
                HistoryKey.decode(k),
                (HistoryValue.decode(v, schema.record_version(rec)).in_log if timeline else True),
            )


def timeline_rows(zs: Any, node_id: str, ndim: int, name: str) -> tuple[np.ndarray, list[str]]:
    """The changes of every chunk of the array ``node_id`` in an archive whose history is its ``C``
    timeline (format 5), decoded in bulk: ``(rows, snapshot_ids)``, rows an (n, ndim + 1) int64 array
    of the coordinates and an index into ``snapshot_ids``; the same changes :func:`chunk_changes` yields."""
    import numpy as np

    prefix = schema.key_prefix(schema.CHUNK_REF, (node_id,))
    ids: dict[bytes, int] = {}
    parts = []
    records = zs.search(prefix=prefix)
    while batch := list(itertools.islice(records, _BATCH)):
        coords, raw_ids = _decode_batch(batch, len(prefix), ndim, name)
        distinct, index = np.unique(raw_ids, return_inverse=True)
        column = np.array([ids.setdefault(bytes(sid), len(ids)) for sid in distinct], np.int64)
        parts.append(np.column_stack([coords, column[index.reshape(-1)]]))
    rows = np.concatenate(parts) if parts else np.zeros((0, ndim + 1), np.int64)
    return corrected(zs, node_id, ndim, rows, [sid.decode("ascii") for sid in ids])


def corrected(
    zs: Any,
    node_id: str,
    ndim: int,
    rows: np.ndarray,
    snapshot_ids: list[str],
    first: int | None = None,
    stop: int | None = None,
) -> tuple[np.ndarray, list[str]]:
    """The changes of the array's ``C`` timeline (rows of coordinates and an index into ``snapshot_ids``,
    as :func:`timeline_rows` gives them) corrected by its ``H`` exceptions (format 5); ``first``, ``stop``:
    the rows are those of chunks whose first coordinate is in that range, and so are the exceptions used."""
    import numpy as np

    def within(coords: tuple) -> bool:
        return not coords or ((first is None or coords[0] >= first) and (stop is None or coords[0] < stop))

    exceptions = {
        (change.coords, change.snapshot_id): in_log
        for change, in_log in _history_records(zs, (node_id,), timeline=True)
        if within(change.coords)
    }
    if exceptions:  # few: where the transaction log and the timeline disagree
        column = {sid: i for i, sid in enumerate(snapshot_ids)}
        dropped = {
            (coords, column[sid]) for (coords, sid), in_log in exceptions.items() if not in_log and sid in column
        }
        if dropped:
            keep = [(tuple(row[:-1]), row[-1]) not in dropped for row in rows.tolist()]
            rows = rows[np.array(keep, bool)]
        added = [
            (*coords, column.setdefault(sid, len(column)))
            for (coords, sid), in_log in exceptions.items()
            if in_log and len(coords) == ndim
        ]
        snapshot_ids = list(column)
        if added:
            rows = np.concatenate([rows, np.array(added, np.int64).reshape(len(added), ndim + 1)])
    return rows, snapshot_ids


def _decode_batch(batch: list[bytes], at: int, ndim: int, name: str) -> tuple[np.ndarray, np.ndarray]:
    """Coordinates and snapshot ids (``S20`` values) of a batch of ``C`` records of one array, whose
    keys start ``at`` bytes in with the coordinates' tuple; records of another shape decoded one by one."""
    import numpy as np

    lengths = np.fromiter(map(len, batch), np.int64, len(batch))
    ends = np.cumsum(lengths)
    joined = b"".join(batch)
    decoded = decode_columns(joined, ends - lengths + at, ends, key_layout(ndim))
    if decoded is not None:
        *columns, (begin, stop) = decoded[0]
        if (stop - begin == schema.SNAPSHOT_ID_LENGTH).all() and all(
            (column < np.uint64(1 << 63)).all() for column in columns
        ):
            coords = np.column_stack(columns).astype(np.int64) if ndim else np.zeros((len(batch), 0), np.int64)
            raw = np.frombuffer(joined, np.uint8)[begin[:, None] + np.arange(schema.SNAPSHOT_ID_LENGTH)]
            return coords, np.ascontiguousarray(raw).view(f"S{schema.SNAPSHOT_ID_LENGTH}").reshape(-1)
    return _decode_one_by_one(batch, ndim, name)


def _decode_one_by_one(batch: list[bytes], ndim: int, name: str) -> tuple[np.ndarray, np.ndarray]:
    """:func:`_decode_batch` a record at a time, naming the first that is not a chunk ref of the array."""
    import numpy as np

    coords, sids = [], []
    for rec in batch:
        key = schema.split(rec)[1]
        if not ChunkRefKey.well_formed_of(key, ndim):
            raise ZSCorrupt(
                f"{name}: chunk ref record {key!r} does not hold {ndim} coordinates of the array and a snapshot id"
            )
        ref = ChunkRefKey.decode(key)
        coords.append(ref.coords)
        sids.append(ref.snapshot_id.encode("ascii"))
    return np.array(coords, np.int64).reshape(len(batch), ndim), np.array(sids, f"S{schema.SNAPSHOT_ID_LENGTH}")
