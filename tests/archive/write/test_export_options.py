"""export() takes one ExportOptions, or its fields as keyword arguments: the same archive either way."""

from __future__ import annotations

import pytest

from toolkit.oracle import repo_path
from zsarchive.archive import ExportOptions, export
from zsarchive.errors import ZSError


def test_options_and_keywords_write_the_same_archive(tmp_path):
    by_options, by_keywords = tmp_path / "options.zs", tmp_path / "keywords.zs"
    export(repo_path(2), by_options, ExportOptions(codec="none", include_chunks=True, export_time=7))
    export(repo_path(2), by_keywords, codec="none", include_chunks=True, export_time=7)
    assert by_options.read_bytes() == by_keywords.read_bytes()


def test_options_and_keywords_together_are_refused(tmp_path):
    with pytest.raises(ZSError, match="not both"):
        export(repo_path(2), tmp_path / "a.zs", ExportOptions(), codec="none")
    assert not (tmp_path / "a.zs").exists()


def test_an_unknown_codec_is_one_error_before_anything_is_read(tmp_path):
    with pytest.raises(ZSError, match="unknown codec 'nope'"):
        export(tmp_path / "no such repository", tmp_path / "a.zs", codec="nope")
