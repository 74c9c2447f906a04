"""Errors are told apart by their classes, never by their text: no module compares a class's name, and
the I/O layer never parses an error's message, but in ``describe`` (io/objects.py), which reads an object
store's own error code and the status of obstore's generic errors, for which obstore has no class."""

from __future__ import annotations

import ast
from pathlib import Path

import obstore
import pytest
from obstore.store import LocalStore

import zsarchive
from zsarchive.io.objects import NO_OBJECT, ObjectStoreError, describe, is_missing

PACKAGE = Path(zsarchive.__file__).parent


def _class_names_compared(tree: ast.AST) -> list[tuple[int, str]]:
    """``type(x).__name__ == "..."`` and the like: a class told by its name."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            for operand in (node.left, *node.comparators):
                if isinstance(operand, ast.Attribute) and operand.attr == "__name__":
                    found.append((node.lineno, ast.unparse(node)))
                    break
    return found


def _messages_parsed(tree: ast.AST) -> list[tuple[int, str]]:
    """``str(exc).endswith(...)``, ``"..." in str(exc)``: an error's message read for its meaning."""

    def is_str_call(node: ast.AST) -> bool:
        return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "str"

    found = []
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("startswith", "endswith")
            and is_str_call(node.func.value)
        ):
            found.append((node.lineno, ast.unparse(node)))
        elif (
            isinstance(node, ast.Compare)
            and any(isinstance(op, (ast.In, ast.NotIn)) for op in node.ops)
            and any(map(is_str_call, node.comparators))
        ):
            found.append((node.lineno, ast.unparse(node)))
    return found


def _functions_outside(tree: ast.Module, allowed: set[str]) -> ast.Module:
    """The module without the top-level functions named in ``allowed``."""
    return ast.Module([n for n in tree.body if not (isinstance(n, ast.FunctionDef) and n.name in allowed)], [])


def test_no_class_is_told_by_its_name():
    found = [
        f"{path.relative_to(PACKAGE.parent)}:{line}: {text}"
        for path in sorted(PACKAGE.rglob("*.py"))
        if "generated" not in path.parts
        for line, text in _class_names_compared(ast.parse(path.read_text(), str(path)))
    ]
    assert found == []


def test_the_io_layer_reads_no_error_message_but_an_object_stores():
    found = [
        f"{path.relative_to(PACKAGE.parent)}:{line}: {text}"
        for path in sorted((PACKAGE / "io").glob("*.py"))
        for line, text in _messages_parsed(
            _functions_outside(
                ast.parse(path.read_text(), str(path)), {"describe"} if path.name == "objects.py" else set()
            )
        )
    ]
    assert found == []


def test_the_rules_see_what_they_forbid():
    source = (
        'type(e).__name__ == "X"; e.__class__.__name__ in ("A",); str(e).endswith(": x"); "x" in str(e); e.cause == 1'
    )
    tree = ast.parse(source)
    assert [text for _, text in _class_names_compared(tree)] == [
        "type(e).__name__ == 'X'",
        "e.__class__.__name__ in ('A',)",
    ]
    assert [text for _, text in _messages_parsed(tree)] == ["str(e).endswith(': x')", "'x' in str(e)"]


def test_obstores_own_classes_decide_the_cause(tmp_path):
    """A missing object on a real store (obstore's local one) is a missing object by its class."""
    store = LocalStore(str(tmp_path))
    with pytest.raises(Exception) as caught:
        obstore.get(store, "nothing-here")
    error = describe(caught.value, "file:///x/nothing-here")
    assert isinstance(error, ObjectStoreError) and error.cause == NO_OBJECT
    assert str(error) == "file:///x/nothing-here: no such object" and is_missing(caught.value)
    assert not is_missing(ValueError("status code: 404"))  # a message alone does not make a missing object
