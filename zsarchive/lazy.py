"""Lazy package exports: a command that reads one ZS file must not pay for importing the rest."""

from __future__ import annotations

import importlib
from typing import Any, Callable


def lazy_exports(package: str, names: dict[str, str]) -> Callable[[str], Any]:
    """Return a module ``__getattr__`` that imports ``names[attr]`` on first use.

    A value is a module path, or ``module:name`` when the attribute is called otherwise there.
    """

    def __getattr__(attr: str) -> Any:
        target = names.get(attr)
        if target is None:
            raise AttributeError(f"module {package!r} has no attribute {attr!r}")
        module, _, name = target.partition(":")
        return getattr(importlib.import_module(module), name or attr)

    return __getattr__
