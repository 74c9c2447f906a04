"""Every genuine archive passes ``zs validate``: its invariants (archive/read/invariants.py) hold for what
zsarchive's exporter writes from what icechunk wrote. The committed vectors of every format, exports of
the committed fixture repositories (spec V1 by icechunk 1.1, V2 by 2.3, V1 migrated by 2.3) and of
icechunk's own test repositories (written by icechunk 0.1 to 2.0: expired, split, migrated) with and
without chunk bytes, and a fragment over one; the random repositories of the differential test are
validated there."""

from __future__ import annotations

import pytest

from toolkit.cli import run_zs
from toolkit.places import TESTDATA
from zsarchive.archive import export

VECTORS = sorted((TESTDATA / "archive").glob("v*/archive.zs"))
FIXTURES = [TESTDATA / "icechunk" / name for name in ("v1", "v1-migrated", "v2")] + sorted(
    p for p in (TESTDATA / "icechunk-tests").iterdir() if p.is_dir()
)


def looks_good(path) -> None:
    done = run_zs("validate", str(path), timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "looks good!", (path, done.stderr)


@pytest.mark.parametrize("vector", VECTORS, ids=lambda p: p.parent.name)
def test_every_committed_vector_is_valid(vector):
    looks_good(vector)


@pytest.mark.parametrize("fixture", FIXTURES, ids=lambda p: p.name)
@pytest.mark.parametrize("include_chunks", [False, True], ids=["refs", "chunks"])
def test_every_export_of_the_fixture_repositories_is_valid(tmp_path, fixture, include_chunks):
    export(fixture, tmp_path / "a.zs", include_chunks=include_chunks)
    looks_good(tmp_path / "a.zs")


def test_a_fragment_and_its_base_are_valid(tmp_path):
    export(TESTDATA / "icechunk" / "v2", tmp_path / "base.zs", include_chunks=True, export_time=1)
    export(
        TESTDATA / "icechunk" / "v2",
        tmp_path / "fragment.zs",
        include_chunks=True,
        export_time=2,
        base=tmp_path / "base.zs",
    )
    looks_good(tmp_path / "fragment.zs")
