"""The archive's building blocks on their own: record layout, external sort, REF and TIME parsing."""

from __future__ import annotations

import datetime as dt
import random

import pytest

from zsarchive.archive import parse_ref, parse_time
from zsarchive.archive.format import schema as S
from zsarchive.archive.write.sorter import ExternalSorter
from zsarchive.errors import ZSCorrupt, ZSError


def _micros(*args, tz=dt.timezone.utc) -> int:
    moment = dt.datetime(*args, tzinfo=tz)
    return round(moment.timestamp() * 1_000_000)


@pytest.mark.parametrize(
    "text, expected",
    [
        ("2026-11-22T01:19:29.359147+00:00", _micros(2026, 11, 22, 1, 19, 29, 359147)),
        ("2026-11-22T01:19:29.359147Z", _micros(2026, 11, 22, 1, 19, 29, 359147)),
        ("2026-11-22T01:19:29", _micros(2026, 11, 22, 1, 19, 29)),
        ("2026-11-22T03:19:29+02:00", _micros(2026, 11, 22, 1, 19, 29)),
        ("2026-11-22", _micros(2026, 11, 22)),
    ],
)
def test_parse_time(text, expected):
    assert parse_time(text) == expected


def test_a_date_as_upper_bound_covers_the_day():
    assert parse_time("2026-11-22", end_of_day=True) == _micros(2026, 11, 23) - 1


@pytest.mark.parametrize("bad", ["yesterday", "2026-13-01", "", "2026-11-22T25:00"])
def test_bad_time_is_one_clear_error(bad):
    with pytest.raises(ZSError, match="bad time"):
        parse_time(bad)


def test_parse_ref():
    spec = parse_ref("tag:v1.0@2026-11-22T01:00:00Z")
    assert (spec.kind, spec.name, spec.as_of) == ("tag", "v1.0", _micros(2026, 11, 22, 1))
    spec = parse_ref("main")
    assert (spec.kind, spec.name, spec.as_of) == (None, "main", None)
    assert parse_ref("feature:x").name == "feature:x"  # not a known kind: part of the name
    with pytest.raises(ZSError):
        parse_ref("branch:")


def test_record_round_trip_and_version_check():
    rec = S.record(S.CHUNK_REF, ("M" * 20, "N" * 13, (3, 4)), (S.NATIVE, "C" * 20, 0, 10))
    assert S.split(rec) == (S.CHUNK_REF, ("M" * 20, "N" * 13, (3, 4)), (S.NATIVE, "C" * 20, 0, 10))
    assert rec.startswith(S.key_prefix(S.CHUNK_REF, ("M" * 20, "N" * 13, (3, 4))))
    assert not rec.startswith(S.key_prefix(S.CHUNK_REF, ("M" * 20, "N" * 13, (3,))) + b"\x00")
    key_end = len(S.key_prefix(S.CHUNK_REF, ("M" * 20, "N" * 13, (3, 4))))
    newer = rec[: key_end + 1] + bytes((S.RECORD_VERSIONS[S.CHUNK_REF] + 1,)) + rec[key_end + 2 :]
    with pytest.raises(ZSError, match="newer than this zsarchive reads"):
        S.split(newer)
    older = S.record(S.CHUNK_REF, ("M" * 20, "N" * 13, (3, 4)), (S.NATIVE, "C" * 20, 0, 10), version=1)
    assert S.record_version(older) == 1 and S.split(older) == S.split(rec)  # format 1 archives read on
    with pytest.raises(ZSCorrupt, match="invalid record version 0"):
        S.split(rec[: key_end + 1] + b"\x00" + rec[key_end + 2 :])
    with pytest.raises(ZSCorrupt, match="unknown record family"):
        S.split(b"?" + rec[1:])


def test_paths_sort_component_wise():
    paths = ["/a-b", "/a/b", "/a", "/ab", "/b", "/"]
    ordered = sorted(paths, key=lambda p: S.key_prefix(S.NODE, ("X", S.path_components(p))))
    assert ordered == ["/", "/a", "/a/b", "/a-b", "/ab", "/b"]
    assert all(S.path_of(S.path_components(p)) == p for p in paths)


@pytest.mark.parametrize("unique", [True, False])
def test_external_sorter_spills_and_merges(tmp_path, unique):
    rng = random.Random(7)
    items = [rng.randbytes(rng.randrange(0, 12)) for _ in range(5000)]
    sorter = ExternalSorter(max_bytes=4096, tmpdir=str(tmp_path), unique=unique)
    for item in items:
        sorter.add(item)
    assert len(sorter._runs) > 5  # really spilled
    out = list(sorter.sorted())
    assert out == (sorted(set(items)) if unique else sorted(items))
    sorter.close()


def test_external_sorter_memory_does_not_grow_with_input(tmp_path):
    """Peak memory is bounded by max_bytes, not by the data: 24 MB through a 1 MiB buffer."""
    import tracemalloc

    rng = random.Random(3)
    sorter = ExternalSorter(max_bytes=1 << 20, tmpdir=str(tmp_path), unique=False)
    tracemalloc.start()
    try:
        for _ in range(200_000):
            sorter.add(rng.randbytes(120))
        previous, count = b"", 0
        for item in sorter.sorted():
            assert item >= previous
            previous, count = item, count + 1
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
        sorter.close()
    assert count == 200_000
    assert peak < 12 << 20, peak
