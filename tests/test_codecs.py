"""Codec settings: lzma's extreme levels stay within 2 % of the reference's liblzma preset on any kind of data.

The reference ``zs`` compresses with liblzma's ``preset 0 | PRESET_EXTREME`` (``1e``: preset 1);
ours caps the match search to save time. The cap must not be tuned to one benchmark: each data
kind below is a ~384 KiB block (the writer's default block size), and the files may grow at most
2 % against the preset on every one of them.
"""

from __future__ import annotations

import json
import lzma
import random
from pathlib import Path

import pytest

from zsarchive import keys
from zsarchive.archive import schema
from zsarchive.format import uleb128
from zsarchive.format.codecs import get_codec

SAMPLE = Path(__file__).resolve().parent.parent / "testdata" / "sample" / "ngrams.txt"
BLOCK = 393216
CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


def payload(records: list[bytes]) -> bytes:
    """A data block payload as the writer frames it, cut at about the default block size."""
    out = bytearray()
    for r in sorted(records):
        out += uleb128.encode(len(r)) + r
        if len(out) >= BLOCK:
            break
    return bytes(out)


def ngram_text() -> bytes:
    return payload(SAMPLE.read_bytes().splitlines())


def json_lines() -> bytes:
    rng = random.Random(7)
    flags = ["qc", "est", "raw", "adj", "miss"]
    return payload([json.dumps({
        "station": f"ST{rng.randint(0, 500):04d}",
        "time": f"2024-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}T{rng.randint(0, 23):02d}:00:00Z",
        "temp": round(rng.gauss(12, 8), 2), "flags": rng.sample(flags, k=rng.randint(0, 3)),
        "id": rng.getrandbits(64)}, sort_keys=True).encode() for _ in range(5000)])


def archive_records() -> bytes:
    """Native chunk refs and chunk history as zsarchive export writes them: ids repeat, coordinates count up."""
    rng = random.Random(11)

    def ident(n: int) -> str:
        return "".join(rng.choices(CROCKFORD, k=n))

    manifest, node, snapshot = ident(20), ident(13), ident(20)
    records = []
    for i in range(6000):
        coords = (i // 100, i % 100)
        records.append(schema.record(schema.CHUNK_REF, (manifest, node, coords),
                                     (schema.NATIVE, ident(20), 0, rng.randint(5000, 9000))))
        records.append(schema.record(schema.CHUNK_HISTORY, (node, coords, 1_700_000_000_000_000 + i, snapshot)))
    return payload(records)


def binary_records() -> bytes:
    """Fixed-width little-endian rows (time, station, three floats): the byte-aligned case."""
    rng = random.Random(3)
    return payload([keys.encode((rng.randint(0, 50), i)) + bytes(rng.choices(range(4), k=24))
                    for i in range(16000)])


KINDS = {"n-gram text": ngram_text, "JSON lines": json_lines, "archive records": archive_records,
         "binary rows": binary_records}


@pytest.mark.parametrize("level,preset", [("0e", 0), ("1e", 1)])
@pytest.mark.parametrize("kind", list(KINDS))
def test_lzma_extreme_levels_stay_within_2_percent_of_the_preset(kind: str, level: str, preset: int) -> None:
    data = KINDS[kind]()
    assert len(data) >= BLOCK
    codec = get_codec("lzma", level)
    ours = codec.compress(data)
    reference = lzma.compress(data, format=lzma.FORMAT_RAW, filters=[
        {"id": lzma.FILTER_LZMA2, "preset": preset | lzma.PRESET_EXTREME}])
    assert codec.decompress(ours) == data
    assert len(ours) <= 1.02 * len(reference), (kind, len(ours), len(reference))
