"""The test tree mirrors the package: tests of ``zsarchive/<part>/`` live in ``tests/<part>/``, the suites
that hold the whole package (differential, README, fuzz, hostile input, layers) in ``tests/system/``, and
every shared helper in the ``tests/toolkit`` package, imported as ``toolkit.<module>``."""

from __future__ import annotations

import ast
from pathlib import Path

import zsarchive

from toolkit.places import ROOT

TESTS = ROOT / "tests"
PACKAGE = Path(zsarchive.__file__).parent
OWN_FOLDERS = {Path("system"), Path("toolkit")}


def _folders() -> list[Path]:
    return sorted(
        p.relative_to(TESTS)
        for p in TESTS.rglob("*")
        if p.is_dir() and "__pycache__" not in p.parts and not p.name.startswith(".")
    )


def _mirrors_a_package_part(folder: Path) -> bool:
    return (PACKAGE / folder / "__init__.py").is_file()


def test_every_folder_mirrors_a_package_part_or_is_system_or_toolkit():
    strays = [
        str(f)
        for f in _folders()
        if f not in OWN_FOLDERS and not _mirrors_a_package_part(f) and f.parent not in OWN_FOLDERS
    ]
    assert not strays, f"folders under tests/ that mirror no part of zsarchive/: {strays}"


def test_no_test_file_sits_at_the_top_or_among_the_helpers():
    misplaced = [str(p.relative_to(TESTS)) for p in TESTS.rglob("test_*.py") if p.parent in (TESTS, TESTS / "toolkit")]
    assert not misplaced, f"test files outside the mirrored folders: {misplaced}"


def test_helpers_live_in_toolkit_only():
    helpers = [
        str(p.relative_to(TESTS))
        for p in TESTS.rglob("*.py")
        if not p.name.startswith("test_")
        and p.name != "conftest.py"
        and TESTS / "toolkit" not in p.parents
        and "__pycache__" not in p.parts
    ]
    assert not helpers, f"helper modules outside tests/toolkit/: {helpers}"


def test_no_test_imports_conftest_or_edits_sys_path():
    # conftest.py is loaded by pytest under its own name: importing it again makes a second copy
    offenders = []
    for path in TESTS.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if (
                isinstance(node, ast.ImportFrom)
                and node.module == "conftest"
                or (isinstance(node, ast.Import) and any(a.name == "conftest" for a in node.names))
            ):
                offenders.append(f"{path.relative_to(TESTS)}:{node.lineno} imports conftest")
            if (
                isinstance(node, ast.Attribute)
                and node.attr == "path"
                and isinstance(node.value, ast.Name)
                and node.value.id == "sys"
            ):
                offenders.append(f"{path.relative_to(TESTS)}:{node.lineno} uses sys.path")
    assert not offenders, offenders
