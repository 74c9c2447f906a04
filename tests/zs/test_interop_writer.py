"""Files our writer makes, judged by the reference ``zs`` 0.10.0: validate, dump, info and search."""

from __future__ import annotations

import io
import json
import random
import struct
import subprocess

import pytest

from zsarchive import ZSWriter
from zsarchive.zs.format import uleb128


def ngram_lines(n: int, seed: int = 7) -> list[bytes]:
    """Sorted text records with long shared prefixes and some duplicates."""
    rng = random.Random(seed)
    words = [f"{a}{b}".encode() for a in ("ka", "to", "ri", "an", "mo") for b in ("", "s", "ven", "ric")]
    lines = [b" ".join(rng.choice(words) for _ in range(3)) + b"\t%d" % rng.randint(1900, 1910) for _ in range(n)]
    return sorted(lines)


def ref(reference_zs, *args, input: bytes | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([str(reference_zs), *map(str, args)], input=input, capture_output=True, timeout=300)


def make(path, records, **kw) -> None:
    kw.setdefault("include_default_metadata", False)
    with ZSWriter(path, kw.pop("metadata", {}), **kw) as w:
        w.add_records(records)
        w.finish()


def assert_reference_accepts(reference_zs, path, records) -> None:
    res = ref(reference_zs, "validate", path)
    assert res.returncode == 0, res.stderr.decode()[-2000:]
    res = ref(reference_zs, "dump", "--length-prefixed=uleb128", path)
    assert res.returncode == 0, res.stderr.decode()[-2000:]
    assert res.stdout == b"".join(uleb128.encode(len(r)) + r for r in records)


@pytest.mark.parametrize("codec", ["none", "deflate", "lzma"])
@pytest.mark.parametrize("block_size,branching", [(100, 2), (400, 3), (393216, 1024)])
def test_reference_validates_and_dumps_our_files(tmp_path, reference_zs, codec, block_size, branching):
    records = ngram_lines(1000)
    path = tmp_path / "ours.zs"
    make(path, records, codec=codec, approx_block_size=block_size, branching_factor=branching)
    assert_reference_accepts(reference_zs, path, records)


def test_reference_dumps_binary_records_exactly(tmp_path, reference_zs):
    rng = random.Random(3)
    records = sorted(bytes(rng.choice(b"\x00\n\r\xff ab") for _ in range(rng.randint(0, 30))) for _ in range(600))
    records += [records[-1]] * 5 + [b"\xff" * 70000, b"\xff" * 70001]  # duplicates, huge records
    for kind in ("uleb128", "u64le"):
        if kind == "uleb128":
            data = b"".join(uleb128.encode(len(r)) + r for r in records)
        else:
            data = b"".join(struct.pack("<Q", len(r)) + r for r in records)
        path = tmp_path / f"{kind}.zs"
        with ZSWriter(path, {}, approx_block_size=1000, branching_factor=3, codec="deflate") as w:
            w.add_file_contents(io.BytesIO(data), length_prefixed=kind)
            w.finish()
        assert ref(reference_zs, "validate", path).returncode == 0
        res = ref(reference_zs, "dump", f"--length-prefixed={kind}", path)
        assert res.returncode == 0 and res.stdout == data


def test_reference_reads_our_metadata(tmp_path, reference_zs):
    path = tmp_path / "meta.zs"
    with ZSWriter(path, {"title": "n-grams ✓", "rows": [1, 2.5, None, True]}, codec="none") as w:
        w.add_records(ngram_lines(10))
        w.finish()
    res = ref(reference_zs, "info", path)
    assert res.returncode == 0, res.stderr.decode()
    info = json.loads(res.stdout)
    assert info["metadata"]["title"] == "n-grams ✓"
    assert info["metadata"]["rows"] == [1, 2.5, None, True]
    assert set(info["metadata"]["build-info"]) == {"user", "host", "time", "version"}
    assert info["codec"] == "none"
    assert info["total_file_length"] == path.stat().st_size


_SEARCH_SCRIPT = r"""
import json, sys, zs
queries = json.load(sys.stdin)
z = zs.ZS(sys.argv[1], parallelism=1)
out = []
for q in queries:
    args = {k: (v.encode("latin-1") if v is not None else None) for k, v in q.items()}
    out.append([r.decode("latin-1") for r in z.search(**args)])
json.dump(out, sys.stdout)
"""


def test_reference_search_agrees_on_our_short_index_keys(tmp_path, reference_python):
    records = ngram_lines(1000)
    path = tmp_path / "keys.zs"
    make(path, records, codec="deflate", approx_block_size=300, branching_factor=2)
    rng = random.Random(11)
    queries = []
    for _ in range(60):
        a, b = sorted(rng.sample(records, 2))
        cut = rng.randint(0, len(a))
        queries.append(
            rng.choice(
                [{"prefix": a[:cut]}, {"start": a[:cut], "stop": b}, {"start": a}, {"stop": b[:cut]}, {"prefix": a}]
            )
        )
    queries.append({"start": records[-1] + b"\x00"})
    queries.append({"start": b"", "stop": records[0]})
    payload = [{k: v.decode("latin-1") for k, v in q.items()} for q in queries]
    res = subprocess.run(
        [str(reference_python), "-c", _SEARCH_SCRIPT, str(path)],
        input=json.dumps(payload).encode(),
        capture_output=True,
        timeout=300,
    )
    assert res.returncode == 0, res.stderr.decode()[-2000:]
    got = json.loads(res.stdout)

    def expected(q):
        start, stop, prefix = q.get("start", b""), q.get("stop"), q.get("prefix", b"")
        return [r for r in records if r >= start and (stop is None or r < stop) and r.startswith(prefix)]

    for q, answer in zip(queries, got):
        assert [r.encode("latin-1") for r in answer] == expected(q), q


def test_reference_rejects_an_interrupted_file(tmp_path, reference_zs):
    path = tmp_path / "cut.zs"
    with pytest.raises(KeyboardInterrupt):
        with ZSWriter(path, {}, approx_block_size=100, codec="deflate") as w:
            w.add_records(ngram_lines(1000))
            raise KeyboardInterrupt
    res = ref(reference_zs, "validate", path)
    assert res.returncode != 0
    assert b"partially written" in res.stderr


@pytest.mark.parametrize("codec", ["deflate", "lzma"])
def test_file_size_matches_the_reference(tmp_path, reference_zs, codec):
    text = b"\n".join(ngram_lines(30000, seed=5)) + b"\n"
    src = tmp_path / "in.txt"
    src.write_bytes(text)
    theirs = tmp_path / "theirs.zs"
    res = ref(
        reference_zs,
        "make",
        "--no-spinner",
        "--no-default-metadata",
        f"--codec={codec}",
        "--approx-block-size=65536",
        "{}",
        src,
        theirs,
    )
    assert res.returncode == 0, res.stderr.decode()[-2000:]
    ours = tmp_path / "ours.zs"
    with ZSWriter(ours, {}, codec=codec, approx_block_size=65536, include_default_metadata=False) as w:
        w.add_file_contents(open(src, "rb"))
        w.finish()
    ratio = ours.stat().st_size / theirs.stat().st_size
    assert 0.9 < ratio <= 1.02, ratio


@pytest.mark.parametrize("codec", ["none", "deflate", "lzma"])
def test_reference_reads_stored_blocks_with_exact_index_keys(tmp_path, reference_zs, codec):
    """Blocks written uncompressed in the codec's own framing (stored deflate blocks, LZMA2
    uncompressed chunks), indexed by their first record's prefix, are plain ZS to the reference."""
    rng = random.Random(5)
    head = [b"a " + r for r in ngram_lines(300)]
    pieces = sorted(b"piece %04d " % i + rng.randbytes(rng.choice((10, 70000, 140000))) for i in range(12))
    path = tmp_path / "stored.zs"
    with ZSWriter(
        path, {}, codec=codec, approx_block_size=2000, branching_factor=3, include_default_metadata=False
    ) as w:
        w.add_records(head)
        for i in range(0, len(pieces), 3):
            w.add_data_block(pieces[i : i + 3], stored=True, key_length=len(b"piece 0000 "))
        w.add_records([b"~" + r for r in head[:50]])
        w.finish()
    assert_reference_accepts(reference_zs, path, head + pieces + [b"~" + r for r in head[:50]])
    from zsarchive import ZS

    with ZS(str(path)) as z:
        # each stored block's index key is its first record's first 11 bytes: a lookup of any of its
        # records reads that block alone
        for piece in pieces:
            z.floor_span(piece + b"\x00", piece + b"\x01")  # the index blocks on the way are cached after
            before = z.stats.snapshot()["block_reads"]
            assert z.floor_span(piece + b"\x00", piece + b"\x01") == [piece]
            assert z.stats.snapshot()["block_reads"] - before == 1
            # as views: into the map, or into the block's bytes where the codec frames it in several pieces
            assert [bytes(r) for r in z.floor_span(piece + b"\x00", piece + b"\x01", zero_copy=True)] == [piece]
        assert z.floor_span(pieces[0][:11], pieces[2] + b"\x00") == [head[-1], *pieces[:3]]
