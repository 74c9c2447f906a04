"""Progress bars: one helper draws every command's (zsarchive/cli/text.py), on stderr, only when stderr is a
terminal (tests/zs/test_validate.py runs validate, dump and make on a pseudo-terminal and into a pipe)."""

from __future__ import annotations

import ast
from pathlib import Path

import zsarchive

PACKAGE = Path(zsarchive.__file__).parent


def test_only_the_helper_makes_a_progress_bar():
    makers = [
        f"{path.relative_to(PACKAGE.parent)}:{node.lineno}"
        for path in sorted(PACKAGE.rglob("*.py"))
        if path != PACKAGE / "cli" / "text.py"
        for node in ast.walk(ast.parse(path.read_text(), str(path)))
        if isinstance(node, ast.Attribute) and node.attr == "progressbar"
    ]
    assert makers == []
