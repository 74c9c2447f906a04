"""The archive package's import rules, read from the source: its sub-packages import one way
(format <- read <- write <- backup, and format/read <- zarrstore), reading never imports writing, and no two
modules import each other, directly or round a longer loop (imports inside functions count)."""

from __future__ import annotations

import ast
from pathlib import Path

import zsarchive.archive
from toolkit.imports import imported_names

PACKAGE = Path(zsarchive.archive.__file__).parent
ALLOWED = {
    "format": set(),
    "read": {"format"},
    "write": {"format", "read"},
    "zarrstore": {"format", "read"},
    "backup": {"format", "read", "write"},
}
"""The sub-packages each sub-package may import besides itself."""


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> set[str]:
    """Every ``zsarchive.archive`` module ``path`` imports, at its top or inside a function."""
    modules = {_module_name(p) for p in PACKAGE.rglob("*.py")}
    return {name for name in imported_names(path) if name in modules and name != "zsarchive.archive"}


def _graph() -> dict[str, set[str]]:
    return {_module_name(p): _imports(p) for p in PACKAGE.rglob("*.py")}


def _subpackage(module: str) -> str | None:
    parts = module.split(".")
    return parts[2] if len(parts) > 3 or (len(parts) == 3 and parts[2] in ALLOWED) else None


def test_every_module_lives_in_a_sub_package():
    loose = sorted(p.name for p in PACKAGE.glob("*.py") if p.name != "__init__.py")
    assert loose == []
    assert {p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").exists()} == set(ALLOWED)


def test_sub_packages_import_one_way():
    wrong = []
    for module, imported in _graph().items():
        source = _subpackage(module)
        if source is None:
            continue
        for target in imported:
            dest = _subpackage(target)
            if dest is not None and dest != source and dest not in ALLOWED[source]:
                wrong.append(f"{module} imports {target}")
    assert wrong == []


def test_reading_never_imports_writing():
    assert [
        (m, i)
        for m, imported in _graph().items()
        if ".read" in m
        for i in imported
        if i.startswith("zsarchive.archive.write")
    ] == []


def test_no_module_imports_round_a_loop():
    graph = _graph()
    state: dict[str, int] = {}
    loops = []

    def visit(module: str, path: list[str]) -> None:
        state[module] = 1
        for target in sorted(graph.get(module, ())):
            if state.get(target) == 1:
                loops.append(path[path.index(target) :] + [target])
            elif target not in state:
                visit(target, path + [target])
        state[module] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module, [module])
    assert loops == []


def test_the_rules_see_imports_inside_functions(tmp_path):
    # the checker itself: a function-level import counts, so a lazy import cannot hide a loop
    source = tmp_path / "m.py"
    source.write_text("def f():\n    from zsarchive.archive.write.exporter import export\n")
    assert "zsarchive.archive.write.exporter" in _imports(source)


RECORD_NAMES = {"k", "key", "value", "v", "tx", "rec", "header", "hdr"}
"""Names the readers give a record's key, value or bytes."""
VIEW_RULE_SCOPE = ("archive/read", "archive/write", "archive/zarrstore", "restore", "views", "cli")
"""Where records are read through the named views of ``archive/format/views.py``, never by position."""


def _positional(tree: ast.AST) -> list[tuple[int, str]]:
    """``(line, text)`` of each subscript of a record name by a constant integer (``key[0]``, ``v[-1]``)
    or a slice with a constant bound (``value[:4]``; of a key or value, not of a record's bytes)."""
    found = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id in RECORD_NAMES):
            continue
        index = node.slice
        if isinstance(index, ast.UnaryOp) and isinstance(index.op, ast.USub):
            index = index.operand
        constant = isinstance(index, ast.Constant) and isinstance(index.value, int)
        sliced = (
            isinstance(index, ast.Slice)
            and node.value.id != "rec"
            and any(isinstance(b, ast.Constant) for b in (index.lower, index.upper))
        )
        if constant or sliced:
            found.append((node.lineno, ast.unparse(node)))
    return found


def test_records_are_read_by_name_outside_format():
    root = PACKAGE.parent
    found = [
        f"{path.relative_to(root.parent)}:{line}: {text}"
        for scope in VIEW_RULE_SCOPE
        for path in sorted((root / scope).rglob("*.py"))
        for line, text in _positional(ast.parse(path.read_text(), str(path)))
    ]
    assert found == []


def test_the_record_rule_sees_positional_indexing():
    # the checker itself: each spelling the rule forbids is found, names and other subscripts are not
    source = "key[0]; v[-1]; value[:4]; tx[10]; rec[1]; key.node_id; rows[0]; rec[:1]; key[:n]"
    assert [text for _, text in _positional(ast.parse(source))] == ["key[0]", "v[-1]", "value[:4]", "tx[10]", "rec[1]"]


CONTRACT_RULE_SCOPE = VIEW_RULE_SCOPE
"""Where the archive's byte layouts, type codes and format versions are never spelled: ``archive/format/``
decides them, next to the views."""
VERSION_NAMES = {"format_version", "records_format"}
"""Names holding an archive's format version: asked of ``format/`` (``has_chunk_pieces(v)``), never compared."""
CODE_NAMES = {"kind", "kinds", "node_type", "code", "version"}
"""Names holding a type code or a record version: compared with the constants of ``format/``, never literals."""
ENUMS = {"RefKind", "NodeType"}


def _name(node: ast.AST) -> str | None:
    return node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else None


def _int_literal(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and type(node.value) is int


def _contract_leaks(tree: ast.AST) -> list[tuple[int, str]]:
    """``(line, text)`` of each format decision spelled outside ``format/``: an ordering comparison of a
    format version or its comparison with a literal, a type code or record version compared with a literal,
    a bytes literal holding a control byte (a tuple's type codes), and a map between codes and
    ``RefKind``/``NodeType`` members (``format/views.py`` holds the one map of each)."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            names = {_name(o) for o in operands}
            if names & VERSION_NAMES and (
                any(isinstance(op, (ast.Lt, ast.LtE, ast.Gt, ast.GtE)) for op in node.ops)
                or any(map(_int_literal, operands))
            ):
                found.append((node.lineno, ast.unparse(node)))
            elif names & CODE_NAMES and any(map(_int_literal, operands)):
                found.append((node.lineno, ast.unparse(node)))
        elif isinstance(node, ast.Constant) and isinstance(node.value, bytes):
            if any(b < 0x20 and b not in b"\t\n\r" for b in node.value):
                found.append((node.lineno, repr(node.value)))
        elif isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values):
                pair = (key, value)
                if any(
                    _int_literal(p) or isinstance(p, ast.Attribute) and _name(p.value) == "schema" for p in pair
                ) and any(isinstance(p, ast.Attribute) and _name(p.value) in ENUMS for p in pair):
                    found.append((node.lineno, ast.unparse(node)))
                    break
    return found


def test_the_record_contract_stays_in_format():
    root = PACKAGE.parent
    found = [
        f"{path.relative_to(root.parent)}:{line}: {text}"
        for scope in CONTRACT_RULE_SCOPE
        for path in sorted((root / scope).rglob("*.py"))
        for line, text in _contract_leaks(ast.parse(path.read_text(), str(path)))
    ]
    assert found == []


def test_the_contract_rule_sees_each_leak():
    # the checker itself: each spelling the rule forbids is found, the named forms are not
    source = (
        "r.format_version >= 3; records_format == 5; value.kind == 2; kinds != 0; version == 2; b'\\x05'; "
        "{0: NodeType.GROUP}; {RefKind.INLINE: 0}; {schema.GROUP: NodeType.GROUP}; has_chunk_pieces(r.format_version); "
        "value.kind == schema.INLINE; a.format_version == b.format_version; b'a\\n'; {0: 'x'}"
    )
    assert [text for _, text in _contract_leaks(ast.parse(source))] == [
        "r.format_version >= 3",
        "records_format == 5",
        "value.kind == 2",
        "kinds != 0",
        "version == 2",
        "b'\\x05'",
        "{0: NodeType.GROUP}",
        "{RefKind.INLINE: 0}",
        "{schema.GROUP: NodeType.GROUP}",
    ]
