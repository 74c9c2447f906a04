"""A run that lacks a peer cannot pass: in CI (and under ``scripts/dev test``) a missing peer fails the
tests that need it, naming the peer; elsewhere those tests skip, loudly."""

from __future__ import annotations

import os
import subprocess
import sys

from toolkit.places import ROOT

INTEROP = ["tests/zs/test_interop_reader.py", "tests/system/test_differential.py"]


def _pytest(env: dict, *args: str) -> subprocess.CompletedProcess:
    """pytest in a fresh process on ``args`` with the peers hidden, CI variables from ``env`` only."""
    base = {k: v for k, v in os.environ.items() if k not in ("CI", "ZSARCHIVE_REQUIRE_PEERS")}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rfs", "-p", "no:cacheprovider", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=600,
        env={**base, "ZSARCHIVE_PEERS": "/nowhere", **env},
    )


def test_hidden_peers_fail_in_ci_naming_each_peer():
    done = _pytest({"CI": "true"}, *INTEROP)
    summary = done.stdout.strip().splitlines()[-1]
    assert done.returncode == 1, done.stdout[-3000:]
    assert " failed" in summary and "skipped" not in summary, summary
    for peer in ("reference zs 0.10.0", "icechunk 1.1", "icechunk 2.x"):
        assert f"PEER MISSING: {peer}" in done.stdout, done.stdout[-3000:]


def test_hidden_peer_fails_under_scripts_dev_test():
    done = _pytest({"ZSARCHIVE_REQUIRE_PEERS": "1"}, INTEROP[0], "-k", "dump")
    assert done.returncode == 1 and "PEER MISSING: reference zs 0.10.0" in done.stdout, done.stdout[-3000:]


def test_hidden_peer_skips_loudly_outside_ci():
    done = _pytest({}, INTEROP[0], "-k", "dump")
    summary = done.stdout.strip().splitlines()[-1]
    assert done.returncode == 0 and " skipped" in summary and "failed" not in summary, done.stdout[-3000:]
    assert "PEER MISSING: reference zs 0.10.0" in done.stderr + done.stdout
