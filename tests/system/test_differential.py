"""Random repositories written by the real icechunk (1.1 and 2.x), exported, and every answer of the
archive, the reader and the zarr store held against icechunk's own.

``scripts/random_icechunk_repo.py`` builds each repository from a seed. CI runs the committed seeds
below (each one once found a difference, or covers a feature); ``pytest tests/system/test_differential.py
--seeds N`` adds N fresh seeds per version for a longer hunt. A failure names its version and seed:
``.peers/ic2/bin/python scripts/random_icechunk_repo.py OUT --seed S`` rebuilds the repository.
"""

from __future__ import annotations

from pathlib import Path

from toolkit.agreement import check_archive, check_chunk_history, check_reader
from toolkit.cli import run_zs
from toolkit.oracle import run_oracle
from toolkit.peers import generate
from zsarchive.archive import export
from zsarchive.icechunk import Repository

SEEDS = {1: [2, 5, 9, 10, 1008, 1181], 2: [2, 5, 8, 9, 1036]}
"""Committed seeds per icechunk major version: together they hold refs named with "@", arrays resized
so a log lists an array with no chunks, amends of nodes created and deleted, moves, expiration and
garbage collection (a snapshot whose log garbage collection removed; a stray snapshot whose manifest
it removed; moves chained across expired ancestors), every chunk kind: each once made zsarchive disagree with icechunk."""
HUNT_START = 1000  # --seeds N runs seeds 1000 .. 1000+N-1


def pytest_generate_tests(metafunc):
    if "version_seed" in metafunc.fixturenames:
        extra = metafunc.config.getoption("seeds")
        cases = [(v, s) for v, seeds in SEEDS.items() for s in seeds]
        cases += [(v, HUNT_START + k) for k in range(extra) for v in SEEDS]
        metafunc.parametrize("version_seed", cases, ids=[f"v{v}-seed{s}" for v, s in cases])


def test_archive_reader_and_store_agree_with_icechunk(version_seed, request, tmp_path):
    version, seed = version_seed
    python = request.getfixturevalue(f"icechunk{version}_python")
    made = generate(python, tmp_path, seed)
    repo = tmp_path / "repo"
    answers = run_oracle(python, repo, {made["virtual_prefix"]: Path(made["virtual_dir"])})
    if version >= 2:  # icechunk 1.x has no API listing deleted tags: the generator recorded them
        assert sorted(answers["repo_info"]["deleted_tags"]) == made["deleted_tags"]
    check_reader(answers, Repository.open(str(repo)), made["deleted_tags"])
    archive = tmp_path / "repo.zs"
    export(repo, archive, parallelism=2 if seed % 2 else 1)
    validated = run_zs("validate", str(archive))  # every invariant holds for what icechunk wrote
    assert validated.returncode == 0 and validated.stdout.strip() == "looks good!", validated.stderr
    check_archive(answers, archive, repo, made["deleted_tags"], [made["virtual_prefix"]])
    check_chunk_history(Repository.open(str(repo)), archive)
