"""Errors that say what to do next, outputs never overwritten silently, and one vocabulary between the
commands and the Python API: each message asserted exactly."""

from __future__ import annotations

import datetime as dt
import os
import subprocess
import sys

import pytest

from toolkit.oracle import fixtures, oracle, repo_path
from toolkit.cli import one_line_error, run_zs
from zsarchive.archive import NotFound, RepoArchive, export
from zsarchive.errors import ZSCorrupt, ZSError
from zsarchive.suggest import closest, closest_paths, hint


@pytest.fixture(scope="module")
def answers(icechunk2_python):
    return oracle(2, icechunk2_python)


@pytest.fixture(scope="module")
def archive_path(tmp_path_factory, answers):
    out = tmp_path_factory.mktemp("guidance") / "history.zs"
    export(repo_path(2), out)
    return out


# -- suggestions ---------------------------------------------------------------------------------


def test_closest_names_and_the_list_when_few():
    assert closest("mian", ["main", "dev", "scratch"]) == ["main"]
    assert closest("MAIN", ["main"]) == ["main"]
    assert hint("mian", ["main", "dev"], "branches") == "; did you mean 'main'?"
    assert hint("xyz", ["main", "dev"], "branches") == "; the branches are: dev, main"
    assert hint("xyz", [f"b{i}" for i in range(20)], "branches") == ""
    paths = ["/data", "/data/temperature", "/data/sub/virt", "/dotted"]
    assert closest_paths("/temperature", paths)[0] == "/data/temperature"
    assert closest_paths("/data/temprature", paths)[0] == "/data/temperature"


def test_wrong_ref_names_the_closest(archive_path):
    name = str(archive_path)
    assert (
        one_line_error(run_zs("log", name, "mian"))
        == f"zs: error: {name}: unknown branch, tag or snapshot 'mian'; did you mean 'main'?"
    )
    assert (
        one_line_error(run_zs("log", name, "branch:nope"))
        == f"zs: error: {name}: unknown branch 'nope'; the branches are: dev, main, scratch"
    )
    assert one_line_error(run_zs("log", name, "zzzz")) == (
        f"zs: error: {name}: unknown branch, tag or snapshot 'zzzz'; the branches and tags are: detached-tag, "
        "dev, main, scratch, v1.0, v1.1"
    )
    with RepoArchive(archive_path) as arc, pytest.raises(NotFound) as caught:
        arc.resolve("tag:v1")
    assert str(caught.value) == f"{name}: unknown tag 'v1'; did you mean 'v1.1' or 'v1.0'?"


def test_snapshot_ids_by_unique_prefix_and_in_lowercase(archive_path, answers):
    main = answers["branches"]["main"]
    with RepoArchive(archive_path) as arc:
        assert arc.resolve(main.lower()) == main
        assert arc.resolve(main[:8].lower()) == main
        assert arc.resolve(f"snapshot:{main[:6]}") == main
        ids = sorted(answers["snapshots"])
        shared = next((a[:4] for a, b in zip(ids, ids[1:]) if a[:4] == b[:4]), None)
        if shared is not None:
            with pytest.raises(NotFound, match=f"snapshot id prefix '{shared}' is ambiguous: "):
                arc.resolve(shared)
        with pytest.raises(NotFound, match="unknown branch, tag or snapshot 'FMY'"):
            arc.resolve("FMY")  # fewer than 4 characters is never read as a prefix


def test_wrong_path_names_the_closest_paths(archive_path):
    name = str(archive_path)
    assert (
        one_line_error(run_zs("chunk", name, "main", "data/temprature", "0,0"))
        == f"zs: error: {name}: no node '/data/temprature' at 'main'; did you mean '/data/temperature' or '/data/empty'?"
    )
    assert (
        one_line_error(run_zs("ls", name, "main", "temperature"))
        == f"zs: error: {name}: no node '/temperature' at 'main'; did you mean '/data/temperature'?"
    )


def test_wrong_number_of_coordinates(archive_path):
    name = str(archive_path)
    assert (
        one_line_error(run_zs("chunk", name, "main", "data/temperature", "0"))
        == f"zs: error: {name}: '/data/temperature' at 'main' has 2 dimensions and needs 2 coordinates, not 1 (0)"
    )
    assert one_line_error(run_zs("chunk", name, "main", "scalar", "0")) == (
        f"zs: error: {name}: '/scalar' at 'main' is a scalar (0 dimensions) and needs no coordinates, not 1 (0): "
        "() in Python, \"\" on the command line"
    )
    assert (
        one_line_error(run_zs("chunk", name, "main", "data/temperature", "9,0"))
        == f"zs: error: {name}: coords 9,0 are outside the chunk grid 3,2 of '/data/temperature' at 'main'"
    )


def test_python_caller_mistakes_are_usage_errors(archive_path):
    with RepoArchive(archive_path) as arc:
        for coords, message in (
            ("0,0", "coords must be a sequence of integers such as (0, 0), not the text '0,0'"),
            ([0, "a"], "coords must be integers >= 0, not [0, 'a']"),
            (7, "coords must be a sequence of integers such as (0, 0), not int"),
        ):
            with pytest.raises(ZSError) as caught:
                arc.chunk_ref("main", "data/temperature", coords)
            assert not isinstance(caught.value, ZSCorrupt) and str(caught.value) == message
        with pytest.raises(ZSError) as caught:
            arc.chunk_history("data/temperature", "0,0")
        assert not isinstance(caught.value, ZSCorrupt)
        with pytest.raises(ZSError) as caught:
            arc.chunk_data("main", "data/big", (0, 0))
        assert str(caught.value) == (
            "chunk 0,0 of '/data/big' at 'main' is native chunk "
            f"{arc.chunk_ref('main', 'data/big', (0, 0))['chunk_id']}, not embedded in the "
            "archive: give the repository (repo= in Python, --repo on the command line)"
        )


def test_repository_where_an_archive_belongs_and_the_reverse(archive_path, tmp_path):
    repo = str(repo_path(2))
    expected = (
        f"zs: error: {repo}: is an Icechunk repository, not an archive; make an archive of it first: "
        f"zs export {repo} OUT.zs"
    )
    assert one_line_error(run_zs("log", repo)) == expected
    assert one_line_error(run_zs("log", repo + "/repo")) == expected.replace(f"{repo}: is", f"{repo}/repo: is", 1)
    assert one_line_error(run_zs("log", str(repo_path(1)))).startswith(
        f"zs: error: {repo_path(1)}: is an Icechunk repository"
    )
    assert one_line_error(run_zs("export", repo, str(tmp_path / "x.zs"), "--base", repo)) == expected
    archive = str(archive_path)
    reverse = (
        f"zs: error: {archive}: is a ZS file (an archive?), not an Icechunk repository; give the directory "
        "or URL of the repository (an archive is read by zs log, ls, chunk ... and open_store)"
    )
    assert one_line_error(run_zs("export", archive, str(tmp_path / "y.zs"))) == reverse
    assert one_line_error(run_zs("chunk", archive, "main", "data/big", "0,0", "--data", "--repo", archive)) == reverse
    assert one_line_error(run_zs("export", repo, str(repo_path(1)))) == (
        f"zs: error: {repo_path(1)}: is an Icechunk repository, not a file to write; the archive is a new file: "
        "zs export REPO OUT.zs"
    )
    assert not (tmp_path / "x.zs").exists() and not (tmp_path / "y.zs").exists()


def test_diff_reversed_and_diff_of_one_snapshot(archive_path, answers):
    name = str(archive_path)
    assert one_line_error(run_zs("diff", name, "main", "tag:v1.0")) == (
        f"zs: error: {name}: cannot diff: 'main' is not in the history of 'tag:v1.0', but 'tag:v1.0' is in the "
        "history of 'main': swap them (FROM is the older: diff 'tag:v1.0' 'main')"
    )
    assert one_line_error(run_zs("diff", name, "dev", "main")) == (
        f"zs: error: {name}: cannot diff: 'dev' is not in the history of 'main' (nor the reverse): FROM must be an "
        "ancestor of TO"
    )
    with RepoArchive(archive_path) as arc:
        empty = arc.diff("main", answers["branches"]["main"])
    assert all(not value for value in empty.values()) and set(empty) == {
        "new_groups",
        "new_arrays",
        "deleted_groups",
        "deleted_arrays",
        "updated_groups",
        "updated_arrays",
        "updated_chunks",
        "moved_nodes",
    }


def test_authorize_refused_after_a_symlink_names_its_target(archive_path):
    prefix = fixtures()["virtual"]["prefix"]  # the oracle made it a symlink to this clone's virtual-data
    link = prefix[len("file://") :].rstrip("/")
    parent, real = os.path.dirname(link), os.path.realpath(link)
    assert real != link and not os.path.islink(parent)
    with RepoArchive(archive_path, authorize=[f"file://{parent}/"]) as arc:
        location = arc.chunk_ref("main", "data/sub/virt", (0,))["location"]
        with pytest.raises(ZSError) as caught:
            arc.chunk_data("main", "data/sub/virt", (0,))
    assert str(caught.value) == (
        f"chunk 0 of '/data/sub/virt' at 'main': virtual location {location!r} resolves to "
        f"{os.path.realpath(location[len('file://') :])!r} (through a symbolic link), which is not under an "
        f"authorized prefix; if that is intended, authorize it with authorize=['file://{real}/'] in Python, "
        f"--authorize file://{real}/ on the command line"
    )
    with RepoArchive(archive_path, authorize=[f"file://{real}/"]) as arc:
        assert arc.chunk_data("main", "data/sub/virt", (0,))


# -- no silent overwrite --------------------------------------------------------------------------


def test_export_consolidate_and_make_refuse_an_existing_output(tmp_path, archive_path):
    repo = str(repo_path(2))
    target = tmp_path / "history.zs"
    target.write_bytes(b"precious")
    message = f"zs: error: {target}: exists already; give a new name, or --force (overwrite=True) to replace it"
    assert one_line_error(run_zs("export", repo, str(target))) == message
    assert one_line_error(run_zs("consolidate", str(archive_path), str(target))) == message
    records = tmp_path / "records"
    records.write_text("a\nb\n")
    assert one_line_error(run_zs("make", "{}", str(records), str(target))) == message
    assert target.read_bytes() == b"precious"
    for args in (
        ("make", "{}", str(records), str(target)),
        ("export", repo, str(target)),
        ("consolidate", str(archive_path), str(target)),
    ):
        done = run_zs(*args, "--force")
        assert done.returncode == 0, done.stderr
        assert target.read_bytes()[:8] == b"\xabZSfiLe\x01"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["history.zs", "records"]  # no partial file left


def test_make_force_keeps_the_old_file_when_it_fails(tmp_path):
    target = tmp_path / "out.zs"
    target.write_bytes(b"old")
    records = tmp_path / "unsorted"
    records.write_text("b\na\n")
    assert one_line_error(run_zs("make", "{}", str(records), str(target), "--force")) == (
        "zs: error: records are not sorted: record 2 b'a' sorts before record 1 b'b' (records count from 1; input "
        "must be sorted bytewise)"
    )
    assert target.read_bytes() == b"old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.zs", "unsorted"]


# -- one vocabulary --------------------------------------------------------------------------------


def test_public_api_is_listed_and_named_like_the_commands(archive_path, answers):
    import zsarchive

    for name in (
        "RepoArchive",
        "export",
        "consolidate",
        "open_store",
        "ZS",
        "ZSWriter",
        "validate",
        "NotFound",
        "ZSError",
        "ZSCorrupt",
        "__version__",
    ):
        assert name in dir(zsarchive), name
        assert getattr(zsarchive, name) is not None
    assert zsarchive.NotFound is NotFound
    assert zsarchive.__version__ == __import__("importlib.metadata").metadata.version("zsarchive")
    with RepoArchive(archive_path) as arc:
        assert arc.chunk("main", "data/temperature", (0, 0)) == arc.chunk_ref("main", "data/temperature", (0, 0))
        assert list(arc.chunks("main", "data/big")) == list(arc.chunk_refs("main", "data/big"))
        assert arc.chunk_log("main", "data/temperature", (0, 0)) == arc.chunk_history(
            "data/temperature", (0, 0), ref="main"
        )
        assert arc.ops() == arc.ops_log()
        first = answers["ancestry"]["branch:main"][-1]["written_at"][:10]
        day = dt.date.fromisoformat(first)
        assert arc.log("main", since=day, until=day) == arc.log("main", since=first, until=first)
        assert arc.log("main", max_count=1) == arc.log("main")[:1]
    import inspect

    from zsarchive.archive.write.options import ExportOptions, WriteOptions  # export() and consolidate() take them
    from zsarchive.cli.consolidate import consolidate_command
    from zsarchive.cli.export import export_command

    for options, command in ((ExportOptions, export_command), (WriteOptions, consolidate_command)):
        default = inspect.signature(options).parameters["parallelism"].default
        assert default == next(p.default for p in command.params if p.name == "parallelism") == "guess"


def test_chunk_log_takes_ref_like_every_command(archive_path, answers):
    done = run_zs("chunk-log", str(archive_path), "main", "data/temperature", "0,0", "--json")
    assert done.returncode == 0, done.stderr
    with RepoArchive(archive_path) as arc:
        assert len(done.stdout.splitlines()) == len(arc.chunk_history("data/temperature", (0, 0), ref="main")) > 0


def test_help_groups_commands_and_cuts_no_sentence():
    done = run_zs("--help")
    assert done.returncode == 0
    text = done.stdout
    archives, engine = text.index("Icechunk archives:"), text.index("ZS files (as the reference zs):")
    assert archives < engine
    for command in ("export", "summary", "log", "diff", "chunk-log"):
        assert f"\n  {command} " in text[archives:engine], command
    for command in ("make", "dump", "info", "validate"):
        assert f"\n  {command} " in text[engine:], command
    assert "..." not in text[archives:]


def test_help_lists_every_command_without_importing_them():
    """``zs --help`` prints each command's own first sentence from a table, importing no command module;
    every command's own --help still works (each imports its module on first use)."""
    import click

    from zsarchive.cli import main

    names = main.list_commands(click.Context(main))
    script = (
        "import sys\nfrom zsarchive.cli import main\ntry:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
        "print(sorted(m for m in sys.modules if m.startswith(('zsarchive.cli.', 'zsarchive.archive'))), "
        "file=sys.stderr)"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert out.stderr.strip() == "['zsarchive.cli.app', 'zsarchive.cli.text']", out.stderr  # the group and its messages
    listed = " ".join(out.stdout.split())  # help wraps long lines
    for name in names:
        command = main.get_command(click.Context(main), name)
        assert main.summaries[name] == command.get_short_help_str(limit=1000), name
        assert f" {name} {main.summaries[name]}" in listed, name
        done = run_zs(name, "--help")
        assert done.returncode == 0 and f"Usage: python -m zsarchive {name} " in done.stdout, done.stderr
