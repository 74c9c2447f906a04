"""Each stage of the export pipeline on its own, against what the real icechunk says of the fixtures."""

from __future__ import annotations

import collections
import os
from pathlib import Path

import numpy as np
import pytest

from toolkit.oracle import oracle, repo_path
from toolkit.reads import spy_on_metadata_reads
from zsarchive.archive import export
from zsarchive.archive.write import engine as engine_module
from zsarchive.archive.write import exporter as E
from zsarchive.archive.write import history as H
from zsarchive.archive.write import plan as P
from zsarchive.archive.write import records as R
from zsarchive.archive.format import schema as S
from zsarchive.archive.write.engine import InProcess, ProcessPool, open_engine
from zsarchive.archive.write.sorter import ExternalSorter
from zsarchive.archive.write.options import WriteOptions
from zsarchive.archive.write.stream import CompressedBlock, PiecesBlock, RecordList, TaskBlock, Tally
from zsarchive.icechunk import Repository
from zsarchive.zs.format.codecs import get_codec
from zsarchive.zs.reader import ZS
from zsarchive.zs.writer import build_data_block


@pytest.fixture(scope="module")
def v2(icechunk2_python):
    """(repository, what icechunk 2.x says about it)."""
    return Repository.open(str(repo_path(2))), oracle(2, icechunk2_python)


def _families(records) -> dict[bytes, list[tuple]]:
    out: dict[bytes, list[tuple]] = {}
    for rec in records:
        family, key, value = S.split(rec)
        out.setdefault(family, []).append((key, value))
    return out


def _arrays(truth: dict) -> dict[str, dict[str, tuple]]:
    """Snapshot id -> array node id -> its (manifest id, extents) as icechunk lists them."""
    return {
        sid: {
            n["id"]: tuple((m["id"], tuple(map(tuple, m["extents"]))) for m in n.get("manifest_refs") or [])
            for n in snap["nodes"]
            if n["node_type"] == "array"
        }
        for sid, snap in truth["snapshots"].items()
    }


def test_plan_names_every_snapshot_log_and_array_change(v2):
    repo, truth = v2
    plan = P.plan_export(repo)
    parents = {s["id"]: s.get("parent_id") for s in truth["repo_info"]["snapshots"]}
    assert [s.id for s in plan.snapshots] == sorted(parents)
    assert [sid for sid, _ in plan.txlogs] == sorted(sid for sid, parent in parents.items() if parent)
    arrays = _arrays(truth)
    expected = sorted(
        (node_id, sid)
        for sid, here in arrays.items()
        for node_id, manifests in here.items()
        if manifests != arrays.get(parents[sid], {}).get(node_id, ())
    )
    assert [(c.node_id, c.snapshot_id) for c in plan.changes] == expected
    for change in plan.changes:
        assert change.manifests == arrays[change.snapshot_id][change.node_id]
        assert change.base == arrays.get(parents[change.snapshot_id], {}).get(change.node_id, ())
    for sid, here in arrays.items():  # a timeline starts where the array is not in the parent
        for node_id in here:
            parent = parents[sid]
            started = plan.since[sid][node_id]
            assert started == (plan.since[parent][node_id] if node_id in arrays.get(parent, {}) else sid)


@pytest.mark.parametrize("task_refs", [1, 2, 5, 10**6])
def test_change_tasks_split_only_single_manifests(v2, task_refs):
    plan = P.plan_export(v2[0])
    tasks = plan.change_tasks(task_refs)
    assert [t[0] for t in tasks] == [c for c in plan.changes for t in tasks if t[0] is c]  # in order
    for change in plan.changes:
        ranges = [(lo, hi) for c, lo, hi in tasks if c is change]
        assert ranges[0][0] == 0 and ranges[-1][1] is None
        if len(change.base) > 1 or len(change.manifests) != 1:
            assert ranges == [(0, None)]
            continue
        stops = [hi if hi is not None else change.refs for _, hi in ranges]
        assert all(lo == prev for (lo, _), prev in zip(ranges[1:], stops))  # contiguous
        # at most 64 tasks per manifest; a diff against the parent's manifest in 4x larger ranges
        step = max(task_refs * (4 if change.base else 1), -(-change.refs // 64))
        assert all(0 < stop - lo <= step for (lo, _), stop in zip(ranges, stops)) or change.refs == 0


@pytest.mark.parametrize("task_refs", [1, 2, 3])
def test_a_diff_split_into_ranges_is_the_whole_diff(v2, task_refs):
    """A change against the parent's one manifest, split into ranges of its refs, diffs each range
    against the parent's refs at the same coordinates: the pieces, in order, are the whole diff."""
    repo = v2[0]
    changes = [c for c in P.plan_export(repo).changes if len(c.base) == 1 and len(c.manifests) == 1]
    split = [c for c in changes if c.refs > 4 * task_refs]
    assert split  # the fixture has such changes, and ranges of them

    def run(tasks):
        records, ids, total = [], [], H.Digest()
        for change, lo, hi in tasks:
            for batches, entries, coords in E._change_task(repo, change, lo, hi, True):
                records += _records(batches)
                ids += entries
                total += coords
        return records, ids, total

    plan = P.ExportPlan([], [], changes, {}, {})
    for change in changes:
        ranges = [t for t in plan.change_tasks(task_refs) if t[0] is change]
        assert run(ranges) == run([(change, 0, None)])
        assert len(ranges) > 1 or change not in split


def test_gather_metadata_gives_refs_snapshots_nodes_and_ops(v2, tmp_path):
    repo, truth = v2
    sorter = ExternalSorter(tmpdir=str(tmp_path), unique=False)
    refs = E.gather_metadata(repo, P.plan_export(repo), sorter)
    assert refs == sorted(refs)
    got = {(k[0], k[1]): v[0] for k, v in (S.split(r)[1:] for r in refs)}
    assert {name: sid for (kind, name), sid in got.items() if kind == "branch"} == truth["branches"]
    assert {name: sid for (kind, name), sid in got.items() if kind == "tag"} == truth["tags"]
    families = _families(sorter.sorted())
    assert sorted(k[0] for k, _ in families[S.SNAPSHOT]) == sorted(truth["snapshots"])
    assert {k[0]: v[2] for k, v in families[S.SNAPSHOT]} == {
        sid: snap["commit_message"] for sid, snap in truth["snapshots"].items()
    }
    nodes = sorted((sid, node["path"]) for sid, snap in truth["snapshots"].items() for node in snap["nodes"])
    assert sorted((k[0], S.path_of(k[1])) for k, _ in families[S.NODE]) == nodes
    assert len(families[S.OPS]) == len(truth["ops_log"])
    assert sorted(k[0] for k, _ in families[S.REPO]) == sorted(
        ["config", "feature_flags", "metadata", "repo_file", "spec_version", "status"]
    )


def _square(repo, n):
    for i in range(n):
        yield [i * i, os.getpid()]


def test_engines_give_each_tasks_batches_in_order(tmp_path):
    repo = Repository.open(str(repo_path(2)))
    jobs = [(n,) for n in (3, 0, 5, 1)]
    local = [list(batches()) for batches in InProcess(repo).start(_square, jobs)]
    pool = ProcessPool(repo, str(repo_path(2)), 2, str(tmp_path))
    try:
        remote = [list(batches()) for batches in pool.start(_square, jobs)]
        work = Path(pool._work.name)
        assert list(work.iterdir()) == []  # each run file is removed once read
    finally:
        pool.close()
    assert [[b[0] for b in run] for run in local] == [[b[0] for b in run] for run in remote]
    assert {b[1] for run in local for b in run} == {os.getpid()}
    assert os.getpid() not in {b[1] for run in remote for b in run}  # decoded by worker processes
    assert not work.exists()
    assert isinstance(open_engine(repo, str(repo_path(2)), 1, 10, str(tmp_path)), InProcess)
    assert isinstance(open_engine(repo, str(repo_path(2)), 4, 1, str(tmp_path)), InProcess)
    # workers reading object storage start afresh: worth it only for many refs
    assert isinstance(open_engine(repo, "s3://bucket/repo", 4, 10, str(tmp_path), refs=1000), InProcess)


@pytest.mark.parametrize("name", ["v1", "v2", "v1-migrated"])
def test_worker_processes_hand_back_the_forms_of_the_files_they_read(tmp_path, monkeypatch, name):
    """The file-form records of manifests and transaction logs the workers read come from the workers:
    this process reads none of those files, and the archive is the one-process export's."""
    alone, pooled, worker_log = tmp_path / "alone.zs", tmp_path / "pooled.zs", tmp_path / "worker-reads"
    export(repo_path(0, name), alone, export_time=1, parallelism=1)
    pools = []
    monkeypatch.setattr(engine_module, "ProcessPool", lambda *a: pools.append(ProcessPool(*a)) or pools[-1])
    mine = spy_on_metadata_reads(monkeypatch, worker_log)
    export(repo_path(0, name), pooled, export_time=1, parallelism=2)
    assert len(pools) == 1 and pooled.read_bytes() == alone.read_bytes()
    with ZS(str(pooled)) as zs:
        described = {S.split(r)[1][0] for r in zs.search(prefix=S.FILES)}
    read_by_workers = set(worker_log.read_text().split())
    assert {k for k in read_by_workers if k.startswith("manifests/")}  # the workers decoded the manifests
    assert read_by_workers <= described  # and the archive describes every file they read
    assert mine == []


@pytest.mark.parametrize("parallelism", [1, 2])
def test_decode_changes_replays_to_every_ref_icechunk_lists(v2, tmp_path, parallelism):
    repo, truth = v2
    plan = P.plan_export(repo)
    engine = open_engine(repo, str(repo_path(2)), parallelism, 2, str(tmp_path))
    try:
        records, ids = [], []
        for _change, batches in E.decode_changes(engine, plan, include_chunks=True):
            for batch_list, batch_ids, _digest in batches():
                assert all(type(batch) is RecordList for batch in batch_list)  # no block plan: record lists
                batch = _records(batch_list)
                assert batch == sorted(batch)
                records += batch
                ids += batch_ids
    finally:
        engine.close()
    changes: dict[tuple, dict[str, tuple]] = {}  # (node id, coords) -> snapshot id -> value
    for key, value in _families(records)[S.CHUNK_REF]:
        changes.setdefault(key[:2], {})[key[2]] = value
    parents = {s["id"]: s.get("parent_id") for s in truth["repo_info"]["snapshots"]}
    arrays = _arrays(truth)
    for sid, here in arrays.items():
        for node_id, manifests in here.items():
            history, at = [], sid  # the snapshot's history back to where the array's timeline starts
            while True:
                history.append(at)
                if at == plan.since[sid][node_id]:
                    break
                at = parents[at]
            kinds = [0, 0, 0]
            for (node, _coords), by_snapshot in changes.items():
                if node != node_id:
                    continue
                value = next((by_snapshot[h] for h in history if h in by_snapshot), None)
                if value is not None and value[0] != S.REMOVED:
                    kinds[value[0]] += 1
            expected = [0, 0, 0]
            for mid, _extents in manifests:
                for a in truth["manifests"][mid]["arrays"]:
                    if a["node_id"] == node_id:
                        expected = [
                            e + n for e, n in zip(expected, (a["num_inline"], a["num_native"], a["num_virtual"]))
                        ]
            assert kinds == expected, (sid, node_id)
    native = sum(1 for by_snapshot in changes.values() for v in by_snapshot.values() if v[0] == S.NATIVE)
    assert len(ids) == native  # one native chunk id per native ref written


@pytest.mark.parametrize("codec", [None, "deflate"])
def test_tasks_cut_blocks_the_way_the_writer_would(v2, tmp_path, codec, monkeypatch):
    """With a block plan, the task of an array one snapshot changes hands over whole data blocks —
    the writer's cuts, restarted at the task, compressed by the task itself given a codec — holding
    exactly the records the task gives without one; other arrays' records come as records."""
    repo, _ = v2
    monkeypatch.setattr(E, "_TASK_REFS", 1)  # every manifest counts as large
    plan = P.plan_export(repo)
    cut = E.BlockPlan(200, codec)
    once = {node for node, n in collections.Counter(c.node_id for c in plan.changes).items() if n == 1}
    assert once and len(once) < len({c.node_id for c in plan.changes})  # both kinds in the fixture
    engine = InProcess(repo)
    plain = [
        [rec for batch, _, _ in batches() for rec in _records(batch)]
        for _, batches in E.decode_changes(engine, plan, False)
    ]
    cut_up = E.decode_changes(engine, plan, False, cut)
    compress = get_codec(codec).compress if codec else None
    for (change, batches), records in zip(cut_up, plain):
        items = [item for batch, _, _ in batches() for item in batch]
        if change.node_id not in once:
            assert all(type(item) is RecordList for item in items) and _records(items) == records
            continue
        if codec is None:
            assert all(type(item) is TaskBlock for item in items)
            blocks = [item.records for item in items]
            assert [r for block in blocks for r in block] == records
            assert blocks == _writer_cuts(records, 200)
        else:
            assert all(type(item) is CompressedBlock for item in items)
            built = [item.block for item in items]
            expected = [build_data_block(block, None, compress) for block in _writer_cuts(records, 200)]
            assert built == expected
            assert sum(block.count for block in built) == len(records)


def _records(batches) -> list[bytes]:
    """The records of a stream of batches, in order."""
    return [rec for batch in batches for rec in batch.records]


def _writer_cuts(records: list[bytes], approx: int) -> list[list[bytes]]:
    """The ZS writer's documented rule, written out: a block ends at the first record that brings it to
    ``approx`` bytes; a record of ``approx`` bytes or more is a block of its own."""
    blocks, block, size = [], [], 0
    for rec in records:
        if len(rec) >= approx:
            blocks += [block] if block else []
            blocks.append([rec])
            block, size = [], 0
            continue
        block.append(rec)
        size += len(rec)
        if size >= approx:
            blocks.append(block)
            block, size = [], 0
    return blocks + ([block] if block else [])


def test_gather_txlogs_gives_a_summary_and_the_digest_of_each_commits_changed_chunks(v2):
    repo, truth = v2
    plan = P.plan_export(repo)
    records, digests = [], {}
    for (sid, _), batches in zip(plan.txlogs, E.gather_txlogs(InProcess(repo), plan)):
        for batch, logged in batches():
            records += batch
            digests.update({(sid, node_id): d for node_id, d in logged.items() if d.count})
    families = _families(records)
    assert sorted(k[0] for k, _ in families[S.TXLOG]) == [sid for sid, _ in plan.txlogs]
    assert not families.get(S.CHUNK_HISTORY)
    changed: dict[tuple, list] = {}
    for sid, log in truth["transaction_logs"].items():
        if "error" not in log:
            for entry in log["updated_chunks"]:
                if entry["chunks"]:
                    changed.setdefault((sid, entry["node_id"]), []).extend(entry["chunks"])
    assert changed and digests == {key: H.digest(np.array(coords)) for key, coords in changed.items()}


def test_a_digest_ignores_order_and_tells_coordinates_apart():
    coords = np.array([[0, 1], [1, 0], [2, 2]])
    assert H.digest(coords) == H.digest(coords[::-1]) == H.digest(coords[:1]) + H.digest(coords[1:])
    assert H.digest(coords) != H.digest(np.array([[0, 1], [1, 0], [2, 3]]))
    assert H.digest(coords[:2]) != H.digest(np.array([[1, 1], [0, 0]]))
    assert H.digest(np.zeros((0, 2), int)) == H.Digest()


def test_merge_families_writes_in_file_order_header_last(v2, tmp_path):
    repo, _ = v2
    plan = P.plan_export(repo)
    sorter = ExternalSorter(tmpdir=str(tmp_path), unique=False)
    chunk_ids = ExternalSorter(tmpdir=str(tmp_path))
    refs = E.gather_metadata(repo, plan, sorter)
    engine = InProcess(repo)
    reports = []
    tally = Tally(lambda: len(refs) + sorter.count, lambda d, t: reports.append((d, t)))
    changes = E.decode_changes(engine, plan, True)
    families = E.Families(
        refs,
        changes,
        list(zip(plan.txlogs, E.gather_txlogs(engine, plan))),
        sorter,
        chunk_ids,
        lambda: ExternalSorter(max_bytes=1 << 10, tmpdir=str(tmp_path), unique=False),
        lambda: map(PiecesBlock.of, R.chunk_file_blocks(repo.storage, chunk_ids.sorted(), True, True, [])),
        lambda history: E.history_exceptions(repo, plan, changes, history),
    )
    batches = list(
        E.merge_families(families, tally, lambda counts: S.record(S.HEADER, (), (tuple(sorted(counts.items())),)))
    )
    flat = _records(batches)
    assert flat == sorted(flat) and flat[-1][:1] == S.HEADER
    counts = dict(S.split(flat[-1])[2][0])
    assert sum(counts.values()) == len(flat) - 1
    assert counts[S.FAMILY_NAMES[S.CHUNK_DATA]] == len({r for r in flat if r[:1] == S.CHUNK_DATA})
    pieces = [S.split(r)[1] for r in flat if r[:1] == S.CHUNK_DATA]
    assert pieces and all(len(key) == 2 and key[1] == 0 for key in pieces)  # small files: one piece each
    assert reports[-1] == (len(flat) - 1, len(flat) - 1)  # the total grew by the unplanned records


def test_write_archive_leaves_nothing_when_records_fail(tmp_path):
    target = tmp_path / "a.zs"

    def broken():
        yield RecordList([S.record(S.REFS, ("branch", "main"), ("X",))])
        raise RuntimeError("decoder failed")

    with pytest.raises(RuntimeError, match="decoder failed"):
        E.write_archive(target, broken(), {}, WriteOptions().checked())
    assert list(tmp_path.iterdir()) == []
    E.write_archive(target, iter([RecordList([b"a", b"b"])]), {"x": 1}, WriteOptions(codec="none").checked())
    with ZS(str(target)) as z:
        assert list(z) == [b"a", b"b"] and z.metadata == {"x": 1}
    assert list(tmp_path.iterdir()) == [target]


def test_a_claimed_ref_count_cannot_multiply_the_tasks():
    """num_chunk_refs comes from a snapshot file: 2^32 - 1 claimed refs still make at most 64 tasks,
    and a plausible count splits into ranges of the task size."""
    huge = P.ArrayChange("S" * 20, "N" * 13, (("M" * 20, ((0, 10),)),), (), 2**32 - 1)
    usual = P.ArrayChange("T" * 20, "N" * 13, (("M" * 20, ((0, 10),)),), (), 600_000)
    plan = P.ExportPlan([], [], [huge, usual], {}, {})
    tasks = plan.change_tasks(250_000)
    assert len([t for t in tasks if t[0] is huge]) <= 64
    assert [(lo, hi) for change, lo, hi in tasks if change is usual] == [
        (0, 250_000),
        (250_000, 500_000),
        (500_000, None),
    ]
