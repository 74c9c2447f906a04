"""Shared fixtures: the real peers (reference zs 0.10.0, icechunk 1.x and 2.x) installed by scripts/dev."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

pytest.register_assert_rewrite("toolkit.agreement")

# No test may reach a cloud instance-metadata service when it looks for credentials: every test
# sets credentials or anonymous access itself, and the metadata address points at a closed port.
os.environ["AWS_EC2_METADATA_DISABLED"] = "true"
os.environ["AWS_METADATA_ENDPOINT"] = "http://127.0.0.1:9"

from toolkit.places import PEERS, require_peer  # noqa: E402  (after the assertion rewrite is registered)


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


@pytest.fixture(scope="session")
def grid_repository(icechunk2_python, tmp_path_factory) -> Path:
    """A repository icechunk 2.x wrote with 240 native chunk files (toolkit.peers.GRID)."""
    from toolkit.peers import grid

    return grid(icechunk2_python, tmp_path_factory.mktemp("grid") / "repo")


CHROMIUM = "/usr/bin/chromium"
BROWSER_ARGS = [
    "--no-sandbox",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-default-apps",
    "--disable-sync",
    "--no-first-run",
    "--disable-extensions",
]
"""Debian's chromium, with nothing of its own reaching the network: the tests' pages are its only traffic."""


@pytest.fixture(scope="module")
def browser():
    """Debian's chromium driven by Playwright (no browser is downloaded), one per test module.

    Playwright's sync API keeps its event loop marked running on the main thread while it is open, so the
    browser is closed with the module that used it: later tests may call ``asyncio.run``.
    """
    if not os.path.exists(CHROMIUM):
        pytest.fail(f"no {CHROMIUM}: scripts/dev installs Debian's chromium")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        launched = p.chromium.launch(executable_path=CHROMIUM, args=BROWSER_ARGS)
        yield launched
        launched.close()


def pytest_addoption(parser):
    parser.addoption(
        "--seeds",
        type=int,
        default=0,
        metavar="N",
        help="system/test_differential.py: also run N fresh random seeds per icechunk version",
    )
