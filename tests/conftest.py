"""Shared fixtures: the real peers (reference zs 0.10.0, icechunk 1.x and 2.x) installed by scripts/dev."""

from __future__ import annotations

import os
import sys
import warnings
from pathlib import Path

import pytest

pytest.register_assert_rewrite("agreement")

# No test may reach a cloud instance-metadata service when it looks for credentials: every test
# sets credentials or anonymous access itself, and the metadata address points at a closed port.
os.environ["AWS_EC2_METADATA_DISABLED"] = "true"
os.environ["AWS_METADATA_ENDPOINT"] = "http://127.0.0.1:9"

ROOT = Path(__file__).resolve().parent.parent
PEERS = Path(os.environ.get("ZSARCHIVE_PEERS", ROOT / ".peers"))
TESTDATA = ROOT / "testdata"


def peers_required() -> bool:
    """True in CI and under ``scripts/dev test``: there every peer is installed, so a missing one is
    a broken install, not a machine without the peer."""
    return (os.environ.get("CI", "").lower() in ("1", "true", "yes")
            or os.environ.get("ZSARCHIVE_REQUIRE_PEERS", "") == "1")


def require_peer(path: Path, what: str) -> Path:
    """``path`` if the peer ``what`` is installed there; else fail (CI, ``scripts/dev test``) or skip
    loudly (elsewhere), naming the peer either way."""
    if not path.exists():
        msg = (f"PEER MISSING: {what} is not installed at {path}; run scripts/dev setup. "
               "This machine lacks its interpreter or the install failed.")
        if peers_required():
            pytest.fail(msg, pytrace=False)
        warnings.warn(msg)
        print(msg, file=sys.stderr)
        pytest.skip(msg)
    return path


@pytest.fixture(scope="session")
def reference_zs() -> Path:
    """The reference ``zs`` 0.10.0 command (Python 3.6 venv)."""
    return require_peer(PEERS / "zs36" / "bin" / "zs", "reference zs 0.10.0")


@pytest.fixture(scope="session")
def reference_python() -> Path:
    """Python 3.6 with the reference ``zs`` package importable."""
    require_peer(PEERS / "zs36" / "bin" / "zs", "reference zs 0.10.0")
    return PEERS / "zs36" / "bin" / "python"


@pytest.fixture(scope="session")
def icechunk1_python() -> Path:
    """Python 3.11 with icechunk 1.1.x, zarr 3 and numpy."""
    return require_peer(PEERS / "ic1" / "bin" / "python", "icechunk 1.1 (Python 3.11)")


@pytest.fixture(scope="session")
def icechunk2_python() -> Path:
    """Python 3.12 with icechunk 2.x, zarr 3, numpy and xarray."""
    return require_peer(PEERS / "ic2" / "bin" / "python", "icechunk 2.x (Python 3.12)")


@pytest.fixture(scope="session")
def refs_history(icechunk2_python, tmp_path_factory) -> Path:
    """A repository icechunk 2.x wrote with every kind of chunk ref (toolkit.peers.REFS_HISTORY)."""
    from toolkit.peers import refs_history as write

    return write(icechunk2_python, tmp_path_factory.mktemp("refs-history") / "repo")


def pytest_addoption(parser):
    parser.addoption("--seeds", type=int, default=0, metavar="N",
                     help="test_differential.py: also run N fresh random seeds per icechunk version")
