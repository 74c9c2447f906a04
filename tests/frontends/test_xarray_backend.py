"""The xarray engine held against icechunk: every snapshot of a history written by ``Dataset.to_zarr``
into a real icechunk 2.x repository reads, through ``engine="zsarchive"``, identical to what
``xr.open_zarr(session.store)`` gives in icechunk's own Python."""

from __future__ import annotations

import configparser
import importlib
import importlib.metadata
import json
import pickle
import shutil
import subprocess
import sys

import pytest
import xarray as xr

from toolkit.places import peers_required
from toolkit.oracle import ROOT
from toolkit.servers import nginx_server  # noqa: F401
from zsarchive.archive import export
from zsarchive.errors import ZSError
from zsarchive.frontends.xarray_backend import ZsarchiveBackendEntrypoint, open_dataset, open_datatree

SCRIPT = ROOT / "tests" / "toolkit" / "xarray_repo.py"


def _ic2(python, *args) -> str:
    proc = subprocess.run([str(python), str(SCRIPT), *map(str, args)], capture_output=True, timeout=300)
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")[-3000:]
    return proc.stdout.decode()


@pytest.fixture(scope="module")
def history(icechunk2_python, tmp_path_factory):
    """(repo, archive without chunk bytes, archive with them, ancestry by branch, icechunk's datasets)."""
    base = tmp_path_factory.mktemp("xarray")
    repo = base / "repo"
    ancestry = json.loads(_ic2(icechunk2_python, "write", repo).splitlines()[-1])
    snapshots = sorted(set(ancestry["main"][:-1] + ancestry["dev"][:-1]))  # the root snapshot is empty
    answers = {}
    for group in ("data", "other", "virtual"):
        _ic2(
            icechunk2_python,
            "read",
            repo,
            base / f"{group}.pickle",
            group,
            *[s for s in snapshots if group == "data" or s == ancestry["main"][0]],
        )
        answers[group] = pickle.loads((base / f"{group}.pickle").read_bytes())
    export(repo, base / "refs.zs")
    export(repo, base / "full.zs", include_chunks=True)
    return repo, base / "refs.zs", base / "full.zs", ancestry, answers


VIRTUAL = "file://{repo}-virtual/"
"""The prefix the virtual chunks of group ``virtual`` live under (tests/toolkit/xarray_repo.py)."""


def test_every_snapshot_equals_open_zarr_on_icechunk(history):
    repo, refs_only, _, ancestry, answers = history
    assert len(answers["data"]) == 6  # five commits on main, one on dev
    for group, datasets in answers.items():
        for sid, expected in datasets.items():
            with open_dataset(refs_only, ref=sid, group=group, repo=repo, authorize=[VIRTUAL.format(repo=repo)]) as ds:
                assert all(v.chunks is not None for v in ds.data_vars.values())  # dask, as open_zarr
                xr.testing.assert_identical(ds.load(), xr.Dataset.from_dict(expected))
    # refs and REF@TIME resolve as everywhere else; the default is main
    tip = answers["data"][ancestry["main"][0]]
    with xr.open_dataset(refs_only, engine=ZsarchiveBackendEntrypoint, group="/data", repo=str(repo)) as ds:
        assert ds.temperature.chunks is None  # xr.open_dataset's own default: lazy, without dask
        xr.testing.assert_identical(ds.load(), xr.Dataset.from_dict(tip))
    with open_dataset(refs_only, ref="dev", group="data", repo=repo) as ds:
        xr.testing.assert_identical(ds.load(), xr.Dataset.from_dict(answers["data"][ancestry["dev"][0]]))


def test_dask_chunks_are_the_stored_chunks(history):
    repo, refs_only, *_ = history
    with open_dataset(refs_only, group="data", repo=repo) as ds:
        assert ds.temperature.chunks == ((2, 2, 2, 1), (3,), (2, 2))
        assert ds.flag.chunks == ((2, 2, 2, 1),)


def test_virtual_chunks_only_where_authorized(history):
    repo, refs_only, full, ancestry, answers = history
    expected = xr.Dataset.from_dict(answers["virtual"][ancestry["main"][0]])
    with open_dataset(full, group="virtual", authorize={VIRTUAL.format(repo=repo): {}}) as ds:
        xr.testing.assert_identical(ds.load(), expected)
    with open_dataset(full, group="virtual") as ds, pytest.raises(ZSError, match="not under an authorized prefix"):
        ds.load()


def test_datatree_and_mfdataset(history):
    repo, refs_only, full, ancestry, answers = history
    tip = ancestry["main"][0]
    with open_datatree(full, authorize=[VIRTUAL.format(repo=repo)]) as tree:
        assert set(tree.children) == {"data", "other", "virtual"}
        for group in ("data", "other", "virtual"):
            xr.testing.assert_identical(tree[group].to_dataset().load(), xr.Dataset.from_dict(answers[group][tip]))
    with xr.open_mfdataset(
        [refs_only, full],
        engine=ZsarchiveBackendEntrypoint,
        group="data",
        ref="main",
        repo=str(repo),
        combine="nested",
        concat_dim="copy",
    ) as both:
        expected = xr.Dataset.from_dict(answers["data"][tip])
        xr.testing.assert_identical(both.isel(copy=1, drop=True).load(), expected)
        assert both.sizes["copy"] == 2
    groups = xr.open_groups(full, engine=ZsarchiveBackendEntrypoint)
    assert set(groups) == {"/", "/data", "/other", "/virtual"}
    xr.testing.assert_identical(groups["/other"].load(), xr.Dataset.from_dict(answers["other"][tip]))
    for ds in groups.values():
        ds.close()


def test_over_http(history, nginx_server):  # noqa: F811
    _, _, full, ancestry, answers = history
    shutil.copy(full, nginx_server.root / "xarray.zs")
    first = ancestry["main"][-2]
    with open_dataset(nginx_server.url("xarray.zs"), ref=first, group="data") as ds:
        xr.testing.assert_identical(ds.load(), xr.Dataset.from_dict(answers["data"][first]))


def test_errors_are_one_line(history):
    _, refs_only, *_ = history
    with pytest.raises(ZSError, match="nosuch"):
        open_dataset(refs_only, ref="nosuch", group="data")
    with pytest.raises(TypeError, match="bogus"):
        open_datatree(refs_only, bogus=1)


def test_the_entry_point_in_setup_cfg_names_the_engine():
    config = configparser.ConfigParser()
    config.read(ROOT / "setup.cfg")
    lines = [line.strip() for line in config["options.entry_points"]["xarray.backends"].splitlines() if line]
    assert len(lines) == 1
    name, target = (part.strip() for part in lines[0].split("="))
    module, _, attr = target.partition(":")
    assert name == "zsarchive" and getattr(importlib.import_module(module), attr) is ZsarchiveBackendEntrypoint


def test_engine_by_name_when_installed(history):
    """``engine="zsarchive"`` through the installed entry point (``pip install -e .`` installs it)."""
    points = [p for p in importlib.metadata.entry_points(group="xarray.backends") if p.name == "zsarchive"]
    if not points:
        message = "zsarchive's package metadata (its xarray entry point) is not installed in this Python"
        if peers_required():  # CI and scripts/dev install the package: a missing entry point is a broken install
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
    repo, refs_only, *_ = history
    with xr.open_dataset(refs_only, engine="zsarchive", group="data", repo=str(repo)) as ds:
        assert ds.temperature.dims == ("time", "lat", "lon")
    assert "zsarchive" in xr.backends.list_engines()


def test_reading_commands_do_not_import_xarray(history):
    _, refs_only, *_ = history
    code = (
        "import sys; from zsarchive.cli import main\n"
        f"for args in (['log', {str(refs_only)!r}], ['ls', {str(refs_only)!r}, 'main']):\n"
        "    main(args, standalone_mode=False)\n"
        "assert 'xarray' not in sys.modules, 'xarray imported'\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        cwd=ROOT,
        timeout=120,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )
    assert proc.returncode == 0, proc.stderr.decode()[-2000:]
