"""Where the clone, its test data and the installed peers are, and what a missing peer means."""

from __future__ import annotations

import importlib.util
import os
import sys
import warnings
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PEERS = Path(os.environ.get("ZSARCHIVE_PEERS", ROOT / ".peers"))
TESTDATA = ROOT / "testdata"
SCRIPTS = ROOT / "scripts"


def peers_required() -> bool:
    """True in CI and under ``scripts/dev test``: there every peer is installed, so a missing one is
    a broken install, not a machine without the peer."""
    return (
        os.environ.get("CI", "").lower() in ("1", "true", "yes") or os.environ.get("ZSARCHIVE_REQUIRE_PEERS", "") == "1"
    )


def require_peer(path: Path, what: str) -> Path:
    """``path`` if the peer ``what`` is installed there; else fail (CI, ``scripts/dev test``) or skip
    loudly (elsewhere), naming the peer either way."""
    if not path.exists():
        msg = (
            f"PEER MISSING: {what} is not installed at {path}; run scripts/dev setup. "
            "This machine lacks its interpreter or the install failed."
        )
        if peers_required():
            pytest.fail(msg, pytrace=False)
        warnings.warn(msg)
        print(msg, file=sys.stderr)
        pytest.skip(msg)
    return path


def load_module(path: Path):
    """The Python file ``path`` (a script or the docs' decoder, not an installed module) loaded as a
    module named for its file."""
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[path.stem] = module  # dataclasses and pickling look their module up by name
    spec.loader.exec_module(module)
    return module
