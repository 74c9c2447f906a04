"""What a source file imports, read from its syntax tree: the layer tests hold the package's import
rules with it."""

from __future__ import annotations

import ast
from pathlib import Path


def imported_names(path: Path) -> set[str]:
    """Every absolute import of ``path``, at its top or inside a function: each module imported, and
    for ``from M import x`` both ``M`` and ``M.x`` (``x`` may be a module)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found |= {f"{node.module}.{alias.name}" for alias in node.names} | {node.module}
    return found
