"""``zs validate`` holds kept virtual ranges (family ``E``, format 7) to docs/archive-format.rst: each case
takes the committed format 7 vector, breaks one rule of its ``E`` records, writes a ZS file that is itself
valid, and expects one line naming the record and the fault; readers refuse the same damage."""

from __future__ import annotations

from pathlib import Path

import pytest

from toolkit.cli import one_line_error, run_zs
from zsarchive.archive import RepoArchive
from zsarchive.archive.format import schema as S
from zsarchive.errors import ZSCorrupt
from zsarchive.zs.reader import ZS
from zsarchive.zs.writer import ZSWriter

ROOT = Path(__file__).resolve().parents[3]
VECTOR = ROOT / "testdata" / "archive" / "v7" / "archive.zs"
Records = list[tuple[bytes, tuple, tuple, int]]  # (family, key, value, record version)


@pytest.fixture(scope="module")
def vector() -> tuple[Records, dict]:
    with ZS(str(VECTOR)) as z:
        return [(*S.split(rec), S.record_version(rec)) for rec in z], z.metadata


def rewrite(records: Records, metadata: dict, path: Path) -> Path:
    encoded = sorted(S.record(f, k, v, version) for f, k, v, version in records)
    with ZSWriter(str(path), metadata, codec="none") as writer:
        writer.add_records(encoded)
        writer.finish()
    return path


def pieces(records: Records) -> list[int]:
    return [i for i, (f, k, _, _) in enumerate(records) if f == S.VIRTUAL_DATA and len(k) == 6]


def split_a_piece(records: Records) -> None:
    """A range kept as two pieces instead of one (the header counting one record more): still valid."""
    i = pieces(records)[0]
    f, k, (data,), version = records[i]
    records[i] = (f, k, (data[:3],), version)
    records.append((f, (*k[:5], k[5] + 3), (data[3:],), version))
    h = next(i for i, r in enumerate(records) if r[0] == S.HEADER)
    f, k, value, version = records[h]
    counts = tuple((name, n + (name == S.FAMILY_NAMES[S.VIRTUAL_DATA])) for name, n in value[4])
    records[h] = (f, k, (*value[:4], counts), version)


def leave_a_gap(records: Records) -> str:
    i = pieces(records)[0]
    f, k, (data,), version = records[i]
    records[i] = (f, k, (data[:3],), version)
    records.append((f, (*k[:5], k[5] + 4), (data[4:],), version))
    return "piece starts at 4, the range's pieces so far end at 3"


def stop_short(records: Records) -> str:
    i = pieces(records)[0]
    f, k, (data,), version = records[i]
    records[i] = (f, k, (data[:-1],), version)
    return "the pieces of the range before it end at 7, the range at 8"


def run_past_the_range(records: Records) -> str:
    i = pieces(records)[0]
    f, k, (data,), version = records[i]
    records[i] = (f, k, (data + b"!",), version)
    return "past the range's end 8"


def start_elsewhere(records: Records) -> str:
    i = pieces(records)[0]
    f, k, value, version = records[i]
    records[i] = (f, (*k[:5], k[5] + 1), value, version)
    return "piece starts at 1, the range's pieces so far end at 0"


def alias_a_missing_checksum(records: Records) -> str:
    f, k, _, version = records[pieces(records)[0]]
    records.append((f, (*k[:3], "other", None), ("nowhere", None), version))
    return "its alias names checksum ('nowhere', None), under which the range has no pieces"


def alias_itself(records: Records) -> str:
    f, k, _, version = records[pieces(records)[0]]
    records.append((f, (*k[:3], "other", None), ("other", None), version))
    return "its alias names its own checksum"


def alias_and_pieces(records: Records) -> str:
    f, k, _, version = records[pieces(records)[0]]
    records.append((f, (*k[:3], "x", 5), (k[3], k[4]), version))
    records.append((f, (*k[:3], "x", 5, k[1]), (b"12345678",), version))
    return "a range kept both as an alias and as pieces"


def repeat_a_key(records: Records) -> str:
    f, k, (data,), version = records[pieces(records)[0]]
    records.append((f, k, (b"x" + data[1:],), version))
    return "two records of this key"


def misshape_a_checksum(records: Records) -> str:
    i = pieces(records)[0]
    f, k, value, version = records[i]
    records[i] = (f, (*k[:3], 7, k[4], k[5]), value, version)
    return "is not (location, offset, length, etag, last_modified, start)"


def raise_the_record_version(records: Records) -> str:
    i = pieces(records)[0]
    f, k, value, _ = records[i]
    records[i] = (f, k, value, 2)
    return "has record version 2, newer than this zsarchive reads"


@pytest.mark.parametrize(
    "breakage",
    [
        leave_a_gap,
        stop_short,
        run_past_the_range,
        start_elsewhere,
        alias_a_missing_checksum,
        alias_itself,
        alias_and_pieces,
        repeat_a_key,
        misshape_a_checksum,
        raise_the_record_version,
    ],
)
def test_a_broken_virtual_range_is_one_line(vector, tmp_path, breakage):
    records, metadata = vector
    records = list(records)
    needle = breakage(records)
    done = run_zs("validate", str(rewrite(records, metadata, tmp_path / "broken.zs")), timeout=120)
    one_line_error(done, "virtual chunk data record ", needle)


def test_pieces_cut_otherwise_validate_and_read_alike(vector, tmp_path):
    records, metadata = vector
    records = list(records)
    split_a_piece(records)
    path = rewrite(records, metadata, tmp_path / "split.zs")
    done = run_zs("validate", str(path), timeout=120)
    assert (done.returncode, done.stdout) == (0, "looks good!\n"), done.stderr
    with RepoArchive(VECTOR) as whole, RepoArchive(path) as split:
        for archive in (whole, split):
            node = next(n for n in archive.node_infos("main") if n.path == "/data/sub/many_virt")
            assert archive.embeds(next(archive.array_chunks(node)))
        assert [bytes(whole.read_chunk(c, "main")) for c in whole.array_chunks(node)] == [
            bytes(split.read_chunk(c, "main")) for c in split.array_chunks(node)
        ]


def test_virtual_ranges_in_a_format_6_archive_are_refused(vector, tmp_path):
    records, metadata = vector
    records = [(f, k, (6, *v[1:]) if f == S.HEADER else v, version) for f, k, v, version in records]
    metadata = {S.METADATA_KEY: dict(metadata[S.METADATA_KEY], format_version=6)}
    done = run_zs("validate", str(rewrite(records, metadata, tmp_path / "six.zs")), timeout=120)
    one_line_error(done, "six.zs", "format 7 on")


def test_a_reader_refuses_a_gap_rather_than_read_past_it(vector, tmp_path):
    records, metadata = vector
    records = list(records)
    leave_a_gap(records)
    f, k, _, _ = records[pieces(records)[0]]
    with RepoArchive(rewrite(records, metadata, tmp_path / "gap.zs")) as archive:
        chunk = next(
            c
            for n in archive.node_infos("main")
            if n.is_array
            for c in archive.array_chunks(n)
            if c.kind == "virtual" and (c.location, c.offset, c.length) == k[:3]
        )
        with pytest.raises(ZSCorrupt, match="pieces leave a gap: bytes from 3 to 4 are missing"):
            archive.read_chunk(chunk, "main")
