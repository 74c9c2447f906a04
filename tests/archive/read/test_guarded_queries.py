"""Every query of an archive fails only with a ZSError, whatever the archive holds: each public method of
``ArchiveReader`` and of every class built on it is guarded by construction, so a query added later
cannot be left out (a hand-kept list once missed ``chain``)."""

from __future__ import annotations

import inspect

import pytest

from toolkit.places import TESTDATA
from zsarchive.archive import RepoArchive
from zsarchive.archive.read.reader import ArchiveReader
from zsarchive.errors import ZSCorrupt


def test_every_public_method_is_guarded():
    for cls in (ArchiveReader, RepoArchive):
        unguarded = [
            name
            for name, method in inspect.getmembers(cls, inspect.isfunction)
            if not name.startswith("_") and not getattr(method, "guarded", False)
        ]
        assert unguarded == [], cls


def test_a_query_added_later_is_guarded_too():
    class Later(RepoArchive):
        def first_ref(self):
            return self.refs()["branches"][42]  # a record of the wrong shape raises as this does

        def streamed(self):
            yield from ()
            raise IndexError("a malformed record, met while the answer streams")

    with Later(TESTDATA / "archive" / "v6" / "archive.zs") as archive:
        with pytest.raises(ZSCorrupt, match=r"archive\.zs: a record of the wrong shape \((KeyError|TypeError)"):
            archive.first_ref()
        with pytest.raises(ZSCorrupt, match=r"a record of the wrong shape \(IndexError"):
            list(archive.streamed())
        assert len(archive.chain()) == 1
