"""The archive's web page in a browser, as the tests read it: its tables and graph as text, the repository with
hostile names that must stay text, and the command line's ``--json`` answers the page is held to."""

from __future__ import annotations

import json

from click.testing import CliRunner

from toolkit.oracle import CLEAN_EXIT
from zsarchive.cli import main

HOSTILE = "<img src=x onerror=alert(1)>"
HOSTILE_SCRIPT = (
    """
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
"""
    % {"name": HOSTILE}
    + CLEAN_EXIT
)
"""Runs under icechunk 2.x: ``PATH`` writes a repository whose names, messages, metadata and attributes are
markup and script."""


def zs_json(*args) -> list[dict]:
    """``zs ARGS --json``: its lines (run in this process)."""
    result = CliRunner().invoke(main, [str(a) for a in args] + ["--json"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return [json.loads(line) for line in result.output.splitlines()]


def table(page, selector: str) -> list[list[str]]:
    """The rows of a table of the page, as the text of their cells."""
    return page.eval_on_selector_all(
        f"{selector} tbody tr", "rows => rows.map(r => Array.from(r.cells, c => c.textContent))"
    )


def graph_rows(page) -> list[dict]:
    """The snapshots of the page's branch graph: id, ref names, message and time, as shown."""
    return page.eval_on_selector_all(
        ".graph-line[data-id]",
        """rows => rows.map(r => ({
        id: r.dataset.id, refs: Array.from(r.querySelectorAll('button.ref'), b => b.textContent),
        message: r.querySelector('.message').textContent, time: r.querySelector('.time').textContent}))""",
    )


def wait_commits(page, ref: str, since: str = "", until: str = "") -> None:
    """Until the commits table shows REF's commits in [since, until] (the page marks what it shows)."""
    page.wait_for_selector(f'#commits[data-ref="{ref}"][data-since="{since}"][data-until="{until}"]', state="attached")


def log_rows(rows: list[dict]) -> list[list[str]]:
    """``zs log --json`` rows as the page's commit tables show them."""
    return [[r["id"], r["flushed_at"], r["message"]] for r in rows]


def assert_hostile_names_stay_text(page, dialogs: list[str], archive) -> None:
    """Click through the page of the HOSTILE_SCRIPT repository's archive (graph, refs, commits, changes, tree,
    heatmap, chunk history): every name, message, metadata and attribute shows as text, no dialog opens, no
    injected handler runs, and nothing from the archive becomes an element."""
    assert "<script>window.pwned = 7</script>" in page.text_content("#graph")
    tag = page.locator('#refs button[data-ref="tag:<b>tag</b>"]')
    assert tag.text_content() == "tag:<b>tag</b>"
    newest = zs_json("log", archive, "main")[0]
    assert newest["message"] == "<script>window.pwned = 7</script>"
    page.click(f'#commits button.commit[data-id="{newest["id"]}"]')
    page.wait_for_selector("#commit-section:not([hidden])")
    array_path = f"/{HOSTILE}/<svg onload=window.pwned=4>"
    assert page.text_content(f'#changes button.path[data-path="{array_path}"]') == array_path
    page.click("#tree-button")
    page.wait_for_selector("#tree-section:not([hidden])")
    paths = [row[0] for row in table(page, "#tree")]
    assert paths == ["/", f"/{HOSTILE}", array_path]
    attributes = [row[6] for row in table(page, "#tree")]
    assert json.loads(attributes[0]) == {"<script>window.pwned = 1</script>": "<svg onload=alert(2)>"}
    page.click(f'#tree button.path[data-path="{array_path}"]')
    page.wait_for_selector("#array-section:not([hidden])")
    assert page.text_content("#array-path") == array_path
    canvas = page.eval_on_selector("#heatmap", "c => ({...c.dataset})")
    page.click("#heatmap", position={"x": 1.5 * int(canvas["cellWidth"]), "y": 1.5 * int(canvas["cellHeight"])})
    page.wait_for_selector("#cell-chunks button.chunk")
    page.click("#cell-chunks button.chunk")
    page.wait_for_selector("#chunk-section:not([hidden])")
    first = zs_json("log", archive, "main")[1]
    page.click(f'#chunk-log button.commit[data-id="{newest["id"]}"]')
    page.wait_for_function(f"document.querySelector('#commit-id').textContent === '{newest['id']}'")
    page.click(f'#commits button.commit[data-id="{first["id"]}"]')
    page.wait_for_function(f"document.querySelector('#commit-id').textContent === '{first['id']}'")
    facts = dict(page.eval_on_selector_all("#commit-facts dd", "d => d.map(x => [x.dataset.key, x.textContent])"))
    assert facts["message"] == "<img src=z onerror=window.pwned=5> first"
    assert json.loads(facts["metadata"]) == {"<i>author</i>": "<script>alert(6)</script>"}
    page.wait_for_timeout(500)  # an injected handler would have fired by now
    assert dialogs == []
    assert page.evaluate("window.pwned") is None
    # nothing from the archive became markup: the page's own elements only
    assert page.evaluate("document.querySelectorAll('img, svg, b, i, script:not([src])').length") == 0
