"""The archive's web page in a browser, as the tests read it: its tables and graph as text, the repository with
hostile names that must stay text, and the command line's ``--json`` answers the page is held to."""

from __future__ import annotations

import json

from click.testing import CliRunner

from toolkit.oracle import CLEAN_EXIT
from zsarchive.cli import main

HOSTILE = "<img src=x onerror=alert(1)>"
HOSTILE_SCRIPT = """
import sys, icechunk as ic, numpy as np, zarr
repo = ic.Repository.create(ic.local_filesystem_storage(sys.argv[1]))
s = repo.writable_session("main")
root = zarr.group(store=s.store, attributes={"<script>window.pwned = 1</script>": "<svg onload=alert(2)>"})
group = root.create_group(%(name)r, attributes={"title": "<img src=y onerror=window.pwned=3>"})
array = group.create_array("<svg onload=window.pwned=4>", shape=(6,), chunks=(2,), dtype="i4", fill_value=0,
                           dimension_names=["<b>x</b>"])
array[:] = np.arange(6)
s.commit("<img src=z onerror=window.pwned=5> first", metadata={"<i>author</i>": "<script>alert(6)</script>"})
s = repo.writable_session("main")
array = zarr.open_array(store=s.store, path=%(name)r + "/<svg onload=window.pwned=4>")
array[2:4] = 7
s.commit("<script>window.pwned = 7</script>")
repo.create_tag("<b>tag</b>", repo.lookup_branch("main"))
""" % {"name": HOSTILE} + CLEAN_EXIT
"""Runs under icechunk 2.x: ``PATH`` writes a repository whose names, messages, metadata and attributes are
markup and script."""


def zs_json(*args) -> list[dict]:
    """``zs ARGS --json``: its lines (run in this process)."""
    result = CliRunner().invoke(main, [str(a) for a in args] + ["--json"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return [json.loads(line) for line in result.output.splitlines()]


def table(page, selector: str) -> list[list[str]]:
    """The rows of a table of the page, as the text of their cells."""
    return page.eval_on_selector_all(f"{selector} tbody tr",
                                     "rows => rows.map(r => Array.from(r.cells, c => c.textContent))")


def graph_rows(page) -> list[dict]:
    """The snapshots of the page's branch graph: id, ref names, message and time, as shown."""
    return page.eval_on_selector_all(".graph-line[data-id]", """rows => rows.map(r => ({
        id: r.dataset.id, refs: Array.from(r.querySelectorAll('button.ref'), b => b.textContent),
        message: r.querySelector('.message').textContent, time: r.querySelector('.time').textContent}))""")


def wait_commits(page, ref: str, since: str = "", until: str = "") -> None:
    """Until the commits table shows REF's commits in [since, until] (the page marks what it shows)."""
    page.wait_for_selector(f'#commits[data-ref="{ref}"][data-since="{since}"][data-until="{until}"]',
                           state="attached")


def log_rows(rows: list[dict]) -> list[list[str]]:
    """``zs log --json`` rows as the page's commit tables show them."""
    return [[r["id"], r["flushed_at"], r["message"]] for r in rows]
