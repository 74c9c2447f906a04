"""The linter's and the type checker's rules (pyproject.toml; ``scripts/dev test`` runs both before the
tests and fails on either): the format layers are checked strictly, and the modules still exempt from the
type check only leave that list, never join it."""

from __future__ import annotations

import tomllib
from pathlib import Path

import zsarchive

from toolkit.places import ROOT

CONFIG = tomllib.loads((ROOT / "pyproject.toml").read_text())
PACKAGE = Path(zsarchive.__file__).parent
EXEMPT_AT_MOST = 19
"""Modules exempt from the type check when the check began: lower it as modules leave the list."""


def _overrides(option: str) -> list[str]:
    return [module for entry in CONFIG["tool"]["mypy"]["overrides"] if entry.get(option) for module in entry["module"]]


def test_the_format_layers_are_checked_strictly():
    strict = _overrides("disallow_untyped_defs")
    assert {"zsarchive.archive.format.*", "zsarchive.zs.format.*"} <= set(strict)
    assert not any(
        module.startswith(("zsarchive.archive.format", "zsarchive.zs.format")) for module in _overrides("ignore_errors")
    )


def test_the_exempt_modules_only_shrink():
    exempt = _overrides("ignore_errors")
    assert len(exempt) <= EXEMPT_AT_MOST, f"{len(exempt)} modules exempt from mypy: fix the new one instead"
    missing = [
        m
        for m in exempt
        if not (PACKAGE.parent / (m.replace(".", "/") + ".py")).exists()
        and not (PACKAGE.parent / m.replace(".", "/") / "__init__.py").exists()
    ]
    assert not missing, f"exempt modules that no longer exist (take them off the list): {missing}"


def test_scripts_dev_test_lints_and_type_checks_before_the_tests():
    script = (ROOT / "scripts" / "dev").read_text()
    test_branch = script[script.index("    test)") : script.index(";;", script.index("    test)"))]
    assert test_branch.index("check") < test_branch.index("pytest")
    assert ".venv/bin/ruff check" in script and ".venv/bin/mypy" in script
