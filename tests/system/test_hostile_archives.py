"""Archives from strangers: records that disagree with each other. Each case edits a genuine export (the
committed format 6 vector, chunk bytes included) with zsarchive's own writer, so that every rule of the ZS
format and every record's own shape still hold, and expects ``zs validate`` to refuse it naming the records
that disagree, and ``zs restore`` and ``zs checkout`` to refuse it before writing anything, each a fresh
process under the hostile-input memory ceiling and timeout."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Callable

import pytest

from toolkit.cli import one_line_error, run_hostile
from toolkit.crafted import Record, craft, find, read_records, target_is_empty, write_records
from toolkit.places import TESTDATA
from zsarchive.archive import export
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


def a_branch_naming_a_snapshot_the_archive_lacks(records: list[Record]) -> tuple[str, ...]:
    i = find(records, S.REFS, lambda k, v: k == ("branch", "main"))
    f, k, _, version = records[i]
    records[i] = (f, k, ("AAAAAAAAAAAAAAAAAAA0",), version)
    return "refs record", "main", "AAAAAAAAAAAAAAAAAAA0"


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


def a_later_chunk_ref_of_an_array_holding_no_bytes(records: list[Record]) -> tuple[str, ...]:
    """An inline ref whose data is a number, not bytes, behind the array's first ref: the array's refs are
    decoded together when its first one is reached, before this record's own shape is checked."""
    _set_ref(records, (0, 1), (S.INLINE, 5))
    return "chunk refs record", repr((BIG, (0, 1), CREATED)), "malformed value"


def a_later_chunk_ref_of_an_array_at_a_negative_offset(records: list[Record]) -> tuple[str, ...]:
    """An offset no unsigned column holds, behind the array's first ref."""
    _set_ref(records, (0, 1), (S.NATIVE, CHUNK, -5, 8192))
    return "chunk refs records of array", repr(BIG), "out of range"


def a_later_chunk_ref_of_an_array_at_an_offset_past_64_bits(records: list[Record]) -> tuple[str, ...]:
    _set_ref(records, (0, 1), (S.NATIVE, CHUNK, 1 << 70, 8192))
    return "chunk refs records of array", repr(BIG), "out of range"


SILENT_WRONG_DATA = [
    chunk_id_in_two_spellings,
    chunk_id_in_lower_case_only,
    two_records_for_branch_main,
    two_records_for_one_snapshot,
    two_records_for_one_chunk_ref,
    two_records_for_one_node,
    node_shape_disagrees_with_its_zarr_json,
    node_chunk_grid_disagrees_with_its_zarr_json,
    node_dimension_names_disagree_with_its_zarr_json,
]
BROKEN_REPOSITORIES = [
    a_branch_naming_a_snapshot_the_archive_lacks,
    two_node_paths_that_are_one,
    a_ref_longer_than_its_file,
    a_ref_starting_past_its_file,
    a_truncated_chunk_file,
    a_later_chunk_ref_of_an_array_holding_no_bytes,
    a_later_chunk_ref_of_an_array_at_a_negative_offset,
    a_later_chunk_ref_of_an_array_at_an_offset_past_64_bits,
]


@pytest.mark.parametrize("family", sorted(set(S.FAMILY_NAMES) - {S.HEADER}), ids=lambda f: S.FAMILY_NAMES[f])
def test_two_records_of_one_key_are_refused_in_every_family(tmp_path, request, family):
    """A family's first record repeated in a genuine export (the format 6 vector; format 3's for chunk
    history, format 7's for virtual chunk data, the sharded export for shard indexes): ``zs validate``
    names the family and the key, whichever family it is."""
    source = {
        S.CHUNK_HISTORY: TESTDATA / "archive" / "v3" / "archive.zs",
        S.VIRTUAL_DATA: TESTDATA / "archive" / "v7" / "archive.zs",
    }.get(family, VECTOR)
    if family == S.SHARD_INDEX:
        source = request.getfixturevalue("sharded")
    metadata, records = read_records(source)
    archive = write_records(tmp_path / "crafted.zs", metadata, [*records, records[find(records, family)]])
    one_line_error(
        run_hostile("validate", str(archive)),
        str(archive),
        f"{S.FAMILY_NAMES[family]} record",
        "two records of this key",
    )


def refuses(
    tmp_path: Path, archive: Path, needles: tuple[str, ...], checkout: tuple[str, ...] = ("--group", "/data")
) -> None:
    """``zs validate`` names the records, ``zs restore`` and ``zs checkout`` refuse before writing."""
    one_line_error(run_hostile("validate", str(archive)), str(archive), *needles)
    restored = tmp_path / "restored"
    one_line_error(run_hostile("restore", str(archive), str(restored)), str(archive))
    assert target_is_empty(restored)
    for target in (tmp_path / "out", tmp_path / "out.zip"):
        one_line_error(run_hostile("checkout", str(archive), "main", str(target), *checkout), str(archive))
        assert target_is_empty(target)


def crafted(tmp_path: Path, case: Callable[[list[Record]], tuple[str, ...]], **options) -> tuple[Path, tuple]:
    """The vector edited by ``case``, and what ``case`` says the refusal names."""
    needles: tuple = ()

    def edit(records: list[Record]) -> None:
        nonlocal needles
        needles = case(records)

    return craft(VECTOR, tmp_path / "crafted.zs", edit, **options), needles


def parents_that_loop(length: int) -> Callable[[list[Record]], tuple[str, ...]]:
    """Main's snapshot made the parent of its ``length``-th ancestor (1: of itself): a history that never
    ends, which icechunk's ancestry() would follow for ever."""

    def edit(records: list[Record]) -> tuple[str, ...]:
        parents = {k[0]: v[0] for f, k, v, _ in records if f == S.SNAPSHOT}
        at = MAIN
        for _ in range(length - 1):
            at = parents[at]
        i = find(records, S.SNAPSHOT, lambda k, v: k == (at,))
        f, k, v, version = records[i]
        records[i] = (f, k, (MAIN, *v[1:]), version)
        return "parent links of snapshot", "loop"

    edit.__name__ = f"parents_that_loop_in_{length}"
    return edit


@pytest.mark.parametrize(
    "case",
    SILENT_WRONG_DATA + BROKEN_REPOSITORIES + [parents_that_loop(n) for n in (1, 2, 3)],
    ids=lambda case: case.__name__,
)
def test_records_that_disagree_are_refused_before_anything_is_written(tmp_path, case: Callable):
    refuses(tmp_path, *crafted(tmp_path, case))


@pytest.mark.parametrize(
    "case, command",
    [
        (two_records_for_branch_main, "log"),
        (two_records_for_one_snapshot, "log"),
        (node_shape_disagrees_with_its_zarr_json, "ls"),
    ],
    ids=lambda p: getattr(p, "__name__", p),
)
def test_the_archives_readers_refuse_what_they_answered_wrongly(tmp_path, case, command):
    """``zs log`` took the first of two records of main (or of its snapshot), ``zs ls`` showed the node
    record's shape (6400 x 6400 for a 64 x 64 array): each now refuses, naming the records."""
    archive, needles = crafted(tmp_path, case)
    one_line_error(run_hostile(command, str(archive), "main"), str(archive), *needles)


def test_the_zarr_store_refuses_two_records_of_one_chunk(tmp_path):
    """``open_store`` read the second of two records of one chunk ref (zs log and checkout the first)."""
    import zarr

    from zsarchive import open_store
    from zsarchive.errors import ZSCorrupt

    archive, _ = crafted(tmp_path, two_records_for_one_chunk_ref)
    with pytest.raises(ZSCorrupt, match="chunk refs record .* two records of this key"):
        zarr.open_array(open_store(archive, "main"), path="data/big", mode="r")[:]


SHARDED = r'''
import sys, icechunk as ic, numpy as np, zarr
from zarr.codecs import BytesCodec, ShardingCodec
repo = ic.Repository.create(ic.local_filesystem_storage(sys.argv[1]))
s = repo.writable_session("main")
# the shard's index at its start, without a checksum: 16 bytes for each of 8 inner chunks, nothing else;
# shards of 16 KiB, too large to be inlined
a = zarr.group(store=s.store).create_array("s", shape=(4096,), dtype="i8", chunks=(2048,), compressors=None,
    serializer=ShardingCodec(chunk_shape=(256,), codecs=[BytesCodec()], index_codecs=[BytesCodec()],
                             index_location="start"))
a[:] = np.arange(4096)
s.commit("a sharded array")
'''


@pytest.fixture(scope="module")
def sharded(tmp_path_factory, icechunk2_python) -> Path:
    """A format 6 export, chunk bytes included, of a repository icechunk wrote with one sharded array."""
    where = tmp_path_factory.mktemp("sharded")
    subprocess.run([str(icechunk2_python), "-c", SHARDED, str(where / "repo")], check=True, capture_output=True)
    export(where / "repo", where / "a.zs", include_chunks=True, export_time=1)
    return where / "a.zs"


def test_a_shard_index_record_disagreeing_with_its_shard_is_refused(tmp_path, sharded):
    """The archive keeps each shard's index beside the shard's bytes; one that swaps two inner chunks would
    make the zarr store read each from the other's place, while the shard itself (checkout, restore) says
    otherwise. Both shards' records are swapped (which comes first in key order follows the random chunk
    ids): a read of part of a shard is refused naming the record, a whole shard is read from its bytes."""

    def swap(records: list[Record]) -> None:
        for i, (f, k, v, version) in enumerate(records):
            if f == S.SHARD_INDEX:
                at_end, raw = v
                records[i] = (f, k, (at_end, raw[16:32] + raw[:16] + raw[32:]), version)

    archive = craft(sharded, tmp_path / "crafted.zs", swap)
    refuses(tmp_path, archive, ("shard indexes record", "holds another index than bytes [0, 128)"), checkout=())
    import numpy as np
    import zarr

    from zsarchive import open_store
    from zsarchive.errors import ZSCorrupt

    store = zarr.open_array(open_store(archive, "main"), path="s", mode="r")
    assert (store[:] == np.arange(4096)).all()  # whole shards: the index their own bytes hold
    for part in (slice(250, 260), slice(2048 + 250, 2048 + 260)):
        with pytest.raises(ZSCorrupt, match=r"shard indexes record .* holds another index than bytes \[0, 128\)"):
            store[part]


@pytest.mark.parametrize("name", ["..\\..\\x", "C:", "c:x", "a\x01b", "zarr.json"])
def test_a_checkout_writes_only_portable_names(tmp_path, name):
    """A node name icechunk holds but other systems read as a path (a backslash, a drive letter), or that a
    zip reader or terminal mangles (a control character), or that is the metadata document's own name:
    ``zs validate`` accepts it (the archive means it), a checkout to a directory or a zip refuses it before
    writing anything."""

    def rename(records: list[Record]) -> None:
        i = find(records, S.NODE, lambda k, v: k == (MAIN, ("data", "big")))
        f, (sid, _), v, version = records[i]
        records[i] = (f, (sid, ("data", name)), v, version)

    archive = craft(VECTOR, tmp_path / "crafted.zs", rename)
    assert run_hostile("validate", str(archive)).returncode == 0
    for target in (tmp_path / "out", tmp_path / "out.zip"):
        one_line_error(
            run_hostile("checkout", str(archive), "main", str(target), "--group", "/data"),
            str(archive),
            repr(name),
            "not a portable name",
            "nothing written",
        )
        assert target_is_empty(target)


@pytest.fixture(scope="module")
def fragment(tmp_path_factory) -> Path:
    """A fragment (``fragment.zs``) over a full export (``base.zs``) of the committed V2 fixture."""
    where = tmp_path_factory.mktemp("fragment")
    export(TESTDATA / "icechunk" / "v2", where / "base.zs", export_time=1)
    export(TESTDATA / "icechunk" / "v2", where / "fragment.zs", export_time=2, base=where / "base.zs")
    return where / "fragment.zs"


def _commands(archive: Path, tmp_path: Path) -> list[list[str]]:
    return [
        ["validate", str(archive)],
        ["log", str(archive), "main"],
        ["serve", str(archive), "--port", "0"],
        ["restore", str(archive), str(tmp_path / "restored")],
        ["checkout", str(archive), "main", str(tmp_path / "out"), "--group", "/data/big"],
    ]


def test_a_base_that_is_a_fifo_is_refused_at_once(tmp_path, fragment):
    """A fragment's base is opened as a repository's files are: without blocking, and only if it is a
    regular file (a FIFO used to hang every command that opened the fragment)."""
    import os
    import shutil

    shutil.copy(fragment, tmp_path / "fragment.zs")
    os.mkfifo(tmp_path / "base.zs")
    for command in _commands(tmp_path / "fragment.zs", tmp_path):
        one_line_error(run_hostile(*command, timeout=30), str(tmp_path / "base.zs"), "not a regular file")
    assert target_is_empty(tmp_path / "restored") and target_is_empty(tmp_path / "out")


def test_a_base_naming_another_file_never_prints_its_bytes(tmp_path, fragment):
    """A fragment whose base link leads to a file that is not an archive (here /etc/passwd) is refused
    naming the file, and no byte of it reaches the message."""
    import os

    metadata, records = read_records(fragment)
    link = os.path.relpath("/etc/passwd", tmp_path)
    metadata[S.METADATA_KEY]["fragment"]["base"] = link
    archive = write_records(tmp_path / "fragment.zs", metadata, records, recount=False)
    secret = open("/etc/passwd", "rb").read(8)
    for command in _commands(archive, tmp_path):
        message = one_line_error(run_hostile(*command, timeout=30), "/etc/passwd", "not a ZS file")
        assert secret.decode("latin-1") not in message and secret.hex() not in message, message


LIST_TAGS = "import sys, icechunk as ic; print(sorted(ic.Repository.open(ic.local_filesystem_storage(sys.argv[1])).list_tags()))"


def test_a_tag_both_live_and_deleted_is_deleted_as_icechunk_lists_it(tmp_path, icechunk1_python):
    """icechunk 1.1 lists a tag whose directory holds both ref.json and ref.json.deleted as deleted: an
    archive holding both records of one name reads so, and restores to a repository icechunk lists alike."""
    import json

    exported = tmp_path / "v1.zs"
    export(TESTDATA / "icechunk" / "v1", exported, export_time=1, include_chunks=True)
    metadata, records = read_records(exported)
    gone = next(k[1] for f, k, v, _ in records if f == S.REFS and k[0] == "deleted_tag")
    main = next(v[0] for f, k, v, _ in records if f == S.REFS and k == ("branch", "main"))
    archive = write_records(tmp_path / "crafted.zs", metadata, [*records, (S.REFS, ("tag", gone), (main,), 1)])
    assert run_hostile("validate", str(archive)).returncode == 0
    refs = [json.loads(line) for line in run_hostile("refs", str(archive), "--json").stdout.splitlines()]
    tags = sorted(r["name"] for r in refs if r["type"] == "tag")
    assert gone not in tags and {"type": "deleted_tag", "name": gone} in refs
    one_line_error(run_hostile("log", str(archive), f"tag:{gone}"), "was deleted")
    done = run_hostile("restore", str(archive), str(tmp_path / "restored"))
    assert done.returncode == 0 and f"{len(tags)} tags" in done.stderr, done.stderr
    listed = subprocess.run(
        [str(icechunk1_python), "-c", LIST_TAGS, str(tmp_path / "restored")], capture_output=True, text=True, check=True
    ).stdout
    assert listed.strip().splitlines()[-1] == str(tags)  # after the warnings icechunk may print


def _ops_backup_path(path: str) -> Callable[[list[Record]], tuple[str, ...]]:
    def edit(records: list[Record]) -> tuple[str, ...]:
        # entry 31 is the newest of the ops log's third file (G repo_file: 8 entries a file): its name
        i = find(records, S.OPS, lambda k, v: k[1] == 31)
        f, k, v, version = records[i]
        records[i] = (f, k, (v[0], path, *v[2:]), version)
        return "ops log record", "its backup path"

    return edit


def a_backup_path_holding_nul(records: list[Record]) -> tuple[str, ...]:
    return (*_ops_backup_path("a\0b")(records), "NUL")


def a_backup_path_of_5000_characters(records: list[Record]) -> tuple[str, ...]:
    return (*_ops_backup_path("x" * 5000)(records), "longer than the 255 bytes")


@pytest.mark.parametrize(
    "case", [a_backup_path_holding_nul, a_backup_path_of_5000_characters], ids=lambda case: case.__name__
)
def test_ops_log_file_names_no_file_can_have_are_refused(tmp_path, case):
    """The ops log's older repo info files are named after backup paths: one that no file can be named was
    an internal error of the restore."""
    archive, needles = crafted(tmp_path, case)
    one_line_error(run_hostile("validate", str(archive)), str(archive), *needles)
    one_line_error(run_hostile("restore", str(archive), str(tmp_path / "restored")), str(archive), *needles)
    assert target_is_empty(tmp_path / "restored")


@pytest.mark.parametrize(
    "dictionary",
    [b"\x37\xa4\x30\xec" + bytes(range(256)) * 4, b"\x37\xa4\x30\xec" + bytes(60 << 20)],
    ids=["made-up", "60MiB"],
)
def test_a_location_dictionary_zstd_cannot_use_is_refused_before_writing(tmp_path, dictionary):
    """A manifest's location dictionary (format 6, ``Y``) that zstd refuses (made up, or tens of MiB) was an
    internal error of the restore: validate and restore name the record."""

    def edit(records: list[Record]) -> None:
        i = find(records, S.FILES, lambda k, v: v[2] is not None)
        f, k, v, version = records[i]
        records[i] = (f, k, (v[0], v[1], dictionary), version)

    archive = craft(VECTOR, tmp_path / "crafted.zs", edit, codec="zstd")
    needles = ("file headers record ('manifests/", f"location dictionary ({len(dictionary):,} bytes)")
    one_line_error(run_hostile("validate", str(archive)), str(archive), *needles)
    one_line_error(run_hostile("restore", str(archive), str(tmp_path / "restored")), str(archive), *needles)
    assert target_is_empty(tmp_path / "restored")


def test_record_values_nested_100000_deep_are_one_line(tmp_path):
    """main's snapshot record with a value of tuples nested 100,000 deep (a few hundred KB): validate,
    restore and checkout say so in one line (it was an internal error)."""
    nested = S.key_prefix(S.SNAPSHOT, (MAIN,)) + b"\x00\x01" + b"\x05" * 100_000 + b"\x00" * 100_000

    def edit(records: list[Record]) -> None:
        records.pop(find(records, S.SNAPSHOT, lambda k, v: k == (MAIN,)))

    archive = craft(VECTOR, tmp_path / "crafted.zs", edit, streamed=[nested], more={S.SNAPSHOT: 1})
    for command in (
        ["validate", str(archive)],
        ["restore", str(archive), str(tmp_path / "restored")],
        ["checkout", str(archive), "main", str(tmp_path / "out"), "--group", "/data/big"],
    ):
        one_line_error(run_hostile(*command), str(archive), "nested more than 64 deep")
    assert target_is_empty(tmp_path / "restored") and target_is_empty(tmp_path / "out")
