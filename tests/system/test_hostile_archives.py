"""Archives from strangers: records that disagree with each other. Each case edits a genuine export (the
committed format 6 vector, chunk bytes included) with zsarchive's own writer, so that every rule of the ZS
format and every record's own shape still hold, and expects ``zs validate`` to refuse it naming the records
that disagree, and ``zs restore`` and ``zs checkout`` to refuse it before writing anything, each a fresh
process under the hostile-input memory ceiling and timeout."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import pytest

from toolkit.cli import one_line_error, run_hostile
from toolkit.crafted import Record, craft, find, target_is_empty
from toolkit.places import TESTDATA
from zsarchive.archive.format import schema as S

VECTOR = TESTDATA / "archive" / "v6" / "archive.zs"
MAIN = "FMYJC6EXHFEJEZFQ9JA0"
BIG = "ZK276DWXJJFYC"  # /data/big: four native chunks, its refs made at CREATED
CREATED = "1Z67CH011QJY4APYHNB0"
CHUNK = "B279VN9PA3DQ16R6847G"  # chunk (0, 1) of /data/big at main
OTHER = "HBNEMRRQH0E2XGQDCTJG"  # chunk (1, 0) of /data/big at main


def _piece(records: list[Record], chunk_id: str) -> Record:
    return records[find(records, S.CHUNK_DATA, lambda k, v: k[0] == chunk_id)]


def _set_ref(records: list[Record], coords: tuple, value: tuple) -> None:
    i = find(records, S.CHUNK_REF, lambda k, v: k == (BIG, coords, CREATED))
    f, k, _, version = records[i]
    records[i] = (f, k, value, version)


def chunk_id_in_two_spellings(records: list[Record]) -> tuple[str, ...]:
    """A ref names chunk (0, 1)'s file in lower case, and the archive embeds other bytes under that
    spelling: both files would be written, and the ref bound to the upper-case one's bytes."""
    _set_ref(records, (0, 1), (S.NATIVE, CHUNK.lower(), 0, 8192))
    f, _, value, version = _piece(records, OTHER)
    records.append((f, (CHUNK.lower(), 0), value, version))
    return "chunk refs record", CHUNK.lower()


def chunk_id_in_lower_case_only(records: list[Record]) -> tuple[str, ...]:
    i = records.index(_piece(records, CHUNK))
    f, (_, start), value, version = records[i]
    records[i] = (f, (CHUNK.lower(), start), value, version)
    _set_ref(records, (0, 1), (S.NATIVE, CHUNK.lower(), 0, 8192))
    return "chunk refs record", CHUNK.lower()


def two_records_for_branch_main(records: list[Record]) -> tuple[str, ...]:
    records.append((S.REFS, ("branch", "main"), (CREATED,), 1))
    return "refs record", "main", "two records"


def two_records_for_one_snapshot(records: list[Record]) -> tuple[str, ...]:
    f, k, v, version = records[find(records, S.SNAPSHOT, lambda k, v: k == (MAIN,))]
    records.append((f, k, (v[0], v[1], "another message", *v[3:]), version))
    return "snapshots record", MAIN, "two records"


def two_records_for_one_chunk_ref(records: list[Record]) -> tuple[str, ...]:
    f, k, _, version = records[find(records, S.CHUNK_REF, lambda k, v: k == (BIG, (0, 1), CREATED))]
    records.append((f, k, (S.NATIVE, OTHER, 0, 8192), version))
    return "chunk refs record", BIG, "two records"


def two_records_for_one_node(records: list[Record]) -> tuple[str, ...]:
    f, k, v, version = records[find(records, S.NODE, lambda k, v: k == (MAIN, ("data", "big")))]
    records.append((f, k, (v[0], v[1], v[2].replace(b'"fill_value":0.0', b'"fill_value":1.0'), *v[3:]), version))
    return "nodes record", MAIN, "two records"


def node_shape_disagrees_with_its_zarr_json(records: list[Record]) -> tuple[str, ...]:
    i = find(records, S.NODE, lambda k, v: k == (MAIN, ("data", "big")))
    f, k, v, version = records[i]
    records[i] = (f, k, (*v[:3], ((6400, None, 200), (6400, None, 200)), *v[4:]), version)
    return "nodes record", "/data/big", "shape"


def node_chunk_grid_disagrees_with_its_zarr_json(records: list[Record]) -> tuple[str, ...]:
    i = find(records, S.NODE, lambda k, v: k == (MAIN, ("data", "big")))
    f, k, v, version = records[i]
    records[i] = (f, k, (*v[:3], ((64, None, 4), (64, None, 4)), *v[4:]), version)
    return "nodes record", "/data/big", "chunks"


def node_dimension_names_disagree_with_its_zarr_json(records: list[Record]) -> tuple[str, ...]:
    i = find(records, S.NODE, lambda k, v: k == (MAIN, ("data", "big")))
    f, k, v, version = records[i]
    records[i] = (f, k, (*v[:4], ("col", "row"), *v[5:]), version)
    return "nodes record", "/data/big", "dimension names"


def two_node_paths_that_are_one(records: list[Record]) -> tuple[str, ...]:
    """``data/big`` as one name beside ``data`` -> ``big``: two arrays would be written at one place."""
    f, k, v, version = records[find(records, S.NODE, lambda k, v: k == (MAIN, ("data", "big")))]
    records.append((f, (MAIN, ("data/big",)), ("AAAAAAAAAAAA0", *v[1:]), version))
    return "nodes record", "data/big"


def a_ref_longer_than_its_file(records: list[Record]) -> tuple[str, ...]:
    _set_ref(records, (0, 1), (S.NATIVE, CHUNK, 0, 8193))
    return "chunk refs record", CHUNK, "8193"


def a_ref_starting_past_its_file(records: list[Record]) -> tuple[str, ...]:
    _set_ref(records, (0, 1), (S.NATIVE, CHUNK, 9000, 10))
    return "chunk refs record", CHUNK, "reaches byte 9010"


def a_truncated_chunk_file(records: list[Record]) -> tuple[str, ...]:
    i = records.index(_piece(records, CHUNK))
    f, k, (data,), version = records[i]
    records[i] = (f, k, (data[:4096],), version)
    return "chunk refs record", CHUNK, "4096"


SILENT_WRONG_DATA = [chunk_id_in_two_spellings, chunk_id_in_lower_case_only, two_records_for_branch_main,
                     two_records_for_one_snapshot, two_records_for_one_chunk_ref, two_records_for_one_node,
                     node_shape_disagrees_with_its_zarr_json, node_chunk_grid_disagrees_with_its_zarr_json,
                     node_dimension_names_disagree_with_its_zarr_json]
BROKEN_REPOSITORIES = [two_node_paths_that_are_one, a_ref_longer_than_its_file, a_ref_starting_past_its_file,
                       a_truncated_chunk_file]


def refuses(tmp_path: Path, archive: Path, needles: tuple[str, ...], checkout: tuple[str, ...] = ("--group", "/data")
            ) -> None:
    """``zs validate`` names the records, ``zs restore`` and ``zs checkout`` refuse before writing."""
    one_line_error(run_hostile("validate", str(archive)), str(archive), *needles)
    restored = tmp_path / "restored"
    one_line_error(run_hostile("restore", str(archive), str(restored)), str(archive))
    assert target_is_empty(restored)
    for target in (tmp_path / "out", tmp_path / "out.zip"):
        one_line_error(run_hostile("checkout", str(archive), "main", str(target), *checkout), str(archive))
        assert target_is_empty(target)


@pytest.mark.parametrize("case", SILENT_WRONG_DATA + BROKEN_REPOSITORIES, ids=lambda case: case.__name__)
def test_records_that_disagree_are_refused_before_anything_is_written(tmp_path, case: Callable):
    needles: tuple = ()

    def edit(records: list[Record]) -> None:
        nonlocal needles
        needles = case(records)

    archive = craft(VECTOR, tmp_path / "crafted.zs", edit)
    refuses(tmp_path, archive, needles)
