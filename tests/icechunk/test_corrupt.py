"""Bad input to zsarchive.icechunk: every failure is one clear ZSError / ZSCorrupt naming the file."""

from __future__ import annotations

import random
import re
import shutil
import struct
from pathlib import Path

import pytest
from click.testing import CliRunner

from toolkit.oracle import repo_path
from toolkit.cli import one_line_error
from toolkit.icechunk_files import repack, unpack
from zsarchive.cli import main
from zsarchive.errors import ZSCorrupt, ZSError
from zsarchive.icechunk import Repository
from zsarchive.icechunk.header import HEADER_LENGTH
from zsarchive.icechunk.manifest import decode_manifest
from zsarchive.icechunk.repo_info import decode_repo_info
from zsarchive.icechunk.snapshot import decode_snapshot
from zsarchive.icechunk.txlog import decode_transaction_log

V2 = repo_path(2)


@pytest.fixture
def repo(tmp_path) -> Path:
    """A private copy of the V2 fixture to damage."""
    target = tmp_path / "repo"
    shutil.copytree(V2, target)
    return target


def main_snapshot(root: Path) -> str:
    return Repository.open(str(root)).resolve("main")


def root_vtable(payload: bytes) -> tuple[int, int]:
    """(root table position, its vtable position)."""
    table = struct.unpack_from("<I", payload, 0)[0]
    return table, table - struct.unpack_from("<i", payload, table)[0]


def test_not_a_repository(tmp_path):
    with pytest.raises(ZSError, match="not an Icechunk repository"):
        Repository.open(str(tmp_path))
    with pytest.raises(ZSError, match="not a directory"):
        Repository.open(str(tmp_path / "nope"))
    with pytest.raises(ZSError, match="unsupported location"):
        Repository.open("ftp://host/repo")
    with pytest.raises(ZSError, match="names no bucket"):
        Repository.open("s3:///repo")
    one_line_error(
        CliRunner().invoke(main, ["icechunk", "inspect", str(tmp_path), "--repo-info"]), "not an Icechunk repository"
    )


def test_wrong_magic(repo):
    path = repo / "snapshots" / main_snapshot(repo)
    raw = bytearray(path.read_bytes())
    raw[0:3] = b"ICY"
    path.write_bytes(bytes(raw))
    with pytest.raises(ZSCorrupt, match=rf"{path.name}: not an Icechunk file \(wrong magic"):
        Repository.open(str(repo)).snapshot(path.name)
    one_line_error(CliRunner().invoke(main, ["icechunk", "inspect", str(repo), "--snapshot", path.name]), "wrong magic")


def test_unknown_file_type_and_wrong_file_type(repo):
    sid = main_snapshot(repo)
    path = repo / "snapshots" / sid
    raw = bytearray(path.read_bytes())
    raw[HEADER_LENGTH - 2] = 9
    path.write_bytes(bytes(raw))
    with pytest.raises(ZSCorrupt, match=rf"snapshots/{sid}: unknown file type 9 at offset 37"):
        Repository.open(str(repo)).snapshot(sid)
    raw[HEADER_LENGTH - 2] = 2  # a manifest header on a snapshot
    path.write_bytes(bytes(raw))
    with pytest.raises(ZSCorrupt, match="file type is manifest, expected snapshot"):
        Repository.open(str(repo)).snapshot(sid)


def test_truncated_file_and_payload(repo):
    sid = main_snapshot(repo)
    path = repo / "snapshots" / sid
    raw = path.read_bytes()
    path.write_bytes(raw[:-7])
    with pytest.raises(ZSCorrupt, match=rf"{sid}: zstd payload at offset 39 is truncated"):
        Repository.open(str(repo)).snapshot(sid)
    path.write_bytes(raw[:20])
    with pytest.raises(ZSCorrupt, match="truncated: 20 bytes"):
        Repository.open(str(repo)).snapshot(sid)
    one_line_error(CliRunner().invoke(main, ["icechunk", "inspect", str(repo), "--snapshot", sid]), "truncated")


def test_corrupt_zstd_payload(repo):
    raw = (repo / "repo").read_bytes()
    (repo / "repo").write_bytes(raw[: HEADER_LENGTH + 10] + bytes(20) + raw[HEADER_LENGTH + 30 :])
    with pytest.raises(ZSCorrupt, match=r"/repo: zstd payload at offset 39 does not decompress"):
        Repository.open(str(repo))
    one_line_error(CliRunner().invoke(main, ["icechunk", "inspect", str(repo), "--repo-info"]), "does not decompress")


def test_offset_outside_the_buffer(repo):
    sid = main_snapshot(repo)
    path = repo / "snapshots" / sid
    header, payload = unpack(path.read_bytes())
    struct.pack_into("<I", payload, 0, len(payload) + 100)
    path.write_bytes(repack(header, payload))
    with pytest.raises(ZSCorrupt, match=rf"snapshots/{sid}: table at \d+ outside the \d+-byte buffer"):
        Repository.open(str(repo)).snapshot(sid)


def test_vector_length_outside_the_buffer(repo):
    sid = main_snapshot(repo)
    path = repo / "snapshots" / sid
    header, payload = unpack(path.read_bytes())
    table, vtable = root_vtable(payload)
    nodes_field = table + struct.unpack_from("<H", payload, vtable + 8)[0]  # slot 2: nodes
    nodes = nodes_field + struct.unpack_from("<I", payload, nodes_field)[0]
    struct.pack_into("<I", payload, nodes, 10**6)
    path.write_bytes(repack(header, payload))
    with pytest.raises(ZSCorrupt, match=rf"{sid}: vector at {nodes} of length 1000000 runs past the buffer end"):
        Repository.open(str(repo)).snapshot(sid)


def test_missing_required_field(repo):
    sid = main_snapshot(repo)
    path = repo / "snapshots" / sid
    header, payload = unpack(path.read_bytes())
    _table, vtable = root_vtable(payload)
    struct.pack_into("<H", payload, vtable + 12, 0)  # slot 4: message
    path.write_bytes(repack(header, payload))
    with pytest.raises(ZSCorrupt, match=rf"{sid}: required field message is missing"):
        Repository.open(str(repo)).snapshot(sid)


def _point_node_slots(repo: Path, sid: str, choose) -> list[str]:
    """Rewrite the node offsets of snapshot ``sid``: slot i points to node ``choose(i, n)``; the
    original node paths are returned."""
    path = repo / "snapshots" / sid
    header, payload = unpack(path.read_bytes())
    table, vtable = root_vtable(payload)
    nodes_field = table + struct.unpack_from("<H", payload, vtable + 8)[0]
    nodes = nodes_field + struct.unpack_from("<I", payload, nodes_field)[0]
    count = struct.unpack_from("<I", payload, nodes)[0]
    slots = [nodes + 4 + 4 * i for i in range(count)]
    targets = [slot + struct.unpack_from("<I", payload, slot)[0] for slot in slots]
    for i, slot in enumerate(slots):
        struct.pack_into("<I", payload, slot, targets[choose(i, count)] - slot)
    path.write_bytes(repack(header, payload))
    return [n.path for n in decode_snapshot(V2.joinpath("snapshots", sid).read_bytes(), sid).nodes]


@pytest.mark.parametrize("damage", ["swapped", "duplicated"])
def test_unsorted_or_duplicated_nodes(repo, damage):
    """Out of order or repeated in icechunk's order (bytes of the whole path): one line naming the
    file and both entries, from the library and from every command reading the snapshot."""
    sid = main_snapshot(repo)
    if damage == "swapped":
        paths = _point_node_slots(repo, sid, lambda i, n: {1: 2, 2: 1}.get(i, i))
        later, earlier = paths[1], paths[2]
    else:
        paths = _point_node_slots(repo, sid, lambda i, n: 1 if i == 2 else i)
        later, earlier = paths[1], paths[1]
    expected = (
        f"{sid}: nodes (by path) MUST be sorted, but entry 2 ({later!r}) does not come after entry 1 ({earlier!r})"
    )
    with pytest.raises(ZSCorrupt, match=re.escape(expected)):
        Repository.open(str(repo)).snapshot(sid)
    one_line_error(CliRunner().invoke(main, ["icechunk", "inspect", str(repo), "--snapshot", sid]), expected)
    one_line_error(CliRunner().invoke(main, ["export", str(repo), str(repo.parent / "out.zs")]), expected)
    assert not (repo.parent / "out.zs").exists()


def test_unsorted_repo_branches(repo):
    header, payload = unpack((repo / "repo").read_bytes())
    table, vtable = root_vtable(payload)
    field = table + struct.unpack_from("<H", payload, vtable + 8)[0]  # slot 2: branches
    vec = field + struct.unpack_from("<I", payload, field)[0]
    assert struct.unpack_from("<I", payload, vec)[0] >= 2
    slot1, slot2 = vec + 4, vec + 8
    pos1 = slot1 + struct.unpack_from("<I", payload, slot1)[0]
    pos2 = slot2 + struct.unpack_from("<I", payload, slot2)[0]
    struct.pack_into("<I", payload, slot1, pos2 - slot1)
    struct.pack_into("<I", payload, slot2, pos1 - slot2)
    (repo / "repo").write_bytes(repack(header, payload))
    with pytest.raises(ZSCorrupt, match=r"/repo: branches names MUST be sorted"):
        Repository.open(str(repo))


def test_snapshot_references_a_missing_manifest(repo):
    sid = main_snapshot(repo)
    r = Repository.open(str(repo))
    node = next(n for n in r.snapshot(sid).nodes if n.manifests)
    (repo / "manifests" / node.manifests[0].id).unlink()
    with pytest.raises(
        ZSCorrupt,
        match=rf"manifests/{node.manifests[0].id}: missing, but snapshot {sid} "
        rf"\(array '{node.path}'\) references it",
    ):
        list(r.chunk_refs(sid, node.path))


def test_missing_snapshot_and_unknown_ref(repo):
    r = Repository.open(str(repo))
    with pytest.raises(ZSError, match="no branch, tag or snapshot named 'nope'"):
        r.resolve("nope")
    with pytest.raises(ZSError, match="snapshots/AAAAAAAAAAAAAAAAAAAA: no such file"):
        r.snapshot("AAAAAAAAAAAAAAAAAAAA")
    sid = main_snapshot(repo)
    (repo / "snapshots" / sid).unlink()
    one_line_error(CliRunner().invoke(main, ["icechunk", "inspect", str(repo), "--snapshot", sid]), "no such file")


def test_snapshot_file_holding_another_id(repo):
    r = Repository.open(str(repo))
    ids = [s.id for s in r.snapshots()]
    shutil.copy(repo / "snapshots" / ids[1], repo / "snapshots" / ids[0])
    with pytest.raises(ZSCorrupt, match=rf"holds snapshot {ids[1]}, not {ids[0]}"):
        Repository.open(str(repo)).snapshot(ids[0])


def _manifest_with_refs(root: Path) -> Path:
    return max((root / "manifests").iterdir(), key=lambda p: p.stat().st_size)


def test_manifest_ref_table_outside_the_buffer(repo):
    path = _manifest_with_refs(repo)
    header, payload = unpack(path.read_bytes())
    manifest = decode_manifest(path.read_bytes(), str(path))
    start, _count = manifest.source.arrays[manifest.arrays[0].node_id]
    struct.pack_into("<I", payload, start, len(payload))
    path.write_bytes(repack(header, payload))
    broken = decode_manifest(path.read_bytes(), path.name)
    with pytest.raises(ZSCorrupt, match=rf"{path.name}: array \w+ ref 0: an offset points outside the \d+-byte"):
        list(broken.chunk_refs(broken.arrays[0].node_id))


def test_manifest_refs_unsorted(repo):
    path = _manifest_with_refs(repo)
    header, payload = unpack(path.read_bytes())
    manifest = decode_manifest(path.read_bytes(), str(path))
    start, count = manifest.source.arrays[manifest.arrays[0].node_id]
    assert count >= 2
    pos1 = start + struct.unpack_from("<I", payload, start)[0]
    pos2 = start + 4 + struct.unpack_from("<I", payload, start + 4)[0]
    struct.pack_into("<I", payload, start, pos2 - start)
    struct.pack_into("<I", payload, start + 4, pos1 - start - 4)
    path.write_bytes(repack(header, payload))
    broken = decode_manifest(path.read_bytes(), path.name)
    with pytest.raises(ZSCorrupt, match=rf"{path.name}: array \w+ refs MUST be sorted by index, but ref 1"):
        list(broken.chunk_refs(broken.arrays[0].node_id))


DECODERS = {
    "repo": decode_repo_info,
    "snapshots": decode_snapshot,
    "manifests": decode_manifest,
    "transactions": decode_transaction_log,
}


def _exhaust(decoder, raw: bytes, name: str) -> None:
    result = decoder(raw, name)
    for info in getattr(result, "arrays", []):
        list(result.chunk_refs(info.node_id))
        result.kind_counts(info.node_id)


@pytest.mark.parametrize("kind", sorted(DECODERS))
def test_random_damage_is_corruption_or_harmless(kind):
    """Flip bytes of real payloads: decoding either works or raises ZSCorrupt, never anything else."""
    rng = random.Random(f"icechunk-{kind}")
    files = [V2 / "repo"] if kind == "repo" else sorted((V2 / kind).iterdir())
    decoder = DECODERS[kind]
    for trial in range(150):
        path = rng.choice(files)
        header, payload = unpack(path.read_bytes())
        for _ in range(rng.randint(1, 4)):
            payload[rng.randrange(len(payload))] = rng.randrange(256)
        raw = repack(header, payload)
        try:
            _exhaust(decoder, raw, f"{path.name}#{trial}")
        except ZSCorrupt as exc:
            assert f"{path.name}#{trial}" in str(exc)


def test_manifest_refs_with_the_wrong_number_of_coordinates(repo):
    """A snapshot whose manifest extents disagree with the refs' dimensionality is corrupt, not empty."""
    sid = main_snapshot(repo)
    r = Repository.open(str(repo))
    node = next(n for n in r.snapshot(sid).nodes if n.manifests and len(n.manifests[0].extents) == 2)
    path = repo / "snapshots" / sid
    header, payload = unpack(path.read_bytes())
    # Find the extents vector of this node's first ManifestRef by its [from, to] pairs and shrink it to 1.
    extents = node.manifests[0].extents
    pattern = struct.pack("<I", 2) + b"".join(struct.pack("<II", lo, hi) for lo, hi in extents)
    at = bytes(payload).find(pattern)
    assert at >= 0
    struct.pack_into("<I", payload, at, 1)
    path.write_bytes(repack(header, payload))
    with pytest.raises(ZSCorrupt, match=r"has 2 coordinates, but the manifest ref extents have 1 dimensions"):
        list(Repository.open(str(repo)).chunk_refs(sid, node.path))
