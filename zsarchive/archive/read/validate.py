"""What ``zs validate`` checks of an archive beyond the ZS format: that its records mean something.

Every record of every family has the documented shape; the header's counts are the records really
there; every snapshot a ref, node, chunk ref, summary, history or child record names has a record;
``T`` mirrors ``S``; format 2 chunk refs belong to an array of their snapshot, and each array's
``since`` lies in its snapshot's history; format 3 chunk pieces cover each file without gap or
overlap; and every invariant between records that readers and a restore rely on holds
(:mod:`~zsarchive.archive.read.invariants`: keys unique, ids in their canonical spelling, nodes
agreeing with their zarr.json, refs within their embedded files, shard indexes agreeing with the
embedded shards, parent links a tree). Small families are held in memory (one entry per snapshot and
per array node); chunk refs and chunk data stream.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Callable, Iterator

from zsarchive.archive.format import schema
from zsarchive.archive.format.pieces import read_pieces
from zsarchive.archive.read.chain import Chain, open_chain, records_format
from zsarchive.archive.read.invariants import (
    RefReach,
    SnapshotNodes,
    UniqueKeys,
    check_history,
    check_location_dictionary,
    check_ref_rows,
    check_shape,
    check_shard_index,
    ops_log_file_names,
)
from zsarchive.archive.format.schema import fault
from zsarchive.archive.read.reader import names_backup_set, open_archive
from zsarchive.archive.read.refrows import chunk_ref_rows
from zsarchive.archive.format.fragments import Holding, HoldingsTally
from zsarchive.archive.format.header import (
    ArchiveHeader,
    archive_metadata,
    has_chunk_pieces,
    history_from_timeline,
    keeps_file_forms,
    keeps_virtual_data,
    refs_by_manifest,
)
from zsarchive.archive.format.views import (
    CHUNK_REF_SHAPES,
    FAMILY_VIEWS,
    ChildKey,
    ChunkBytesKey,
    ChunkBytesValue,
    ChunkRefKey,
    ChunkRefValue,
    FileKey,
    FileValue,
    HistoryKey,
    HistoryValue,
    ManifestRefKey,
    NodeKey,
    NodeValue,
    OpsValue,
    RefKey,
    RefValue,
    RepoFactKey,
    RepoFactValue,
    RepoFile,
    ShardIndexKey,
    ShardIndexValue,
    SnapshotKey,
    SnapshotTimeKey,
    SnapshotValue,
    TxlogKey,
    VirtualAliasValue,
    VirtualPieceKey,
    VirtualRangeKey,
    is_id,
)
from zsarchive.errors import ZSCorrupt
from zsarchive.limits import load_json
from zsarchive.walk import parent_chain
from zsarchive.zs.reader import ZS
from zsarchive.zs.validate import validate


@dataclass
class _Facts:
    """What the small families say, gathered before the chunk refs are checked against it."""

    parents: dict[str, str | None] = field(default_factory=dict)
    flushed: dict[str, int] = field(default_factory=dict)
    arrays: set[tuple[str, str]] = field(default_factory=set)  # (snapshot id, node id)
    counts: Counter = field(default_factory=Counter)
    reach: RefReach = field(default_factory=RefReach)


def _records(
    zs: ZS, family: bytes, counts: Counter | None = None, unique: bool = True
) -> Iterator[tuple[tuple, tuple, bytes]]:
    """(key, value, record) of every record of a family, counted into ``counts`` if given; each key once
    (``unique``: checked here, else by the caller)."""
    keys = UniqueKeys() if unique else None
    for rec in zs.search(prefix=family):
        _, key, value = schema.split(rec)
        if keys is not None:
            keys.check(rec)
        if counts is not None:
            counts[family] += 1
        yield key, value, rec


def _fail(rec: bytes, family: bytes, problem: str) -> ZSCorrupt:
    return fault(family, schema.split(rec)[1], problem)


def _shape(ok: bool, rec: bytes, family: bytes, what: str) -> None:
    if not ok:
        raise _fail(rec, family, f"is not {what}")


def _snapshots(zs: ZS, facts: _Facts) -> None:
    for key, value, rec in _records(zs, schema.SNAPSHOT, facts.counts):
        check_shape(schema.SNAPSHOT, key, value)
        sid, snapshot = SnapshotKey.decode(key).snapshot_id, SnapshotValue.decode(value)
        facts.parents[sid] = snapshot.parent_id
        facts.flushed[sid] = snapshot.flushed_at
    check_history(facts.parents)


def _history(facts: _Facts, snapshot_id: str, loop: Callable[[str], Exception] | None = None) -> Iterator[str]:
    """The snapshot and its ancestors the archive holds (``loop``: as for :func:`parent_chain`)."""
    for current in parent_chain(snapshot_id, facts.parents.__getitem__, loop):
        if current not in facts.parents:
            return
        yield current


def _known(facts: _Facts, sid: object, rec: bytes, family: bytes, role: str) -> None:
    if sid not in facts.parents:
        raise _fail(rec, family, f"names {role} {sid!r}, which has no snapshot record")


def _small_families(zs: ZS | Chain, facts: _Facts, format_version: int) -> None:
    forms = keeps_file_forms(records_format(zs, format_version))
    for key, value, rec in _records(zs, schema.REFS, facts.counts):
        check_shape(schema.REFS, key, value)
        snapshot_id = RefValue.decode(value).snapshot_id
        if RefKey.decode(key).deleted:
            if snapshot_id is not None and forms:  # a V1 tag's ref.json names one, maybe collected since
                _shape(is_id(snapshot_id), rec, schema.REFS, "a deleted tag's snapshot id")
            else:
                _shape(snapshot_id is None, rec, schema.REFS, "a deleted tag without a snapshot")
        else:
            _known(facts, snapshot_id, rec, schema.REFS, "snapshot")
    for key, value, rec in _records(zs, schema.SNAPSHOT_TIME, facts.counts):
        check_shape(schema.SNAPSHOT_TIME, key, value)
        when = SnapshotTimeKey.decode(key)
        _known(facts, when.snapshot_id, rec, schema.SNAPSHOT_TIME, "snapshot")
        if facts.flushed[when.snapshot_id] != when.flushed_at:
            raise _fail(
                rec,
                schema.SNAPSHOT_TIME,
                f"says {when.flushed_at}, the snapshot record {facts.flushed[when.snapshot_id]}",
            )
    for key, value, rec in _records(zs, schema.CHILDREN, facts.counts):
        check_shape(schema.CHILDREN, key, value)
        child = ChildKey.decode(key)
        _known(facts, child.child_id, rec, schema.CHILDREN, "child snapshot")
        if facts.parents[child.child_id] != child.parent_id:
            raise _fail(rec, schema.CHILDREN, f"but the parent of {child.child_id} is {facts.parents[child.child_id]}")
    for key, value, rec in _records(zs, schema.TXLOG, facts.counts):
        check_shape(schema.TXLOG, key, value)
        _known(facts, TxlogKey.decode(key).snapshot_id, rec, schema.TXLOG, "snapshot")
    view = records_format(zs, format_version)
    history_version = 2 if history_from_timeline(view) else 1
    for key, value, rec in _records(zs, schema.CHUNK_HISTORY, facts.counts):
        version = schema.record_version(rec)
        _shape(
            version == history_version and HistoryValue.well_formed(value, version),
            rec,
            schema.CHUNK_HISTORY,
            f"record version {history_version}"
            + (" (node_id, coords, flushed_at, snapshot_id) -> (in_log)" if history_version == 2 else ""),
        )
        _known(
            facts,
            HistoryKey.decode(key).snapshot_id if HistoryKey.well_formed(key) else None,
            rec,
            schema.CHUNK_HISTORY,
            "snapshot",
        )
    nodes = SnapshotNodes()
    for key, value, rec in _records(zs, schema.NODE, facts.counts):
        sid, components = NodeKey.decode(key)
        _known(facts, sid, rec, schema.NODE, "snapshot")
        node = nodes.check(sid, components, value)
        if not node.is_array:
            continue
        facts.arrays.add((sid, node.node_id))
        if not refs_by_manifest(format_version):
            _shape(NodeValue.holds_since(value), rec, schema.NODE, "an array with its since snapshot (format 2)")
            if node.since not in _history(facts, sid):
                raise _fail(rec, schema.NODE, f"since {node.since!r} is not in the history of snapshot {sid}")


def _chunk_refs(zs: ZS, facts: _Facts, format_version: int) -> None:
    refs_per_manifest: Counter = Counter()
    by_manifest = refs_by_manifest(format_version)
    array = None  # format 2: the array whose rows are checked together (its records are contiguous)
    for key, value, rec in _records(zs, schema.CHUNK_REF, facts.counts, unique=by_manifest):
        kind = ChunkRefValue.kind_of(value)
        _shape(
            (ManifestRefKey if by_manifest else ChunkRefKey).well_formed(key) and kind is not None,
            rec,
            schema.CHUNK_REF,
            "a chunk ref of a known kind",
        )
        _shape(ChunkRefValue.well_formed(value), rec, schema.CHUNK_REF, CHUNK_REF_SHAPES.get(kind, ""))
        if not by_manifest:
            ref = ChunkRefKey.decode(key)
            if ref.node_id != array:
                array = ref.node_id
                check_ref_rows(chunk_ref_rows(zs, array), array, facts.reach)
            _known(facts, ref.snapshot_id, rec, schema.CHUNK_REF, "snapshot")
            if (ref.snapshot_id, ref.node_id) not in facts.arrays:
                raise _fail(rec, schema.CHUNK_REF, f"snapshot {ref.snapshot_id} has no array {ref.node_id!r}")
        else:
            _shape(kind != schema.REMOVED, rec, schema.CHUNK_REF, "a ref (removals exist only in format 2)")
            refs_per_manifest[ManifestRefKey.decode(key).manifest_id] += 1
    if refs_by_manifest(format_version):
        _manifest_counts(zs, refs_per_manifest)


def _manifest_counts(zs: ZS, refs_per_manifest: Counter) -> None:
    """Format 1: every manifest a snapshot lists holds as many ref records as the snapshot says."""
    for key, value, rec in _records(zs, schema.SNAPSHOT):
        for item in SnapshotValue.decode(value).manifests:
            manifest = SnapshotValue.manifest_file(item)
            _shape(
                manifest is not None, rec, schema.SNAPSHOT, "a manifest file (manifest_id, size_bytes, num_chunk_refs)"
            )
            manifest_id, refs = manifest
            if refs_per_manifest[manifest_id] != refs:
                raise _fail(
                    rec,
                    schema.SNAPSHOT,
                    f"manifest {manifest_id} lists {refs} chunk refs, the archive "
                    f"holds {refs_per_manifest[manifest_id]}",
                )


def _chunk_files(zs: ZS, facts: _Facts, format_version: int) -> None:
    """Embedded chunk files and shard indexes: in format 3 each file's pieces start at 0 and follow
    each other without gap or overlap, and each shard index has the size of some index."""
    chunk_id, end = None, 0
    pieces = has_chunk_pieces(format_version)
    for key, value, rec in _records(zs, schema.CHUNK_DATA, facts.counts):
        _shape(
            ChunkBytesKey.well_formed(key, pieces) and ChunkBytesValue.well_formed(value),
            rec,
            schema.CHUNK_DATA,
            "(chunk_id, start) -> (bytes)" if pieces else "(chunk_id) -> (bytes)",
        )
        piece = ChunkBytesKey.decode(key)
        if piece.chunk_id != chunk_id and chunk_id is not None:
            facts.reach.check(chunk_id, end)  # the last file's size is known
        expected = end if piece.chunk_id == chunk_id else 0
        if pieces and piece.start != expected:
            raise _fail(
                rec, schema.CHUNK_DATA, f"piece starts at {piece.start}, the file's pieces so far end at {expected}"
            )
        chunk_id, end = piece.chunk_id, expected + len(ChunkBytesValue.decode(value).data)
    if chunk_id is not None:
        facts.reach.check(chunk_id, end)
    for key, value, rec in _records(zs, schema.SHARD_INDEX, facts.counts):
        _shape(
            ShardIndexKey.well_formed(key) and _shard_index_fits(value, ShardIndexKey.decode(key).length),
            rec,
            schema.SHARD_INDEX,
            FAMILY_VIEWS[schema.SHARD_INDEX].shape,
        )
        if pieces:
            check_shard_index(
                ShardIndexKey.decode(key),
                ShardIndexValue.decode(value),
                lambda cid, start, stop: read_pieces(zs, cid, start, stop),
            )


def _virtual_ranges(zs: ZS | Chain, facts: _Facts, view: int) -> None:
    """Kept virtual ranges (format 7): each range's pieces start at its offset and follow each other up to
    its end, without gap or overlap; an alias names another checksum of the same range that has pieces,
    and a checksum with an alias has no pieces (each key once: :func:`_records`)."""
    family = schema.VIRTUAL_DATA
    shape = (
        "(location, offset, length, etag, last_modified, start) -> (bytes) or "
        "(location, offset, length, etag, last_modified) -> (etag, last_modified), format 7 on"
    )
    current: VirtualRangeKey | None = None  # the range whose pieces are being read
    end = 0  # where its pieces end so far
    span: tuple | None = None  # (location, offset, length) of the records so far
    pinned: set = set()  # the span's checksums with pieces
    aliased: dict[tuple, tuple[tuple, bytes]] = {}  # the span's aliases: checksum -> (target, record)

    def close_range(rec: bytes) -> None:
        if current is not None and end != current.stop:
            raise _fail(rec, family, f"the pieces of the range before it end at {end}, the range at {current.stop}")

    def close_span() -> None:
        for target, rec in aliased.values():
            if target not in pinned:
                raise _fail(rec, family, f"its alias names checksum {target!r}, under which the range has no pieces")

    for key, value, rec in _records(zs, family, facts.counts):
        is_piece = VirtualPieceKey.well_formed(key) and ChunkBytesValue.well_formed(value)
        is_alias = VirtualRangeKey.well_formed(key) and VirtualAliasValue.well_formed(value)
        _shape(
            keeps_virtual_data(view) and schema.record_version(rec) == 1 and (is_piece or is_alias), rec, family, shape
        )
        found = VirtualPieceKey.decode(key).range if is_piece else VirtualRangeKey.decode(key)
        if found.span != span:
            close_range(rec)
            close_span()
            span, pinned, aliased, current = found.span, set(), {}, None
        if is_alias:
            close_range(rec)
            current = None
            target = tuple(VirtualAliasValue.decode(value))
            if target == found.pin:
                raise _fail(rec, family, "its alias names its own checksum")
            aliased[found.pin] = (target, rec)
            continue
        piece = VirtualPieceKey.decode(key)
        if found != current:
            close_range(rec)
            if found.pin in aliased:
                raise _fail(rec, family, "a range kept both as an alias and as pieces")
            current, end = found, found.offset
            pinned.add(found.pin)
        if piece.start != end:
            raise _fail(rec, family, f"piece starts at {piece.start}, the range's pieces so far end at {end}")
        end += len(ChunkBytesValue.decode(value).data)
        if end > found.stop:
            raise _fail(rec, family, f"piece ends at {end}, past the range's end {found.stop}")
    close_range(schema.VIRTUAL_DATA)
    close_span()


def _shard_index_fits(value: tuple, length: int) -> bool:
    try:
        return ShardIndexValue.decode(value).fits(length)
    except ValueError:
        return False


def _header(zs: ZS, facts: _Facts, format_version: int) -> None:
    headers = list(_records(zs, schema.HEADER))
    if len(headers) != 1:
        raise ZSCorrupt(f"archive: {len(headers)} archive header records, expected exactly one")
    key, value, rec = headers[0]
    try:
        header: ArchiveHeader | None = ArchiveHeader.decode(value, "archive")
    except ZSCorrupt:
        header = None
    _shape(
        header is not None and header.format_version == format_version,
        rec,
        schema.HEADER,
        f"(format_version {format_version}, source_spec_version, export_time, exporter, counts)",
    )
    claimed = header.counts
    _chunk_files(zs, facts, format_version)
    _virtual_ranges(zs, facts, records_format(zs, format_version))
    _repo_file(zs, facts)
    for key, value, rec in _records(zs, schema.FILES, facts.counts):
        _shape(keeps_file_forms(records_format(zs, format_version)), rec, schema.FILES, "a record of format 6 on")
        check_shape(schema.FILES, key, value)
        check_location_dictionary(FileKey.decode(key).path, FileValue.decode(value).location_dictionary)
    for family, name in schema.FAMILY_NAMES.items():
        there = facts.counts[family]
        if family != schema.HEADER and claimed.get(name, 0) != there:
            raise _fail(rec, schema.HEADER, f"counts {claimed.get(name, 0)} {name} records, the archive holds {there}")


def _repo_file(zs: ZS | Chain, facts: _Facts) -> None:
    """The ops log's and the repository facts' records counted; ``repo_file`` (format 6) has its shape and
    divides exactly the ops log's entries among the repo info files (a restore writes them so)."""
    repo_file = None
    for key, value, rec in _records(zs, schema.REPO, facts.counts):
        if len(key) == 1 and RepoFactKey.decode(key).name == "repo_file":
            repo_file = value, rec
    entries = [
        (key, OpsValue.decode(value).backup_path if len(value) >= 3 else None)
        for key, value, _ in _records(zs, schema.OPS, facts.counts)
    ]
    if repo_file is not None:
        value, rec = repo_file
        text = RepoFactValue.decode(value).json if len(value) == 1 else None
        fact = (
            load_json(text, f"archive {schema.FAMILY_NAMES[schema.REPO]} record repo_file")
            if isinstance(text, str)
            else None
        )
        _shape(
            RepoFile.well_formed(fact, len(entries)),
            rec,
            schema.REPO,
            f'{{"implementation": a name of at most 24 bytes, "ops_log_files": counts adding up to the '
            f'{len(entries)} ops-log entries}}',
        )
        ops_log_file_names(RepoFile.decode(fact).ops_log_files, entries[::-1])


def validate_fragments(chain: Chain) -> None:
    """Each fragment of a chain holds the records its header record says, per family (records,
    tombstones, first key elements), and tombstones hold nothing after their version byte."""
    for member in chain.members:
        if member.info is None:
            continue
        tally = HoldingsTally(strict=True)
        tally.add(_each_key_once(member.zs.search(stop=schema.HEADER)))
        found = tally.info(member.info.covers, member.info.records_format)
        for tag in sorted(set(found.holdings) | set(member.info.holdings)):
            said, held = member.info.holdings.get(tag), found.holdings.get(tag)
            if said != held:
                name = schema.FAMILY_NAMES.get(tag, repr(tag))
                raise ZSCorrupt(
                    f"{member.location}: its header record describes its {name} records as "
                    f"{_described(said)}, the fragment holds {_described(held)}"
                )
        said_bits = None if member.info.chunk_filter is None else member.info.chunk_filter.bits
        if said_bits != (None if found.chunk_filter is None else found.chunk_filter.bits):
            raise ZSCorrupt(
                f"{member.location}: its header record's chunk ref filter is not the filter of its chunk refs"
            )


def _each_key_once(records: Iterator[bytes]) -> Iterator[bytes]:
    """``records`` (one archive's, in key order) as they pass, each key once (a chain's view would take one)."""
    keys = UniqueKeys()
    for rec in records:
        keys.check(rec)
        yield rec


def _described(held: Holding | None) -> str:
    if held is None:
        return "none"
    firsts = "" if held.firsts is None else f" under {len(held.firsts)} ids"
    return f"{held.records} ({held.tombstones} tombstones){firsts}"


def validate_archive(zs: ZS | Chain, format_version: int) -> None:
    """Check the meaning of an archive's records; ZSCorrupt (one line, naming the record) at the first fault."""
    facts = _Facts()
    _snapshots(zs, facts)
    _small_families(zs, facts, format_version)
    _chunk_refs(zs, facts, format_version)
    _header(zs, facts, format_version)


def validate_file(
    source: str, parallelism: int | str = "guess", progress: Callable[[int, int], None] | None = None
) -> None:
    """``zs validate``: every rule of the ZS format in the file at ``source`` (a path or URL), then, for a
    repo archive, what its records mean (of a fragment: its chain's links, descriptions and view); of a
    backup set, its newest chain's newest archive; ZSCorrupt naming the file and the first fault."""
    if names_backup_set(source):
        newest, _, _ = open_archive(source)
        source = newest.members[0].location if isinstance(newest, Chain) else newest.name
        newest.close()
    validate(source, parallelism=parallelism, progress=progress)
    with ZS(source) as z:
        marker = archive_metadata(z)
        if marker is None:
            return
        version = marker.get("format_version")
        if not isinstance(version, int):
            raise ZSCorrupt(f"{source}: the archive marker has no format_version")
        view = open_chain(z, source) if marker.get("fragment") is not None else z
        try:
            if view is not z:
                validate_fragments(view)
            validate_archive(view, version)
        except ZSCorrupt as exc:
            raise ZSCorrupt(f"{source}: {exc}") from None
        finally:
            if view is not z:
                view.close()
