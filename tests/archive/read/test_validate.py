"""``zs validate`` on an archive checks what its records mean: each case takes a real export, breaks one
rule in its records, writes a ZS file that is itself perfectly valid, and expects one line naming the
record and the fault."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Callable

import pytest

from toolkit.cli import one_line_error, run_zs
from zsarchive.archive import export
from zsarchive.archive.format import schema as S
from zsarchive.zs.reader import ZS
from zsarchive.zs.writer import ZSWriter
from toolkit.places import ROOT

Records = list[tuple[bytes, tuple, tuple, int]]  # (family, key, value, record version)


@pytest.fixture(scope="module")
def exported(tmp_path_factory) -> tuple[Records, dict]:
    path = tmp_path_factory.mktemp("v") / "v2.zs"
    export(ROOT / "testdata" / "icechunk" / "v2", path, export_time=1)
    with ZS(str(path)) as z:
        metadata = z.metadata
        records = [(*S.split(rec), S.record_version(rec)) for rec in z]
    return records, metadata


def rewrite(records: Records, metadata: dict, path: Path) -> Path:
    encoded = sorted({S.record(f, k, v, version) for f, k, v, version in records})
    with ZSWriter(str(path), metadata, codec="none") as writer:
        writer.add_records(encoded)
        writer.finish()
    return path


def validate(path: Path) -> subprocess.CompletedProcess:
    return run_zs("validate", str(path), timeout=120)


def first(records: Records, family: bytes, where: Callable = lambda k, v: True) -> int:
    return next(i for i, (f, k, v, _) in enumerate(records) if f == family and where(k, v))


def snapshot_ids(records: Records) -> dict[str, str | None]:
    return {k[0]: v[0] for f, k, v, _ in records if f == S.SNAPSHOT}


def drop_a_referenced_snapshot(records: Records) -> str:
    sid = records[first(records, S.REFS, lambda k, v: k[0] == "branch")][2][0]
    records[:] = [r for r in records if not (r[0] == S.SNAPSHOT and r[1] == (sid,))]
    return "which has no snapshot record"


def loop_the_history(records: Records) -> str:
    parents = snapshot_ids(records)
    root = next(s for s, p in parents.items() if p is None)
    child = next(s for s, p in parents.items() if p == root)
    i = first(records, S.SNAPSHOT, lambda k, v: k == (root,))
    f, k, v, version = records[i]
    records[i] = (f, k, (child, *v[1:]), version)
    return "loop"


def drop_every_chunk_ref(records: Records) -> str:
    records[:] = [r for r in records if r[0] != S.CHUNK_REF]
    return "chunk refs records, the archive holds 0"


def miscount_in_the_header(records: Records) -> str:
    i = first(records, S.HEADER)
    f, k, v, version = records[i]
    counts = tuple((name, n + 1 if name == "snapshots" else n) for name, n in v[4])
    records[i] = (f, k, (*v[:4], counts), version)
    return "snapshots records, the archive holds"


def move_a_chunk_ref_to_a_snapshot_without_its_array(records: Records) -> str:
    root = next(s for s, p in snapshot_ids(records).items() if p is None)
    i = first(records, S.CHUNK_REF)
    f, k, v, version = records[i]
    records[i] = (f, (k[0], k[1], root), v, version)
    return f"snapshot {root} has no array"


def start_an_array_outside_its_history(records: Records) -> str:
    parents = snapshot_ids(records)
    i = first(records, S.NODE, lambda k, v: v[1] == S.ARRAY and parents[k[0]] is not None)
    f, k, v, version = records[i]
    history, current = set(), k[0]
    while current is not None:
        history.add(current)
        current = parents.get(current)
    stranger = next(s for s in parents if s not in history)
    records[i] = (f, k, (*v[:6], stranger, *v[7:]), version)
    return "is not in the history of snapshot"


def shift_a_time_record(records: Records) -> str:
    i = first(records, S.SNAPSHOT_TIME)
    f, k, v, version = records[i]
    records[i] = (f, (k[0] + 1, k[1]), v, version)
    return "the snapshot record"


def misshape_a_snapshot(records: Records) -> str:
    i = first(records, S.SNAPSHOT)
    f, k, v, version = records[i]
    records[i] = (f, k, ("not an id", *v[1:]), version)
    return "is not (snapshot_id) -> (parent_id"


def misshape_a_transaction_log(records: Records) -> str:
    i = first(records, S.TXLOG)
    f, k, v, version = records[i]
    records[i] = (f, k, (*v, ("not an id",), (), ()), 2)
    return "is not (snapshot_id) -> (six node id sets"


@pytest.mark.parametrize(
    "breakage",
    [
        drop_a_referenced_snapshot,
        loop_the_history,
        drop_every_chunk_ref,
        miscount_in_the_header,
        move_a_chunk_ref_to_a_snapshot_without_its_array,
        start_an_array_outside_its_history,
        shift_a_time_record,
        misshape_a_snapshot,
        misshape_a_transaction_log,
    ],
)
def test_a_broken_meaning_is_one_line(exported, tmp_path, breakage):
    records, metadata = exported
    records = list(records)
    needle = breakage(records)
    done = validate(rewrite(records, metadata, tmp_path / "broken.zs"))
    one_line_error(done, "broken.zs", needle)


def test_the_untouched_records_validate(exported, tmp_path):
    records, metadata = exported
    done = validate(rewrite(list(records), metadata, tmp_path / "same.zs"))
    assert done.returncode == 0 and done.stdout.strip() == "looks good!", done.stderr


@pytest.mark.parametrize("version", ["v1", "v2"])
def test_the_committed_archive_vectors_validate(version):
    done = validate(ROOT / "testdata" / "archive" / version / "archive.zs")
    assert done.returncode == 0 and done.stdout.strip() == "looks good!", done.stderr
