"""docs/architecture.rst names only what exists: every module, folder, class and name it spells in
literals is in the tree, every sub-package of the package has its row, and its list of the top-level
helper modules is the package's own. A rename or a new layer that leaves the page behind fails here."""

from __future__ import annotations

import ast
import importlib.util
import re
from functools import cache

import obstore.exceptions

from toolkit.places import ROOT

DOC = ROOT / "docs" / "architecture.rst"
PACKAGE = ROOT / "zsarchive"
TREES = ("zsarchive", "tests", "js", "scripts", "testdata", "docs")
LITERAL = re.compile(r"``([^`]+)``")


@cache
def _paths() -> tuple[str, ...]:
    """Every file and folder of the tree (folders with a trailing slash), relative to the clone."""
    found = [top + "/" for top in TREES]
    for top in TREES:
        for path in (ROOT / top).rglob("*"):
            if "__pycache__" in path.parts or "node_modules" in path.parts:
                continue
            rel = path.relative_to(ROOT).as_posix()
            found.append(rel + "/" if path.is_dir() else rel)
    return tuple(found)


def _exists(tail: str) -> bool:
    """Whether some file or folder of the tree ends with ``tail`` (``format/views.py``, ``static/``)."""
    tail = tail.strip("/") + ("/" if tail.endswith("/") else "")
    return any(p == tail or p.endswith("/" + tail) for p in _paths())


@cache
def _defined(path: str) -> frozenset[str]:
    """The names a Python module defines at its top level or in its classes."""
    names = set()
    for node in ast.walk(ast.parse((ROOT / path).read_text())):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                names.update(t.id for t in ast.walk(target) if isinstance(t, ast.Name))
    return frozenset(names)


def _module_files(module: str) -> list[str]:
    """The tree's Python files a module reference (``read/chain``, ``views``, ``toolkit.places``) may mean."""
    tail = module.replace(".", "/") if "/" not in module else module
    return [
        p
        for p in _paths()
        if p.endswith(".py")
        and (p == tail + ".py" or p.endswith("/" + tail + ".py") or p.endswith("/" + tail + "/__init__.py"))
    ]


def _defined_anywhere(name: str) -> bool:
    return any(name in _defined(p) for p in _paths() if p.startswith("zsarchive/") and p.endswith(".py"))


def _stale(literal: str, python: bool = True) -> str | None:
    """Why a literal of the page names nothing in the tree, or None when it names something (or no code).
    ``python``: the literal is from the page's Python part, where a capitalised name is a class of ours."""
    if re.fullmatch(r"[\w-]+\.(yaml|toml|cfg)", literal):
        return None  # a settings file's name
    if re.fullmatch(r"[\w/.{},]+/", literal) or re.fullmatch(r"[\w/]+\.(py|js|rst|json)", literal):
        paths = [literal]
        if "{" in literal:  # tests/archive/{format,read}/
            head, inner, rest = re.match(r"(.*)\{(.*)\}(.*)", literal).groups()
            paths = [head + part + rest for part in inner.split(",")]
        missing = [p for p in paths if not _exists(p)]
        return f"no file or folder {missing}" if missing else None
    dotted = re.fullmatch(r"([\w/]+)\.([A-Za-z_]\w*)(\(\w*\))?", literal)
    if dotted and dotted.group(1) not in {"key", "node", "value"}:
        module, name = dotted.group(1), dotted.group(2)
        if module[0].isupper():  # Class.method: a method of ours
            return None if _defined_anywhere(module) and _defined_anywhere(name) else f"nothing defines {literal}"
        files = _module_files(module)
        if not files:
            return None if "/" not in module and importlib.util.find_spec(module) else f"no module {module}"
        if not any(
            name in _defined(f) or _exists(f.removesuffix("/__init__.py").removesuffix(".py") + "/" + name + ".py")
            for f in files
        ):
            return f"{module} defines no {name}"
        return None
    if python and re.fullmatch(r"[A-Z][A-Za-z]+|[A-Z][A-Z_]+[A-Z]", literal):  # a class or a constant
        if hasattr(obstore.exceptions, literal) or _defined_anywhere(literal):
            return None
        return f"nothing defines {literal}"
    return None


def test_every_name_the_page_spells_exists():
    python, js = DOC.read_text().split("The JavaScript reader\n---", 1)
    stale = {
        literal: why
        for part in (python, js)
        for literal in LITERAL.findall(part)
        if (why := _stale(literal, part is python))
    }
    assert stale == {}


def test_every_layer_has_its_row():
    """A layer is a sub-package of the package, or of ``archive/``, which has no row of its own."""
    text = DOC.read_text()
    layers = [
        p.parent
        for p in (*PACKAGE.glob("*/__init__.py"), *(PACKAGE / "archive").glob("*/__init__.py"))
        if p.parent != PACKAGE / "archive"
    ]
    assert [str(p) for p in layers if f"``{p.relative_to(ROOT).as_posix()}/``" not in text] == []


def test_the_top_level_helpers_listed_are_the_package_s():
    text = " ".join(DOC.read_text().split())
    listed = re.search(r"the helper modules of the package's top level \(([^)]*)\)", text).group(1)
    named = set(LITERAL.findall(listed))
    present = {p.stem for p in PACKAGE.glob("*.py")} - {"__init__", "__main__"}
    assert named == present


def test_the_rule_sees_a_stale_name():
    assert _stale("format/views.py") is None and _stale("read/chain.records_format") is None
    assert _stale("toolkit.places") is None and _stale("RepoArchive.history_entries") is None
    assert _stale("format/gone.py") == "no file or folder ['format/gone.py']"
    assert _stale("read/chain.view_format") == "read/chain defines no view_format"
    assert _stale("ViewServer") == "nothing defines ViewServer" and _stale("Blob", python=False) is None
    assert _stale("RepoArchive.view_entries") == "nothing defines RepoArchive.view_entries"
    assert _stale("tests/archive/{format,nothing}/") == "no file or folder ['tests/archive/nothing/']"


def test_the_tables_keep_their_columns():
    """No cell of a table spills into the gap between its columns (reStructuredText then drops the table)."""
    lines, spilled, gaps = DOC.read_text().splitlines(), [], None
    for number, line in enumerate(lines, 1):
        if re.fullmatch(r"=+( +=+)+", line):
            edges = [m.span() for m in re.finditer(r"=+", line)]
            gaps = [(a[1], b[0]) for a, b in zip(edges, edges[1:])]
            continue
        if not line.strip():
            gaps = None  # a table ends at its last border and the blank line after it
        if gaps and any(line[start:end].strip() for start, end in gaps):
            spilled.append(number)
    assert spilled == []
