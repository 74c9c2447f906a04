"""One location value: a path or URL becomes a :class:`Location` in one function (io/location.py's
``parse_location``), and every command reaches its locations by the same rule: ``storage_options`` and
``anon`` apply to each location given as text, and a location given as a ``Location`` is used as it is."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import zsarchive
from toolkit.oracle import repo_path
from zsarchive.archive import RepoArchive, export
from zsarchive.archive.zarrstore.store import open_store
from zsarchive.frontends import xarray_backend
from zsarchive.io.location import Location, parse_location
from zsarchive.restore.checkout import checkout
from zsarchive.restore.repository import restore

PACKAGE = Path(zsarchive.__file__).parent
ENTRIES = [
    restore,
    checkout,
    open_store,
    RepoArchive.read_chunk,
    RepoArchive.status,
    xarray_backend.open_dataset,
    xarray_backend.open_datatree,
]


def test_every_entry_reaches_its_locations_by_one_pair_of_options():
    for function in ENTRIES:
        names = list(inspect.signature(function).parameters)
        assert not [n for n in names if n.endswith(("_storage_options", "_anon"))], function.__qualname__
        assert ("storage_options" in names) == ("anon" in names), function.__qualname__


def test_url_schemes_are_read_in_one_module():
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path == PACKAGE / "io" / "location.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "compile"
                and node.args
                and isinstance(node.args[0], ast.Constant)
                and "://" in str(node.args[0].value)
            ):
                found.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno}")
    assert found == []


def test_a_location_value_is_taken_as_it_is(tmp_path):
    archive = tmp_path / "a.zs"
    export(repo_path(2), archive, include_chunks=True)
    target = parse_location(tmp_path / "restored")
    assert isinstance(target, Location) and parse_location(target) is target
    summary = restore(archive, target)
    assert summary.snapshots > 0 and (tmp_path / "restored" / "repo").is_file()
    checked = checkout(archive, "main", parse_location(tmp_path / "plain"), group="data/temperature")
    assert checked.chunks > 0 and (tmp_path / "plain" / "zarr.json").is_file()
