"""Refs read as numbers for a fragment's diff (``ManifestBuffer.identified_columns``): the C extension
and the numpy code agree on manifests the real icechunk writes (and on damaged copies of them), and
the diff they make equals the difference of the refs decoded one by one."""

from __future__ import annotations

import random
import tracemalloc

import numpy as np
import pytest

from toolkit.oracle import repo_path
from toolkit.peers import generate
from zsarchive.archive.write import refdelta
from zsarchive.errors import ZSCorrupt
from zsarchive.icechunk import Repository
from toolkit.icechunk_files import first_ref_first_manifest
from zsarchive.icechunk.manifest import decode as M
from zsarchive.icechunk.manifest.decode import decode_manifest
from zsarchive.icechunk.model import NodeType

REFSCAN = M._refscan
SCRATCH = np.empty(80 * 65536, np.uint8)


@pytest.fixture(scope="module")
def history(refs_history) -> Repository:
    return Repository.open(str(refs_history))


def _manifest_arrays(repo: Repository):
    """(manifest source, array node id) of every array of every manifest of the repository."""
    seen = set()
    for info in repo.snapshots():
        for node in repo.snapshot(info.id).nodes:
            if node.node_type is not NodeType.ARRAY:
                continue
            for ref in node.manifests:
                if (ref.id, node.id) not in seen:
                    seen.add((ref.id, node.id))
                    yield repo.manifest(ref.id).source, node.id


def _batches(source, node_id: str, c: bool, monkeypatch) -> list:
    """Every batch of ``identified_columns``, with or without the C extension."""
    monkeypatch.setattr(M, "_refscan", REFSCAN if c else None)
    source.layouts.clear()  # learned again, as a first read of the manifest learns them
    return list(source.identified_columns(node_id))


def _assert_same_batches(c_batches: list, numpy_batches: list) -> None:
    assert len(c_batches) == len(numpy_batches)
    for (columns, ids), (expected, expected_ids) in zip(c_batches, numpy_batches):
        for name in ("coords", "numbers", "pos", "fields"):
            assert np.array_equal(getattr(columns, name), getattr(expected, name))
        texts: dict = {}
        assert ids.same(expected_ids, texts).all()
        mine, theirs = ids.numbered(texts), expected_ids.numbered(texts)
        for got, want in zip(mine, theirs):  # field by field, not only as a whole
            assert np.array_equal(
                np.broadcast_to(got, np.shape(want) or np.shape(got)),
                np.broadcast_to(want, np.shape(got) or np.shape(want)),
            )


def test_the_refscan_extension_is_built():
    """This machine kind has gcc and the Python headers: the install must have built it (without it a
    fragment's diff reads refs with numpy, ~2x slower)."""
    assert M._refscan is not None, "zsarchive.icechunk.manifest._refscan did not build: see the pip install log"


@pytest.mark.parametrize("batch", [700, 65536])
def test_c_and_numpy_read_the_same_numbers_from_icechunk_manifests(history, monkeypatch, batch):
    monkeypatch.setattr(M, "_BATCH", batch)
    read_by_c = 0
    for source, node_id in _manifest_arrays(history):
        _assert_same_batches(
            _batches(source, node_id, True, monkeypatch), _batches(source, node_id, False, monkeypatch)
        )
        monkeypatch.setattr(M, "_refscan", REFSCAN)
        total = source.arrays[node_id][1]
        read_by_c += sum(
            source._read_refs(node_id, lo, min(lo + batch, total), None, SCRATCH) is not None
            for lo in range(0, total, batch)
        )
    assert read_by_c  # the batches without an etag


@pytest.mark.parametrize("version,where", [(1, "fixture"), (2, "fixture"), (1, 11), (2, 12)])
def test_c_and_numpy_agree_on_the_fixtures_and_random_histories(request, tmp_path, monkeypatch, version, where):
    if where == "fixture":
        repo = Repository.open(str(repo_path(version)))
    else:
        generate(request.getfixturevalue(f"icechunk{version}_python"), tmp_path, where)
        repo = Repository.open(str(tmp_path / "repo"))
    monkeypatch.setattr(M, "_BATCH", 3)  # layouts learned in a first batch, then read by C
    for source, node_id in _manifest_arrays(repo):
        _assert_same_batches(
            _batches(source, node_id, True, monkeypatch), _batches(source, node_id, False, monkeypatch)
        )


def _read(source, node_id: str, c: bool, monkeypatch):
    try:
        return _batches(source, node_id, c, monkeypatch)
    except ZSCorrupt as exc:
        return str(exc)


def test_damaged_manifests_read_alike_or_fail_alike(history, monkeypatch):
    """Bytes of a real manifest overwritten at random: the C extension reads a batch only where the
    numpy code reads the same numbers; where that fails, it fails with the same one line."""
    monkeypatch.setattr(M, "_BATCH", 256)
    source, node_id = next(_manifest_arrays(history))
    payload = source.payload
    rng = random.Random(30)
    outcomes = set()
    for _ in range(150):
        damaged = bytearray(payload)
        for _ in range(rng.choice([1, 3, 20])):
            at = rng.randrange(len(damaged))
            damaged[at] = rng.choice([0, 1, 0x7F, 0xFF, rng.randrange(256)])
        copy = M.ManifestBuffer(
            bytes(damaged), "damaged", source.arrays, source.dictionary, source.compression_algorithm
        )
        with_c, without = _read(copy, node_id, True, monkeypatch), _read(copy, node_id, False, monkeypatch)
        if isinstance(without, str):
            assert with_c == without
            outcomes.add("fails")
        else:
            _assert_same_batches(with_c, without)
            outcomes.add("reads")
    assert outcomes == {"fails", "reads"}


@pytest.mark.parametrize("c", [True, False], ids=["c", "numpy"])
def test_the_diff_is_the_difference_of_the_decoded_refs(history, monkeypatch, c):
    """The commit's diff (several windows, batches read by C or by numpy) names exactly the refs that
    differ from the parent's, decoded one by one, and the chunks the commit dropped."""
    monkeypatch.setattr(M, "_BATCH", 500)
    monkeypatch.setattr(M, "_refscan", REFSCAN if c else None)
    child = next(info for info in history.snapshots() if info.message == "rewrite, keep, add, drop")
    refs = {sid: {ref.index: ref for ref in history.chunk_refs(sid, "/v")} for sid in (child.parent_id, child.id)}
    before, after = refs[child.parent_id], refs[child.id]
    arrays = {}
    for sid in (child.id, child.parent_id):
        node = next(n for n in history.snapshot(sid).nodes if n.path == "/v")
        arrays[sid] = node.id, tuple((m.id, tuple(tuple(e) for e in m.extents)) for m in node.manifests)
    (node_id, manifests), (_, base) = arrays[child.id], arrays[child.parent_id]
    changed, removed = [], []
    for batch, gone in refdelta.array_changes(history, node_id, manifests, base, "test"):
        changed += [] if batch is None else list(batch.refs())
        removed += [tuple(row) for row in np.asarray(gone).tolist()]
    assert changed == [ref for index, ref in sorted(after.items()) if before.get(index) != ref]
    assert sorted(removed) == sorted(index for index in before if index not in after)
    kinds = {ref.kind.value for ref in changed}
    assert kinds == {"native", "virtual"} and len(removed) > 10 and any(ref.checksum_etag for ref in changed)


def test_a_first_ref_with_too_many_coordinates_for_its_batch_is_named(history, monkeypatch):
    """The first ref of a range whose index vector claims more coordinates than all the batch's refs
    could have in the buffer: the batch is refused in one line, not first read into an array of that
    size. (icechunk lays ref 0 out at the buffer's end, which bounds the claim; a writer may as well put
    ref 0's vector first.)"""
    source, node_id = next(_manifest_arrays(history))
    real = list(source.chunk_refs(node_id))
    refs = [real[i % len(real)]._replace(index=(i, 0)) for i in range(5000)]
    raw = first_ref_first_manifest("0" * 20, node_id, refs)
    rewritten = decode_manifest(raw, "damaged").source
    columns = rewritten._columns(node_id, 0, 1, None)
    index = int(columns.pos[0] + columns.fields[M._INDEX][0])
    vector = index + int.from_bytes(rewritten.payload[index : index + 4], "little")
    count = (len(rewritten.payload) - vector - 4) // 4  # the most one vector there can hold
    assert len(refs) * 4 * count > 20 * len(rewritten.payload)
    damaged = bytearray(rewritten.payload)
    damaged[vector : vector + 4] = count.to_bytes(4, "little")
    for c in (True, False):
        broken = M.ManifestBuffer(
            bytes(damaged), "damaged", rewritten.arrays, rewritten.dictionary, rewritten.compression_algorithm
        )
        tracemalloc.start()
        try:
            message = _read(broken, node_id, c, monkeypatch)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert isinstance(message, str) and message.startswith(f"damaged: array {node_id} ref "), message
        assert "\n" not in message
        assert peak < len(refs) * count, peak  # a quarter of an array of the claimed coordinates, at the most
