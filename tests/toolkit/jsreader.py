"""The JavaScript reader (``js/``) asked the questions ``zs ... --json`` answers, in Node and in the browser,
and its answers held against Python's: a plan of queries built from the archive, Python's answers from the
command line (in this process), the reader's from Node or from a page in Chromium.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from toolkit.places import ROOT, peers_required
from zsarchive.archive import RepoArchive
from zsarchive.cli import main

JS = ROOT / "js"
NODE = shutil.which("node") or "/usr/bin/node"


def require_js() -> None:
    """Node and the reader's test dependencies (``scripts/dev setup`` installs them with npm into js/)."""
    missing = [
        what
        for what, ok in (
            ("node", os.path.exists(NODE)),
            ("js/node_modules (npm ci in js/)", (JS / "node_modules" / "zarrita").is_dir()),
        )
        if not ok
    ]
    if missing:
        message = f"the JavaScript reader's tests need {' and '.join(missing)}: scripts/dev setup installs them"
        if peers_required():
            pytest.fail(message)
        pytest.skip(message)


def node(script: str, *args: str, timeout: float = 300) -> str:
    """``node js/test/SCRIPT ARGS``: its stdout; fails the test with its stderr."""
    done = subprocess.run([NODE, str(JS / "test" / script), *args], capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"node {script} failed:\n{done.stderr[-3000:]}"
    return done.stdout


def node_answers(archive: str | Path, plan: list[dict], tmp: Path, authorize: tuple[str, ...] = ()) -> list[dict]:
    """The JavaScript reader's answers in Node (``{"ok": lines}`` or ``{"error": class, "message"}`` each)."""
    plan_file = tmp / "plan.json"
    plan_file.write_text(json.dumps(plan))
    return json.loads(node("node-answers.js", str(archive), str(plan_file), *authorize))


def _cli_args(archive: str, q: dict) -> list[str]:
    kind = q["q"]
    coords = ",".join(map(str, q.get("coords", ())))
    if kind == "refs":
        return ["refs", archive]
    if kind == "log":
        return [
            "log",
            archive,
            *([q["ref"]] if q.get("ref") else []),
            *(["--since", q["since"]] if q.get("since") else []),
            *(["--until", q["until"]] if q.get("until") else []),
            *(["-n", str(q["max_count"])] if q.get("max_count") is not None else []),
        ]
    if kind == "graph":
        return ["log", archive, "--graph", *(["--all"] if q.get("all") else [q["ref"]])]
    if kind == "show":
        return ["show", archive, q["ref"]]
    if kind == "ls":
        return ["ls", archive, q["ref"], *([q["path"]] if q.get("path") else [])]
    if kind == "chunks":
        return ["chunks", archive, q["ref"], q["path"]]
    if kind == "chunk":
        return ["chunk", archive, q["ref"], q["path"], coords]
    if kind == "chunk-log":
        return ["chunk-log", archive, q["ref"], q["path"], coords]
    if kind == "diff":
        return ["diff", archive, q["from"], q["to"], *(["--stat"] if q.get("stat") else [])]
    if kind == "ops":
        return ["ops", archive]
    raise ValueError(kind)


def python_answers(archive: str | Path, plan: list[dict]) -> list[dict]:
    """Python's answers: each query's ``zs ... --json`` lines (``summary``: its one object; ``chain``:
    ``RepoArchive.chain``, which ``zs info`` prints for a fragment), or ``{"error": True}`` where it fails."""
    out: list[dict] = []
    runner = CliRunner()
    for q in plan:
        if q["q"] == "chain":
            with RepoArchive(str(archive)) as arc:
                out.append({"ok": arc.chain()})
            continue
        args = ["summary", str(archive), "--json"] if q["q"] == "summary" else [*_cli_args(str(archive), q), "--json"]
        result = runner.invoke(main, args)
        if result.exit_code:
            assert result.exit_code == 1 and result.output.startswith("zs: error: "), (q, result.output[-2000:])
            out.append({"error": True, "message": result.output.strip()})
        elif q["q"] == "summary":
            out.append({"ok": [json.loads(result.output)]})
        else:
            out.append({"ok": [json.loads(line) for line in result.output.splitlines()]})
    return out


def _located(value: Any) -> Any:
    """``value`` with every archive location cut to its file name (a path in Python, a URL in a browser)."""
    if isinstance(value, dict):
        return {
            k: (v.rsplit("/", 1)[-1] if k == "location" and isinstance(v, str) else _located(v))
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [_located(v) for v in value]
    return value


def assert_same_answers(plan: list[dict], ours: list[dict], theirs: list[dict], where: str) -> None:
    """Every query answered alike: the same JSON lines, or both a one-line error."""
    assert len(ours) == len(theirs) == len(plan)
    for q, js, py in zip(plan, ours, theirs):
        if "error" in py:
            assert "error" in js, f"{where}: {q}: Python fails ({py['message']}), JavaScript answers {js['ok']!r:.500}"
            assert js["error"] in ("ZSError", "ZSCorrupt", "NotFound"), f"{where}: {q}: {js}"
            continue
        assert "ok" in js, f"{where}: {q}: JavaScript fails: {js.get('error')}: {js.get('message')}"
        assert _located(js["ok"]) == _located(py["ok"]), (
            f"{where}: {q}:\n JS {js['ok']!r:.1500}\n PY {py['ok']!r:.1500}"
        )


def plan_for(archive: str | Path, *, shows: int = 12, diffs: int = 12) -> list[dict]:
    """Queries that cover every question of the reader on this archive: refs and histories, REF syntax
    (kinds, id prefixes, ``~N``, ``^``, ``@TIME``), trees, every chunk ref at each branch and tag, single refs
    and chunk histories, commits and diffs (at most ``shows`` and ``diffs`` of them), the ops log, the
    summary, the chain, and questions that must fail."""
    with RepoArchive(str(archive)) as arc:
        refs = arc.refs()
        names = [f"{r['type']}:{r['name']}" for r in refs if r["type"] != "deleted_tag"]
        everything = arc.log()
        plan: list[dict] = [
            {"q": "refs"},
            {"q": "log"},
            {"q": "graph", "all": True},
            {"q": "ops"},
            {"q": "summary"},
            {"q": "chain"},
            {"q": "log", "ref": "no such ref"},
            {"q": "ls", "ref": "main", "path": "/no/such"},
        ]
        plan += [{"q": "ls", "ref": f"tag:{r['name']}"} for r in refs if r["type"] == "deleted_tag"]
        if everything:
            day = everything[-1]["flushed_at"][:10]
            plan += [
                {"q": "log", "since": day, "until": day},
                {"q": "log", "max_count": 2},
                {"q": "log", "until": "1999-01-01"},
            ]
            sid = everything[0]["id"]
            plan += [
                {"q": "show", "ref": sid[:6]},
                {"q": "show", "ref": sid.lower()},
                {"q": "show", "ref": f"snapshot:{sid}"},
            ]
        for name in names:
            plan += [
                {"q": "log", "ref": name},
                {"q": "graph", "ref": name},
                {"q": "ls", "ref": name},
                {"q": "show", "ref": f"{name}~1"},
                {"q": "show", "ref": f"{name}^"},
                {"q": "show", "ref": f"{name}~99"},
            ]
            history = arc.log(name)
            if len(history) > 1:
                at = history[1]["flushed_at"]
                plan += [
                    {"q": "show", "ref": f"{name}@{at}"},
                    {"q": "log", "ref": f"{name}@{at}"},
                    {"q": "show", "ref": f"{name}@{at}~1"},
                    {"q": "show", "ref": f"{name}~1@{at[:10]}"},
                    {"q": "ls", "ref": f"{name}^0"},
                    {"q": "show", "ref": f"{name}^2"},
                ]
            for node in arc.node_infos(name):
                if node.node_type == "group":
                    if node.path != "/":
                        plan.append({"q": "ls", "ref": name, "path": node.path})
                    continue
                plan.append({"q": "chunks", "ref": name, "path": node.path})
                coords = [c for c in arc.node_chunk_coords(node)]
                for at in {tuple(coords[0]), tuple(coords[-1])} if coords else set():
                    plan += [
                        {"q": "chunk", "ref": name, "path": node.path, "coords": list(at)},
                        {"q": "chunk-log", "ref": name, "path": node.path, "coords": list(at)},
                    ]
                grid = node.num_chunks
                plan.append({"q": "chunk", "ref": name, "path": node.path, "coords": [n for n in grid]})  # outside
                empty = next((c for c in _first_cells(grid) if c not in set(map(tuple, coords))), None)
                if empty is not None:
                    plan.append({"q": "chunk", "ref": name, "path": node.path, "coords": list(empty)})
        with_parent = [s for s in everything if s["parent_id"] and arc._snapshot_value(s["parent_id"]) is not None]
        for s in with_parent[:shows]:
            plan.append({"q": "show", "ref": s["id"]})
        for s in with_parent[:diffs]:
            plan += [
                {"q": "diff", "from": s["parent_id"], "to": s["id"]},
                {"q": "diff", "from": s["parent_id"], "to": s["id"], "stat": True},
            ]
        if with_parent:
            newest = with_parent[0]
            first = arc.log(newest["id"])[-1]["id"]
            plan += [{"q": "diff", "from": first, "to": newest["id"]}, {"q": "diff", "from": newest["id"], "to": first}]
    return plan


def _first_cells(grid: list[int], most: int = 64):
    """The first ``most`` chunk coordinates of a grid, in C order."""
    total = 1
    for n in grid:
        total *= n
    for index in range(min(total, most)):
        cell = []
        for n in reversed(grid):
            cell.append(index % n)
            index //= n
        yield tuple(reversed(cell))


class NodeSession:
    """``node js/test/node-session.js``: the reader in one Node process, asked one command at a time, so a
    test can change the world (a file on a server) between two of its reads."""

    def __init__(self) -> None:
        self.process = subprocess.Popen(
            [NODE, str(JS / "test" / "node-session.js")],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    def ask(self, command: dict) -> dict:
        """The answer to one command (``{"open": source}``, ``{"query": {...}}``)."""
        assert self.process.stdin and self.process.stdout
        self.process.stdin.write(json.dumps(command) + "\n")
        self.process.stdin.flush()
        line = self.process.stdout.readline()
        assert line, f"node-session ended:\n{self.process.stderr.read() if self.process.stderr else ''}"
        return json.loads(line)

    def close(self) -> None:
        assert self.process.stdin
        self.process.stdin.close()
        self.process.wait(timeout=30)
        for stream in (self.process.stdout, self.process.stderr):
            if stream:
                stream.close()

    def __enter__(self) -> NodeSession:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
