"""Property tests: any sorted multiset of byte strings round-trips through ZSWriter and ZS, and
search / dump / block_map agree with filtering a sorted list."""

from __future__ import annotations

import io
import itertools

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from zsarchive import ZS, ZSWriter
from zsarchive.zs.format import uleb128
from zsarchive.zs.format.block import encode_records
from zsarchive.zs.format.framing import record_heads, terminate

# Small alphabets make prefixes, duplicates and equal keys across block boundaries common.
record = st.one_of(st.binary(max_size=6).map(lambda b: bytes(x % 4 for x in b)), st.binary(max_size=300))
records_st = st.lists(record, min_size=1, max_size=300).map(sorted)
probe = st.one_of(st.none(), st.binary(max_size=3).map(lambda b: bytes(x % 5 for x in b)), st.binary(max_size=4))
layout = st.fixed_dictionaries(
    {
        "codec": st.sampled_from(["none", "deflate", "lzma", "zstd"]),
        "approx_block_size": st.integers(1, 2000),
        "branching_factor": st.integers(2, 6),
    }
)
counter = itertools.count()


def _write(tmp_path_factory, records, layout):
    path = tmp_path_factory.getbasetemp() / f"prop-{next(counter)}.zs"
    with ZSWriter(path, {"n": len(records)}, parallelism=1, **layout) as w:
        w.add_records(records)
        w.finish()
    return path


def _expected(records, start, stop, prefix):
    return [
        r
        for r in records
        if (start is None or r >= start) and (stop is None or r < stop) and (prefix is None or r.startswith(prefix))
    ]


SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@SETTINGS
@given(records=records_st, layout=layout, queries=st.lists(st.tuples(probe, probe, probe), max_size=12))
def test_roundtrip_and_search_equal_filtering(tmp_path_factory, records, layout, queries):
    path = _write(tmp_path_factory, records, layout)
    with ZS(path, parallelism=0) as z:
        assert list(z) == records
        for start, stop, prefix in queries:
            assert list(z.search(start=start, stop=stop, prefix=prefix)) == _expected(records, start, stop, prefix)
    with ZS(path, parallelism=2, data_block_cache=0) as z:  # the threaded scan path, nothing cached
        for start, stop, prefix in queries:
            expected = _expected(records, start, stop, prefix)
            assert list(z.search(start=start, stop=stop, prefix=prefix)) == expected
            assert [r for rs in z.block_map(list, start, stop, prefix) for r in rs] == expected
            out = io.BytesIO()
            z.dump(out, start, stop, prefix, length_prefixed="uleb128")
            assert out.getvalue() == b"".join(uleb128.encode(len(r)) + r for r in expected)
    path.unlink()


@settings(max_examples=200, deadline=None)
@given(records=st.lists(st.binary(max_size=200), min_size=1, max_size=50), terminator=st.binary(min_size=1, max_size=3))
def test_framing_helpers_agree_with_plain_python(records, terminator):
    payload = encode_records(records)
    assert terminate(payload, terminator, "p") == b"".join(r + terminator for r in records)
    heads, simple = record_heads(payload, "p")
    assert len(heads) == len(records) + 1 and heads[-1] == len(payload)
    assert simple == all(len(r) < 128 for r in records)
    for i, r in enumerate(records):
        assert payload[heads[i + 1] - len(r) : heads[i + 1]] == r
