"""git's way of naming commits in every REF: ``main~3``, ``main^^``, ``tag:v1.0~1``, with ``@TIME`` applied in
the order written, names holding ``~``, ``^`` or ``@`` themselves, and one-line errors beyond the first commit."""

from __future__ import annotations

import pytest

from toolkit.oracle import oracle, repo_path
from toolkit.cli import one_line_error, run_zs
from zsarchive import open_store
from zsarchive.archive import NotFound, RepoArchive, export, parse_ref
from zsarchive.archive.format import schema as S
from zsarchive.archive.read.refspec import ref_readings
from zsarchive.errors import ZSError
from zsarchive.times import parse_time
from zsarchive.zs.writer import ZSWriter


@pytest.fixture(scope="module")
def fixture_archive(tmp_path_factory):
    path = tmp_path_factory.mktemp("refs") / "v2.zs"
    export(repo_path(2), path, export_time=1)
    return path


@pytest.fixture(scope="module")
def answers(icechunk2_python):
    return oracle(2, icechunk2_python)


def test_parse_reads_suffixes_left_to_right():
    spec = parse_ref("tag:v1.0@2026-11-22T01:00:00Z~2^")
    assert (spec.kind, spec.name) == ("tag", "v1.0")
    assert spec.steps == (("@", parse_time("2026-11-22T01:00:00Z")), ("~", 2), ("~", 1))
    assert parse_ref("main~2@2026-11-22").steps == (("~", 2), ("@", parse_time("2026-11-22", end_of_day=True)))
    assert parse_ref("main^0").steps == () and parse_ref("main~0").steps == ()
    assert parse_ref("main~").steps == (("~", 1),)
    assert parse_ref("feature:x~1").name == "feature:x"  # not a known kind: part of the name
    assert parse_ref("main~" + "9" * 40).steps == (("~", 10**18),)  # any depth past every history
    with pytest.raises(ZSError, match=r"one parent, so \^2 names none"):
        parse_ref("main^2")
    with pytest.raises(ZSError, match="no name"):
        parse_ref("branch:~1")


def test_every_split_of_a_name_holding_suffix_characters_is_a_reading():
    assert ref_readings("a@b~1") == [("a@b~1", ""), ("a@b", "~1"), ("a", "@b~1")]
    assert ref_readings("x~y") == [("x~y", "")]  # "~y" is no suffix
    assert ref_readings("~1") == [("~1", "")]  # a name is never empty
    assert len(ref_readings("m" + "~" * 50_000)) == 50_001  # one pass from the end, however long


def test_every_parent_count_to_the_first_commit_is_icechunks_ancestry(fixture_archive, answers):
    with RepoArchive(fixture_archive) as archive:
        for ref, history in answers["ancestry"].items():
            ids = [s["id"] for s in history]
            for n, sid in enumerate(ids):
                assert archive.resolve(f"{ref}~{n}") == sid
                assert archive.resolve(f"snapshot:{ids[0]}~{n}") == sid
            assert archive.resolve(ref + "^" * min(3, len(ids) - 1)) == ids[min(3, len(ids) - 1)]
            with pytest.raises(NotFound) as beyond:
                archive.resolve(f"{ref}~{len(ids)}")
            message = str(beyond.value)
            assert f"holds {len(ids)} snapshot" in message and f"{ref}~{len(ids) - 1} is its first" in message


def test_time_and_parents_apply_in_the_order_written(fixture_archive, answers):
    history = answers["ancestry"]["branch:main"]
    when = history[3]["written_at"]  # the snapshot 3 back was flushed exactly then
    with RepoArchive(fixture_archive) as archive:
        assert archive.resolve(f"main@{when}") == history[3]["id"]
        assert archive.resolve(f"main@{when}~2") == history[5]["id"]
        assert archive.resolve(f"main~2@{when}") == history[3]["id"]  # in main~2's history, at that time
        assert archive.resolve(f"main~4@{when}") == history[4]["id"]  # already older than the time
        assert archive.resolve(f"main^^@{when}~") == history[4]["id"]


def test_commands_and_the_store_take_the_names(fixture_archive, answers):
    history = answers["ancestry"]["tag:v1.0"]
    proc = run_zs("log", str(fixture_archive), "tag:v1.0~1", "-n", "1", "--json")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count("\n") == 1 and history[1]["id"] in proc.stdout
    store = open_store(str(fixture_archive), ref="main^")
    assert store.snapshot_id == answers["ancestry"]["branch:main"][1]["id"]


def test_errors_beyond_the_root_and_unknown_names_stay_one_line(fixture_archive, answers):
    depth = len(answers["ancestry"]["branch:main"])
    one_line_error(
        run_zs("log", str(fixture_archive), f"main~{depth}"),
        f"main~{depth} is beyond the first commit: the history of main holds {depth} snapshots",
    )
    one_line_error(run_zs("ls", str(fixture_archive), "mian~2"), "did you mean 'main'?")
    one_line_error(run_zs("ls", str(fixture_archive), "tag:doomed-tag~1"), "tag 'doomed-tag' was deleted")
    one_line_error(run_zs("ls", str(fixture_archive), "main@yesterday~1"), "bad time 'yesterday'")


def _archive_with_refs(path, refs: dict[str, str], snapshots: dict[str, str | None]):
    records = [S.record(S.REFS, ("branch", name), (sid,)) for name, sid in refs.items()]
    records += [
        S.record(S.SNAPSHOT, (sid,), (parent, 1_000_000 * i, f"m{i}", "{}", ()))
        for i, (sid, parent) in enumerate(snapshots.items())
    ]
    records += [S.record(S.SNAPSHOT_TIME, (1_000_000 * i, sid), ()) for i, sid in enumerate(snapshots)]
    records.append(S.record(S.HEADER, (), (2, 2, 0, "test", ())))
    with ZSWriter(str(path), {S.METADATA_KEY: {"format_version": 2}}, codec="none") as writer:
        writer.add_records(sorted(records))
        writer.finish()
    return path


def test_a_name_holding_suffix_characters_wins_over_reading_them(tmp_path):
    a, b, c = "A" * 20, "B" * 20, "C" * 20
    path = _archive_with_refs(tmp_path / "names.zs", {"main": c, "main~1": a, "x^": b}, {a: None, b: a, c: b})
    with RepoArchive(path) as archive:
        assert archive.resolve("main~1") == a  # the branch named so, not main's parent b
        assert archive.resolve("main~2") == a  # main's grandparent
        assert archive.resolve("x^") == b and archive.resolve("x^^") == a
        with pytest.raises(NotFound, match=r"the history of main~1 holds 1 snapshot \(main~1~0 is its first\)"):
            archive.resolve("main~1~1")  # the branch main~1, one parent back


def test_a_parent_the_archive_lacks_is_named(tmp_path):
    a, b = "A" * 20, "B" * 20
    path = _archive_with_refs(tmp_path / "cut.zs", {"main": b}, {b: a})  # a: expired, no record
    with RepoArchive(path) as archive, pytest.raises(NotFound) as missing:
        archive.resolve("main~1")
    assert f"names parent {a}, which the archive does not hold" in str(missing.value)
