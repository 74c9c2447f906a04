"""History that outlives its sources: repositories VirtualiZarr and icechunk 2.x write from NetCDF-4 files
(chunked with gzip and shuffle, contiguous, CF-packed int16 with a fill value; appended along time; a tag)
on local disk, nginx and moto S3 are exported with ``--include-virtual``; then the sources are deleted,
and every ref of every snapshot reads through the xarray engine, ``open_store`` and ``zs checkout`` as
icechunk's own store answered before the deletion; ``zs restore --materialize-virtual`` gives back a
repository icechunk reads, without the sources, exactly as it read the original."""

from __future__ import annotations

import contextlib
import json

import pytest
import xarray as xr
import zarr

from toolkit.cli import run_zs
from toolkit.places import PEERS, require_peer
from toolkit.servers import moto_s3, nginx_server  # noqa: F401
from toolkit.virtual_history import BUCKET, Sources, answers, commit, same
from zsarchive.archive import RepoArchive
from zsarchive.archive.zarrstore import open_store


@pytest.fixture(scope="module")
def python():
    return require_peer(PEERS / "ic2" / "bin" / "python", "icechunk 2.x with VirtualiZarr (Python 3.12)")


@pytest.fixture(scope="module")
def s3():
    with moto_s3({BUCKET: {}}) as client:
        yield client


@pytest.fixture(scope="module", params=["file", "http", "s3"])
def gone(request, python, tmp_path_factory):
    """A three-commit history with a tag, exported keeping its virtual bytes; icechunk's answers taken
    before its sources were deleted."""
    kind = request.param
    base = tmp_path_factory.mktemp(f"vz-{kind}")
    extra = (
        {"nginx": request.getfixturevalue("nginx_server")}
        if kind == "http"
        else {"s3": request.getfixturevalue("s3")}
        if kind == "s3"
        else {}
    )
    if kind == "s3":
        extra["endpoint"] = extra["s3"].meta.endpoint_url
    sources = Sources(kind, base / f"src-{kind}", **extra)
    repo = base / "repo"
    for name, seed, start, times in (("a.nc", 1, 0, 4), ("b.nc", 2, 4, 2), ("c.nc", 3, 6, 2)):
        sources.write(python, name, seed, start, times)
    commit(python, repo, sources, "first granule", "a.nc", "--create")
    commit(python, repo, sources, "append a granule", "b.nc", "--append", "--tag", "v1")
    commit(python, repo, sources, "append another", "c.nc", "--append")
    told = answers(python, repo, sources, base / "answers.pkl")
    archive, plain = base / "history.zs", base / "plain.zs"
    authorize = [
        a
        for prefix, options in sources.authorize.items()
        for a in ("--authorize", " ".join([prefix, *(f"{k}={v}" for k, v in options.items())]))
    ]
    done = run_zs("export", str(repo), str(archive), "--include-virtual", *authorize)
    assert done.returncode == 0, done.stderr
    assert "not kept" not in done.stderr and "kept 1" in done.stderr, done.stderr
    assert run_zs("export", str(repo), str(plain)).returncode == 0
    # one source modified in place, one deleted: what zs sources --check says of each archive then
    sources.put("b.nc", (sources.local / "a.nc").read_bytes())
    sources.delete("c.nc")
    checked = {
        name: run_zs("sources", str(path), "--check", "--json", *authorize)
        for name, path in (("kept", archive), ("plain", plain))
    }
    sources.delete()
    return {"archive": archive, "answers": told, "repo": repo, "sources": sources, "base": base, "checked": checked}


def _keys(answer: dict) -> list[str]:
    return sorted(answer["chunks"])


def test_every_chunk_reads_from_the_archive_as_icechunk_gave_it(gone):
    """open_store over every snapshot: each chunk key's bytes, without authorize and without the sources."""
    with RepoArchive(gone["archive"]) as archive:
        for sid, answer in gone["answers"]["snapshots"].items():
            store = open_store(archive, sid)
            got = {key: store._read(key, None) for key in _keys(answer)}
            assert {k: bytes(v) for k, v in got.items()} == answer["chunks"], sid
            virtual = [
                c for n in archive.node_infos(sid) if n.is_array for c in archive.array_chunks(n) if c.kind == "virtual"
            ]
            assert all(archive.embeds(c) for c in virtual) and (virtual or answer["dataset"] is None)


def test_zs_chunk_reads_and_names_embedded_virtual_chunks_without_authorize(gone):
    tip = gone["answers"]["heads"]["branch:main"]
    for key in ("temp/c/5/0/0", "rain/c/2/0/0", "elev/c/0/0"):
        path, _, coords = key.partition("/c/")
        data = run_zs("chunk", str(gone["archive"]), tip, path, coords.replace("/", ","), "--data", text=False)
        assert data.returncode == 0 and data.stdout == gone["answers"]["snapshots"][tip]["chunks"][key], data.stderr
        row = json.loads(run_zs("chunk", str(gone["archive"]), tip, path, coords.replace("/", ","), "--json").stdout)
        assert (row["kind"], row["embedded"]) == ("virtual", True)
        assert "virtual, embedded" in run_zs("chunk", str(gone["archive"]), tip, path, coords.replace("/", ",")).stdout


def test_the_xarray_engine_reads_every_snapshot_as_icechunk(gone):
    for sid, answer in gone["answers"]["snapshots"].items():
        if answer["dataset"] is None:
            continue
        with xr.open_dataset(gone["archive"], engine="zsarchive", ref=sid, chunks=None) as ds:
            same(answer["dataset"], ds.load().to_dict(data="array"), sid)
    with xr.open_dataset(gone["archive"], engine="zsarchive", ref="tag:v1", chunks=None) as ds:
        same(
            gone["answers"]["snapshots"][gone["answers"]["heads"]["tag:v1"]]["dataset"], ds.load().to_dict(data="array")
        )


def test_checkout_writes_every_snapshot_as_icechunk_reads_it(gone, tmp_path):
    for sid, answer in gone["answers"]["snapshots"].items():
        if answer["dataset"] is None:
            continue
        out = tmp_path / sid
        done = run_zs("checkout", str(gone["archive"]), sid, str(out))
        assert done.returncode == 0, done.stderr
        with xr.open_zarr(out, consolidated=False, chunks=None) as ds:
            same(answer["dataset"], ds.load().to_dict(data="array"), sid)
        group = zarr.open_group(out, mode="r")
        for key, data in answer["chunks"].items():
            assert (out / key).read_bytes() == data, (sid, key)
        assert group.attrs is not None


def test_restore_materialized_reads_in_icechunk_without_the_sources(gone, python):
    target = gone["base"] / "restored"
    done = run_zs("restore", str(gone["archive"]), str(target), "--materialize-virtual")
    assert done.returncode == 0, done.stderr
    again = answers(python, target, gone["sources"], gone["base"] / "restored.pkl")
    assert again["heads"] == gone["answers"]["heads"]
    assert all(answer["locations"] == [] for answer in again["snapshots"].values())  # no ref is virtual now
    strip = lambda answers: {sid: {k: v for k, v in a.items() if k != "locations"} for sid, a in answers.items()}  # noqa: E731
    same(strip(gone["answers"]["snapshots"]), strip(again["snapshots"]))
    with contextlib.closing(RepoArchive(gone["archive"])) as archive:
        kept = sum(
            1 for n in archive.node_infos("main") if n.is_array for c in archive.array_chunks(n) if c.kind == "virtual"
        )
    assert kept and len(list((target / "chunks").iterdir())) >= kept // 3


def test_sources_check_names_the_changed_and_deleted_objects_and_the_snapshots_using_them(gone):
    """b.nc was rewritten and c.nc deleted after the exports: ``zs sources --check`` says so of exactly those
    two, with the snapshots whose refs point into each (as icechunk lists their locations); the archive
    that keeps their bytes has nothing at risk (exit 0), the one that does not names what is (exit 3)."""
    prefix = gone["sources"].prefix
    users = {
        name: sorted(
            sid for sid, answer in gone["answers"]["snapshots"].items() if prefix + name in answer["locations"]
        )
        for name in ("a.nc", "b.nc", "c.nc")
    }
    assert users["c.nc"] and set(users["b.nc"]) > set(users["c.nc"])
    expected = {"a.nc": "unchanged", "b.nc": "changed", "c.nc": "missing"}
    for name, done in gone["checked"].items():
        lines = [json.loads(line) for line in done.stdout.splitlines()]
        overall, rows = lines[0], {row["location"]: row for row in lines[1:]}
        assert set(rows) == {prefix + n for n in expected}, rows.keys()
        for file, status in expected.items():
            row = rows[prefix + file]
            assert (row["status"], sorted(row["snapshots"])) == (status, users[file]), (name, file, row)
            assert row["embedded"] == ("all" if name == "kept" else "none") and row["at_risk"] == (
                name == "plain" and status != "unchanged"
            )
        assert (overall["changed"], overall["missing"], overall["unchanged"]) == (1, 1, 1)
        if name == "kept":
            assert done.returncode == 0 and overall["at_risk"] == [], done.stderr
            assert overall["safe_refs"] == rows[prefix + "b.nc"]["refs"] + rows[prefix + "c.nc"]["refs"]
        else:
            assert done.returncode == 3, done.stderr
            assert overall["at_risk"] == [prefix + "b.nc", prefix + "c.nc"]
            assert overall["at_risk_snapshots"] == sorted(set(users["b.nc"]) | set(users["c.nc"]))
