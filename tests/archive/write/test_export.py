"""`zs export`: deterministic output, atomic writes, archives any ZS reader accepts, clear errors."""

from __future__ import annotations

import json
import re
import shutil
import subprocess

import pytest

from toolkit.oracle import oracle, repo_path
from toolkit.archives import MANIFEST, NODE, SNAPSHOT
from toolkit.cli import one_line_error, run_zs
from zsarchive.archive import RepoArchive, export
from zsarchive.archive.write import exporter as exporter_module
from zsarchive.archive.write import records as records_module
from zsarchive.archive.format import schema as S
from zsarchive.errors import ZSCorrupt, ZSError
from zsarchive.zs.reader import ZS
from zsarchive.zs.writer import ZSWriter


@pytest.mark.parametrize("version", [1, 2])
def test_two_exports_differ_only_in_export_time(tmp_path, version):
    a, b, c = tmp_path / "a.zs", tmp_path / "b.zs", tmp_path / "c.zs"
    export(repo_path(version), a, export_time=1_000_000)
    export(repo_path(version), b, export_time=1_000_000, parallelism=3)  # worker processes: same bytes
    export(repo_path(version), guessed := tmp_path / "guessed.zs", export_time=1_000_000, parallelism="guess")
    assert guessed.read_bytes() == a.read_bytes()
    export(repo_path(version), c, export_time=2_000_000, include_chunks=False)
    assert a.read_bytes() == b.read_bytes()
    with ZS(str(a)) as za, ZS(str(c)) as zc:
        ra, rc = list(za), list(zc)
    assert len(ra) == len(rc)
    differing = [(x, y) for x, y in zip(ra, rc) if x != y]
    assert len(differing) == 1
    assert S.split(differing[0][0])[0] == S.HEADER


@pytest.mark.parametrize("task_refs", [1, 3, 7])
def test_manifests_split_across_worker_tasks_give_the_same_bytes(tmp_path, monkeypatch, task_refs):
    """-j N splits large manifests into ranges of refs (every range boundary here falls inside arrays,
    between arrays, or at a manifest's end), and worker processes compress the blocks of arrays in
    large manifests themselves: the archive is the one a single process writes."""
    single, split = tmp_path / "single.zs", tmp_path / "split.zs"
    monkeypatch.setattr(exporter_module, "_TASK_REFS", task_refs)
    export(repo_path(2), single, export_time=1, include_chunks=True)
    export(repo_path(2), split, export_time=1, include_chunks=True, parallelism=2)
    assert single.read_bytes() == split.read_bytes()
    with ZS(str(single)) as z:
        blocks = sum(1 for _ in z.block_map(lambda _: None))
    monkeypatch.setattr(exporter_module, "_TASK_REFS", 10**9)  # no array's manifest counts as large
    export(repo_path(2), plain := tmp_path / "plain.zs", export_time=1, include_chunks=True)
    with ZS(str(plain)) as z, ZS(str(single)) as y:
        assert list(z) == list(y)  # the same records, cut into more blocks by the tasks
        assert sum(1 for _ in z.block_map(lambda _: None)) < blocks


def test_fast_record_encoders_agree_with_the_schema(v2_archive):
    """The exporter's hot loops build records by hand; each must be what schema.record builds."""
    with ZS(str(v2_archive)) as z:
        records = list(z)
    assert S.CHUNK_REF in {S.split(r)[0] for r in records}
    for rec in records:
        assert S.record(*S.split(rec), version=S.record_version(rec)) == rec


@pytest.mark.parametrize("parallelism", [1, 2])
def test_interrupted_export_leaves_nothing(tmp_path, monkeypatch, parallelism):
    target = tmp_path / "out.zs"
    real = records_module.chunk_file_blocks

    def explode(*args, **kwargs):
        yield from real(*args, **kwargs)
        raise KeyboardInterrupt  # after every chunk ref went to the writer

    monkeypatch.setattr(records_module, "chunk_file_blocks", explode)
    with pytest.raises(KeyboardInterrupt):
        export(repo_path(2), target, include_chunks=True, parallelism=parallelism)
    assert list(tmp_path.iterdir()) == []


def test_include_chunks_makes_the_archive_self_contained(tmp_path):
    target, copy = tmp_path / "full.zs", tmp_path / "repo"
    shutil.copytree(repo_path(2), copy)
    summary = export(copy, target, include_chunks=True, codec="lzma", parallelism=2)
    assert summary.counts["chunk data"] > 0
    shutil.rmtree(copy)  # the repository is gone: every native chunk's bytes come from the archive
    files = repo_path(2) / "chunks"
    with RepoArchive(target) as arc:
        found = 0
        for ref in ("main", "dev"):
            for node in arc.ls(ref):
                if node["node_type"] != "array":
                    continue
                for chunk in arc.chunk_refs(ref, node["path"]):
                    if chunk["kind"] == "native":
                        data = arc.chunk_data(ref, node["path"], chunk["coords"])  # no repo given
                        start, stop = chunk["offset"], chunk["offset"] + chunk["length"]
                        assert data == (files / chunk["chunk_id"]).read_bytes()[start:stop], chunk
                        found += 1
        assert found


def test_reference_zs_validates_an_archive(tmp_path, reference_zs):
    target = tmp_path / "ref.zs"
    export(repo_path(2), target, codec="deflate")
    proc = subprocess.run([str(reference_zs), "validate", str(target)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


def test_default_export_is_standard_zs(tmp_path, reference_zs):
    """Without --codec the archive uses deflate, which the reference zs (no zstd) reads and validates."""
    target = tmp_path / "default.zs"
    proc = run_zs("export", str(repo_path(2)), str(target))
    assert proc.returncode == 0, proc.stderr
    checked = subprocess.run([str(reference_zs), "validate", str(target)], capture_output=True, text=True)
    assert checked.returncode == 0, checked.stderr
    info = subprocess.run([str(reference_zs), "info", str(target)], capture_output=True, text=True)
    assert info.returncode == 0 and '"codec": "deflate"' in info.stdout, info.stdout


def test_zs_info_shows_the_archive_header(tmp_path):
    target = tmp_path / "info.zs"
    export(repo_path(2), target)
    proc = run_zs("info", str(target))
    assert proc.returncode == 0, proc.stderr
    info = json.loads(proc.stdout)
    assert info["archive"]["export_time"].endswith("Z")
    assert info["archive"]["counts"]["snapshots"] == len(list((repo_path(2) / "snapshots").iterdir()))


def test_cli_export_then_queries(tmp_path, icechunk2_python):
    target = tmp_path / "cli.zs"
    proc = run_zs("export", str(repo_path(2)), str(target), "--codec", "zstd", "-j", "2")
    assert proc.returncode == 0, proc.stderr
    with ZS(str(target)) as z:
        records = sum(1 for r in z if r[:1] != S.HEADER)  # the header record describes the others
    assert re.fullmatch(
        rf"wrote {re.escape(str(target))}: {records} records, {target.stat().st_size} bytes "
        r"in \d+\.\d\d s",
        proc.stderr.strip().splitlines()[-1],
    ), proc.stderr
    tables = run_zs("log", str(target), "main")
    assert tables.returncode == 0, tables.stderr
    header, *rows = tables.stdout.splitlines()
    assert header.split() == ["ID", "FLUSHED_AT", "PARENT_ID", "MESSAGE"]
    history = oracle(2, icechunk2_python)["ancestry"]["branch:main"]
    assert [row.split()[0] for row in rows] == [s["id"] for s in history]
    assert [row.split()[2] for row in rows[:-1]] == [s["parent_id"] for s in history[:-1]]
    checked = run_zs("validate", str(target))  # our validator knows the zstd codec the reference lacks
    assert checked.returncode == 0, checked.stderr


def test_cli_export_takes_every_codec_level_zs_make_takes(tmp_path, reference_zs):
    target = tmp_path / "lzma1e.zs"
    proc = run_zs("export", str(repo_path(2)), str(target), "--codec", "lzma", "-z", "1e")
    assert proc.returncode == 0, proc.stderr
    checked = subprocess.run([str(reference_zs), "validate", str(target)], capture_output=True, text=True)
    assert checked.returncode == 0, checked.stderr
    one_line_error(
        run_zs("export", str(repo_path(2)), str(tmp_path / "bad.zs"), "--codec", "lzma", "-z", "9"),
        "lzma compression level must be one of 0, 0e, 1, 1e",
    )
    assert not (tmp_path / "bad.zs").exists()


def test_bad_parallelism(tmp_path):
    proc = run_zs("export", str(repo_path(2)), str(tmp_path / "x.zs"), "-j", "0")
    assert proc.returncode == 2 and "neither a number >= 1 nor 'guess'" in proc.stderr, proc.stderr
    with pytest.raises(ZSError, match="parallelism must be a positive integer or 'guess', not 'many'"):
        export(repo_path(2), tmp_path / "x.zs", parallelism="many")
    assert not (tmp_path / "x.zs").exists()


def test_not_a_repository(tmp_path):
    one_line_error(run_zs("export", str(tmp_path), str(tmp_path / "x.zs")), str(tmp_path))
    assert not (tmp_path / "x.zs").exists()


def test_missing_target_directory_and_full_disk(tmp_path, monkeypatch):
    one_line_error(run_zs("export", str(repo_path(2)), str(tmp_path / "no" / "x.zs")), "does not exist")

    def disk_full(self, lists):
        for i, _ in enumerate(record for records in lists for record in records):
            if i == 50:
                raise OSError(28, "No space left on device")

    monkeypatch.setattr(ZSWriter, "add_record_lists", disk_full)
    with pytest.raises(ZSError, match="No space left on device"):
        export(repo_path(2), tmp_path / "full.zs")
    assert list(tmp_path.iterdir()) == []


def test_corrupt_repository_file(tmp_path):
    repo = tmp_path / "repo"
    shutil.copytree(repo_path(2), repo)
    snapshot = sorted((repo / "snapshots").iterdir())[-1]
    data = bytearray(snapshot.read_bytes())
    data[len(data) // 2 :] = b"\x00" * (len(data) - len(data) // 2)
    snapshot.write_bytes(bytes(data))
    one_line_error(run_zs("export", str(repo), str(tmp_path / "x.zs")))
    assert not (tmp_path / "x.zs").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["repo"]


def test_a_zs_file_that_is_not_an_archive(tmp_path):
    plain = tmp_path / "plain.zs"
    with ZSWriter(plain, {}, codec="none") as writer:
        writer.add_records([b"a", b"b"])
        writer.finish()
    one_line_error(run_zs("refs", str(plain)), "not a repo archive")


@pytest.fixture(scope="module")
def v2_archive(tmp_path_factory):
    target = tmp_path_factory.mktemp("v2") / "v2.zs"
    export(repo_path(2), target)
    return target


def test_query_errors_are_one_line(v2_archive, tmp_path):
    arc = str(v2_archive)
    one_line_error(run_zs("ls", arc, "no-such-ref"), "no-such-ref")
    one_line_error(run_zs("chunks", arc, "main", "/no/such/array"), "/no/such/array")
    one_line_error(run_zs("chunk", arc, "main", "/data/big", "99,99"), "99,99")
    one_line_error(run_zs("log", arc, "main", "--until", "2001-01-01"), "before the first commit")
    one_line_error(run_zs("ls", arc, "main@2001-01-01"), "flushed at or before")
    one_line_error(run_zs("log", arc, "--since", "not a time"), "bad time")
    proc = run_zs("chunk", arc, "main", "/data/big", "x,y")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr


def test_unsupported_virtual_scheme(tmp_path):
    """An archive (possibly from anyone) pointing a virtual ref at s3:// is refused unless authorized;
    one at a scheme nothing here reads gets a clear refusal."""
    target = tmp_path / "s3.zs"
    node_value = (
        NODE,
        S.ARRAY,
        b'{"zarr_format":3,"node_type":"array","shape":[6],"chunk_grid":{"name":"regular",'
        b'"configuration":{"chunk_shape":[2]}}}',
        ((6, None, 3),),
        None,
        ((MANIFEST, ((0, 3),)),),
    )
    records = sorted(
        [
            S.record(S.REFS, ("branch", "main"), (SNAPSHOT,)),
            S.record(S.SNAPSHOT, (SNAPSHOT,), (None, 1, "m", "{}", ())),
            S.record(S.NODE, (SNAPSHOT, ("v",)), node_value),
            S.record(S.CHUNK_REF, (MANIFEST, NODE, (0,)), (S.VIRTUAL, "s3://bucket/key.nc", 0, 8, None, None)),
            S.record(S.CHUNK_REF, (MANIFEST, NODE, (2,)), (S.VIRTUAL, "ftp://host/key.nc", 0, 8, None, None)),
            S.record(S.CHUNK_REF, (MANIFEST, NODE, (1,)), (S.VIRTUAL, "file:///etc/passwd", 0, 8, None, None)),
            S.record(S.HEADER, (), (1, 2, 0, "test", ())),
        ]
    )
    with ZSWriter(target, {S.METADATA_KEY: {"format_version": 1}}, codec="none") as writer:
        writer.add_records(records)
        writer.finish()
    one_line_error(
        run_zs("chunk", str(target), "main", "/v", "0", "--data"),
        "not under an authorized prefix; authorize it with authorize=['s3://bucket/'] in Python, "
        "--authorize s3://bucket/ on the command line",
    )
    one_line_error(run_zs("chunk", str(target), "main", "/v", "2", "--data"), "'ftp'")
    one_line_error(
        run_zs("chunk", str(target), "main", "/v", "1", "--data", "--authorize", "file:///tmp/"),
        "--authorize file:///etc/",
    )


def test_native_chunk_ids_cannot_escape_the_repository(tmp_path):
    target = tmp_path / "evil.zs"
    node_value = (
        NODE,
        S.ARRAY,
        b'{"zarr_format":3,"node_type":"array","shape":[4],"chunk_grid":{"name":"regular",'
        b'"configuration":{"chunk_shape":[2]}}}',
        ((4, None, 2),),
        None,
        ((MANIFEST, ((0, 2),)),),
    )
    records = sorted(
        [
            S.record(S.REFS, ("branch", "main"), (SNAPSHOT,)),
            S.record(S.SNAPSHOT, (SNAPSHOT,), (None, 1, "m", "{}", ())),
            S.record(S.NODE, (SNAPSHOT, ("v",)), node_value),
            S.record(S.CHUNK_REF, (MANIFEST, NODE, (0,)), (S.NATIVE, "../../../../etc/passwd", 0, 8)),
            S.record(S.HEADER, (), (1, 2, 0, "test", ())),
        ]
    )
    with ZSWriter(target, {S.METADATA_KEY: {"format_version": 1}}, codec="none") as writer:
        writer.add_records(records)
        writer.finish()
    one_line_error(
        run_zs("chunk", str(target), "main", "/v", "0", "--data", "--repo", str(tmp_path)), "invalid chunk id"
    )


def test_newer_archive_format_is_refused(tmp_path):
    target = tmp_path / "future.zs"
    with ZSWriter(target, {S.METADATA_KEY: {"format_version": 99}}, codec="none") as writer:
        writer.add_records([S.record(S.HEADER, (), (99,))])
        writer.finish()
    one_line_error(run_zs("refs", str(target)), "newer than this zsarchive reads")


def test_malformed_record_values_are_one_line_errors(tmp_path):
    target = tmp_path / "bad.zs"
    records = sorted(
        [
            S.record(S.REFS, ("branch", "main"), ("S" * 20,)),
            S.record(S.SNAPSHOT, ("S" * 20,), (None, "not a time", "m", "{}", ())),
            S.record(S.NODE, ("S" * 20, ("v",)), ("too", "short")),
            S.record(S.HEADER, (), (1, 2, 0, "test", ())),
        ]
    )
    with ZSWriter(target, {S.METADATA_KEY: {"format_version": 1}}, codec="none") as writer:
        writer.add_records(records)
        writer.finish()
    one_line_error(run_zs("ls", str(target), "main"), "nodes record", "malformed")
    one_line_error(run_zs("log", str(target), "main"), "snapshots record", "malformed")


def test_a_chunk_file_missing_from_the_repository_is_one_line_and_no_archive(tmp_path, monkeypatch):
    """Chunk files are read on a thread ahead of the writing: a missing one still ends the export with
    one line naming it, and nothing at the target; so does one missing past the read-ahead window."""
    copy = tmp_path / "repo"
    shutil.copytree(repo_path(2), copy)
    last = sorted((copy / "chunks").iterdir())[-1]
    last.unlink()
    for window in (64 << 20, 1):  # every file ahead at once, and one at a time
        monkeypatch.setattr(records_module, "READ_AHEAD_BYTES", window)
        target = tmp_path / "out.zs"
        with pytest.raises(ZSCorrupt) as caught:
            export(copy, target, include_chunks=True)
        assert f"chunks/{last.name}: missing, but a chunk ref points to native chunk {last.name}" in str(caught.value)
        assert sorted(p.name for p in tmp_path.iterdir()) == ["repo"]
    line = one_line_error(run_zs("export", str(copy), str(tmp_path / "out.zs"), "--include-chunks", "--no-progress"))
    assert f"chunks/{last.name}: missing" in line and not (tmp_path / "out.zs").exists()
