"""``zs serve`` in a real browser (Debian's chromium driven by Playwright): the page shows what
``zs log/show/ls/chunk-log --json`` say, runs no script from the archive, and reads an archive that
nginx serves."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from toolkit.oracle import ROOT, repo_path
from toolkit.pages import (
    HOSTILE_SCRIPT,
    assert_hostile_names_stay_text,
    graph_rows,
    log_rows,
    table,
    wait_commits,
    zs_json,
)
from toolkit.servers import nginx_server  # noqa: F401
from zsarchive.archive import export

TIMEOUT_MS = 30_000


class Served:
    """``zs serve ARCHIVE --port 0`` as its own process; ``url`` is where it says it listens."""

    def __init__(self, archive: str):
        self.process = subprocess.Popen(
            [sys.executable, "-m", "zsarchive", "serve", archive, "--port", "0"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        line = self.process.stdout.readline().decode()
        match = re.search(r"at (http://127\.0\.0\.1:\d+/) ", line)
        if not match:
            self.close()
            raise AssertionError((line, self.process.stderr.read().decode()))
        self.url = match.group(1)

    def close(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=30)


@pytest.fixture(scope="module")
def fixture_archive(tmp_path_factory) -> Path:
    archive = tmp_path_factory.mktemp("serve") / "v2.zs"
    export(repo_path(2), archive)
    return archive


def _open(browser, url: str):
    """The page at ``url``, its Content-Security-Policy bypassed: what is tested is that the page makes no
    markup of the archive's strings, not that the policy would stop the script if it did."""
    page = browser.new_page(bypass_csp=True)
    page.set_default_timeout(TIMEOUT_MS)
    dialogs: list[str] = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    response = page.goto(url)
    assert "script-src 'self'" in response.headers["content-security-policy"]
    page.wait_for_selector("body[data-ready=true]")
    return page, dialogs


def test_click_through_matches_the_cli(browser, fixture_archive):
    served = Served(str(fixture_archive))
    try:
        page, dialogs = _open(browser, served.url)
        # the branch graph: every branch and tag's history, as zs log --graph --all
        graph = zs_json("log", fixture_archive, "--graph", "--all")
        assert graph_rows(page) == [
            {"id": g["id"], "refs": g["refs"], "message": g["message"], "time": g["flushed_at"]} for g in graph
        ]
        # branch -> its commits
        page.click('#refs button[data-ref="branch:dev"]')
        wait_commits(page, "branch:dev")
        assert table(page, "#commits") == log_rows(zs_json("log", fixture_archive, "branch:dev"))
        page.click('#refs button[data-ref="branch:main"]')
        wait_commits(page, "branch:main")
        main_log = zs_json("log", fixture_archive, "branch:main")
        assert table(page, "#commits") == log_rows(main_log)
        # filtered by date: a day with every commit, a day with none
        day = main_log[0]["flushed_at"][:10]
        page.fill("#since", day)
        page.fill("#until", day)
        page.click("#commit-filter button[type=submit]")
        wait_commits(page, "branch:main", day, day)
        assert table(page, "#commits") == log_rows(
            zs_json("log", fixture_archive, "branch:main", "--since", day, "--until", day)
        )
        page.fill("#until", "")
        page.fill("#since", "2999-01-01")
        page.click("#commit-filter button[type=submit]")
        wait_commits(page, "branch:main", "2999-01-01")
        assert table(page, "#commits") == []
        page.fill("#since", "")
        page.click("#commit-filter button[type=submit]")
        wait_commits(page, "branch:main")
        assert table(page, "#commits") == log_rows(main_log)

        # commit -> its changes: the commit whose log lists the most chunks
        shows = {c["id"]: zs_json("show", fixture_archive, c["id"])[0] for c in main_log}
        busiest = max(shows.values(), key=lambda s: sum(c["chunks"] for c in s["changes"]))
        page.click(f'#commits button.commit[data-id="{busiest["id"]}"]')
        page.wait_for_function(f"document.querySelector('#commit-id').textContent === '{busiest['id']}'")
        facts = dict(page.eval_on_selector_all("#commit-facts dd", "d => d.map(x => [x.dataset.key, x.textContent])"))
        assert facts["parent_id"] == busiest["parent_id"] and facts["message"] == busiest["message"]
        assert json.loads(facts["metadata"]) == busiest["metadata"]
        assert table(page, "#changes") == [
            [c["path"], c["node_type"], c["change"], str(c["chunks"])] for c in busiest["changes"]
        ]

        # the node tree at that commit, as zs ls
        page.click("#tree-button")
        page.wait_for_selector("#tree-section:not([hidden])")
        listed = zs_json("ls", fixture_archive, f"snapshot:{busiest['id']}")
        assert [row[:3] for row in table(page, "#tree")] == [
            [n["path"], n["node_type"], " × ".join(map(str, n["shape"])) if n.get("shape") is not None else "-"]
            for n in listed
        ]

        # array -> heatmap: each commit's column adds up to the chunks zs show counts for it
        array = max(
            (c for c in busiest["changes"] if c["node_type"] == "array" and c["chunks"]), key=lambda c: c["chunks"]
        )
        page.click(f'#changes button.path[data-path="{array["path"]}"]')
        page.wait_for_selector("#array-section:not([hidden])")
        heat = page.evaluate(
            f"fetch('api/heatmap?ref=snapshot:{busiest['id']}&path=' + "
            f"encodeURIComponent({json.dumps(array['path'])}) + '&bins=128').then(r => r.json())"
        )
        assert heat["outside"] == 0
        for column, counts in zip(heat["columns"], heat["counts"]):
            assert column["commits"] == 1
            node_changes = {
                c["id"]: c["chunks"]
                for c in shows.get(column["first"]["id"], zs_json("show", fixture_archive, column["first"]["id"])[0])[
                    "changes"
                ]
            }
            assert sum(counts) == node_changes[heat["node_id"]]
        canvas = page.eval_on_selector("#heatmap", "c => ({...c.dataset})")
        column = len(heat["columns"]) - 1  # the commit shown
        cell = next(b for b, n in enumerate(heat["counts"][column]) if n)
        page.click(
            "#heatmap",
            position={"x": (column + 0.5) * int(canvas["cellWidth"]), "y": (cell + 0.5) * int(canvas["cellHeight"])},
        )
        page.wait_for_selector("#cell-chunks button.chunk")
        coords = page.eval_on_selector_all("#cell-chunks button.chunk", "b => b.map(x => x.dataset.coords)")
        assert len(coords) == heat["counts"][column][cell]

        # a chunk -> its history, as zs chunk-log
        page.click(f'#cell-chunks button.chunk[data-coords="{coords[0]}"]')
        page.wait_for_selector("#chunk-section:not([hidden])")
        assert table(page, "#chunk-log") == log_rows(
            zs_json("chunk-log", fixture_archive, f"snapshot:{busiest['id']}", array["path"], coords[0])
        )
        assert busiest["id"] in [row[0] for row in table(page, "#chunk-log")]
        assert not page.is_visible("#error") and dialogs == []
        page.close()
    finally:
        served.close()


def test_a_hostile_archive_runs_no_script(browser, icechunk2_python, tmp_path):
    repo = tmp_path / "repo"
    proc = subprocess.run([str(icechunk2_python), "-c", HOSTILE_SCRIPT, str(repo)], capture_output=True, timeout=300)
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")[-3000:]
    archive = tmp_path / "hostile.zs"
    export(repo, archive)
    served = Served(str(archive))
    try:
        page, dialogs = _open(browser, served.url)
        assert_hostile_names_stay_text(page, dialogs, archive)
        page.close()
    finally:
        served.close()


def test_the_page_reads_an_archive_nginx_serves(browser, fixture_archive, nginx_server):  # noqa: F811
    shutil.copy(fixture_archive, nginx_server.root / "served.zs")
    url = nginx_server.url("served.zs")
    mark = nginx_server.mark()
    served = Served(url)
    try:
        page, dialogs = _open(browser, served.url)
        graph = zs_json("log", fixture_archive, "--graph", "--all")
        assert [row["id"] for row in graph_rows(page)] == [g["id"] for g in graph]
        page.click('#refs button[data-ref="branch:main"]')
        wait_commits(page, "branch:main")
        page.click(f'#commits button.commit[data-id="{graph[0]["id"]}"]')
        page.wait_for_function(f"document.querySelector('#commit-id').textContent === '{graph[0]['id']}'")
        assert table(page, "#changes") == [
            [c["path"], c["node_type"], c["change"], str(c["chunks"])]
            for c in zs_json("show", fixture_archive, graph[0]["id"])[0]["changes"]
        ]
        requests = nginx_server.requests_since(mark)
        assert requests and all(r.range for r in requests), "the server reads the archive by ranges"
        assert not page.is_visible("#error") and dialogs == []
        page.close()
    finally:
        served.close()
