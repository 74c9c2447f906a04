"""The package's layers, read from the source: each top-level package imports only itself, the layers
below it and the shared helper modules, as ``docs/architecture.rst`` draws them (imports inside
functions count). The archive package's own sub-packages are held by tests/archive/test_layering.py."""

from __future__ import annotations

from pathlib import Path

import zsarchive
from toolkit.imports import imported_names

PACKAGE = Path(zsarchive.__file__).parent
HELPERS = {"errors", "heap", "lazy", "limits", "times", "walk", "suggest", "typedtuple", "version"}
"""Modules of the package's top level that every layer may use; they import only each other."""
LAYERS = ["io", "zs", "icechunk", "archive", "restore", "frontends", "cli"]
"""Bottom to top: where bytes come from, the ZS engine, Icechunk's files, the archive, bringing a
repository back and the front ends (xarray, the web page), the command line."""


def _imports(path: Path) -> set[str]:
    """The ``zsarchive`` modules (and names of them) ``path`` imports, at its top or inside a function."""
    return {name for name in imported_names(path) if name.startswith("zsarchive.")}


def _part(module: str) -> str:
    """The layer or helper a dotted module name belongs to."""
    return module.split(".")[1]


def _sources() -> list[tuple[str, Path]]:
    return [(".".join(("zsarchive", *p.relative_to(PACKAGE).with_suffix("").parts)), p) for p in PACKAGE.rglob("*.py")]


def test_every_module_belongs_to_a_layer_or_is_a_helper():
    parts = {_part(name) for name, _ in _sources() if name.count(".") >= 1}
    assert parts - {"__init__", "__main__"} == set(LAYERS) | HELPERS


def test_layers_import_only_downwards():
    wrong = []
    for name, path in _sources():
        source = _part(name)
        for target in _imports(path):
            dest = _part(target)
            if source in HELPERS:
                allowed = dest in HELPERS
            elif source in LAYERS:
                allowed = dest in HELPERS or LAYERS.index(dest) <= LAYERS.index(source)
            else:  # the package's __init__ and __main__ stand above every layer
                allowed = True
            if not allowed:
                wrong.append(f"{name} imports {target}")
    assert wrong == []


def test_the_rule_finds_an_upward_import(tmp_path):
    """The scan sees an import inside a function, as the layers' lazy imports are."""
    module = tmp_path / "probe.py"
    module.write_text("def f():\n    from zsarchive.cli.app import main\n")
    assert _imports(module) == {"zsarchive.cli.app", "zsarchive.cli.app.main"}
    assert LAYERS.index(_part("zsarchive.cli.app")) > LAYERS.index("io")


def test_the_zs_engines_own_commands_need_no_icechunk():
    """``zs make`` and ``zs dump`` are the ZS engine's: they import neither Icechunk's decoders nor the archive."""
    for command in ("make", "dump"):
        wrong = [
            name
            for name in _imports(PACKAGE / "cli" / f"{command}.py")
            if _part(name) in ("icechunk", "archive", "restore", "frontends")
        ]
        assert wrong == [], (command, wrong)
