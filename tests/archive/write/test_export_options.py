"""export() takes one ExportOptions, or its fields as keyword arguments: the same archive either way; the
library's writers refuse an existing target unless told to overwrite it, as the commands do."""

from __future__ import annotations

import pytest

from toolkit.oracle import repo_path
from zsarchive.archive import ExportOptions, consolidate, export
from zsarchive.errors import ZSError
from zsarchive.restore.checkout import checkout
from zsarchive.restore.repository import restore
from zsarchive.zs.writer import ZSWriter


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


def test_the_library_writers_refuse_an_existing_output_unless_told_to_overwrite(tmp_path):
    """export(), consolidate() and ZSWriter refuse an existing file as the commands do (a fragment over a
    silently replaced archive no longer opens); restore() and checkout() write only into an absent or
    empty target, never over one."""
    archive_path = tmp_path / "base.zs"
    export(repo_path(2), archive_path)
    target = tmp_path / "history.zs"
    target.write_bytes(b"precious")
    for write in (
        lambda **kw: export(repo_path(2), target, export_time=1, **kw),
        lambda **kw: consolidate(archive_path, target, **kw),
        lambda **kw: ZSWriter(target, {}, **kw).close(),
    ):
        with pytest.raises(ZSError, match="exists already; give a new name, or --force \\(overwrite=True\\)"):
            write()
        assert target.read_bytes() == b"precious"
    export(repo_path(2), target, export_time=1, overwrite=True)
    first = target.read_bytes()
    assert first[:8] == b"\xabZSfiLe\x01"
    consolidate(archive_path, target, overwrite=True)
    assert target.read_bytes()[:8] == b"\xabZSfiLe\x01" and target.read_bytes() != first
    occupied = tmp_path / "occupied"
    occupied.mkdir()
    (occupied / "keep").write_text("mine")
    with pytest.raises(ZSError, match="not empty"):
        restore(archive_path, occupied)
    with pytest.raises(ZSError, match="not empty"):
        checkout(archive_path, "main", occupied)
    assert [p.name for p in occupied.iterdir()] == ["keep"]
