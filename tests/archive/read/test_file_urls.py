"""Archives named by ``file://`` URLs with %-escapes (``file:///tmp/a%20b.zs``) read, chain and refuse
exactly as the same archives named by their paths: every location goes through io/location.py."""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import quote

import pytest

from toolkit.oracle import repo_path
from toolkit.cli import run_zs
from zsarchive.archive import RepoArchive, consolidate, export
from zsarchive.errors import ZSError


def _lines(text: str) -> list:
    return [json.loads(line) for line in text.splitlines()]


def _url(path: Path) -> str:
    return "file://" + quote(str(path.resolve()))


@pytest.fixture(scope="module")
def chain(tmp_path_factory):
    """(base, fragment) in a directory whose name and files need escaping in a URL."""
    directory = tmp_path_factory.mktemp("file-urls") / "with space %25"
    directory.mkdir()
    base, fragment = directory / "base b.zs", directory / "frag 100%.zs"
    export(repo_path(2), base)
    export(repo_path(2), fragment, base=base)
    return base, fragment


def test_zs_refs_reads_an_escaped_file_url_as_the_path(chain):
    base, _ = chain
    assert "%20" in _url(base)
    by_path, by_url = run_zs("refs", str(base), "--json"), run_zs("refs", _url(base), "--json")
    assert by_path.returncode == 0, by_path.stderr
    assert by_url.returncode == 0, by_url.stderr
    assert _lines(by_url.stdout) == _lines(by_path.stdout) != []


def test_a_fragment_named_by_an_escaped_url_finds_its_base(chain):
    _, fragment = chain
    with RepoArchive(_url(fragment)) as by_url, RepoArchive(fragment) as by_path:
        assert len(by_url.chain()) == 2
        assert by_url.refs() == by_path.refs()
    listed = run_zs("log", _url(fragment), "main")
    assert listed.returncode == 0, listed.stderr


def test_consolidating_over_a_chain_member_named_by_url_is_refused(chain, tmp_path):
    base, fragment = chain
    before = base.read_bytes()
    with pytest.raises(ZSError, match="exists already"):
        consolidate(_url(fragment), base)
    with pytest.raises(ZSError, match="is an archive of the chain"):  # even told to overwrite
        consolidate(_url(fragment), base, overwrite=True)
    assert base.read_bytes() == before
    out = tmp_path / "whole.zs"
    consolidate(_url(fragment), out)
    with RepoArchive(out) as whole, RepoArchive(base) as original:
        assert whole.refs() == original.refs()
