"""Write the committed Icechunk fixture repositories with the REAL icechunk.

Run once per icechunk major version, 1.x first (the 2.x run also upgrades a copy of v1); each run
replaces its own repositories and their part of ``testdata/icechunk/fixtures.json``::

    .peers/ic1/bin/python scripts/make_icechunk_fixtures.py   # -> testdata/icechunk/v1 (spec V1)
    .peers/ic2/bin/python scripts/make_icechunk_fixtures.py   # -> testdata/icechunk/v2 (spec V2)
                                                              #    and v1-migrated (v1, upgraded)

Virtual chunks point at ``VIRTUAL_PREFIX`` (a fixed path under /tmp, since icechunk resolves
``file://`` refs by absolute path); ``icechunk_oracle.link_virtual_prefix`` maps it to
``testdata/icechunk/virtual-data`` of whichever clone runs the tests.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import warnings
from datetime import datetime, timezone
from pathlib import Path

import icechunk as ic
import numpy as np
import zarr

from icechunk_oracle import link_virtual_prefix

ROOT = Path(__file__).resolve().parent.parent
TESTDATA = ROOT / "testdata" / "icechunk"
VIRTUAL_PREFIX = "file:///tmp/zsarchive-icechunk-fixtures/virtual-data/"
VIRTUAL_DIR = "virtual-data"  # relative to testdata/icechunk
VIRTUAL_FILE = "ints.bin"
GRANULES = 8  # small files granules/g<k>.bin, so compressed locations have a dictionary to learn
MANY = 64  # refs of data/sub/many_virt: above LOCATION_COMPRESSION_MIN, the 4-ref array stays below
LOCATION_COMPRESSION_MIN = 32
MAJOR = int(ic.__version__.split(".")[0])


def write_virtual_data(directory: Path) -> None:
    """The external files virtual refs point into: little-endian int32 ramps (ints.bin: 1000..1399,
    granules/g<k>.bin: 16 values from 2000 + 100 k)."""
    (directory / "granules").mkdir(parents=True, exist_ok=True)
    (directory / VIRTUAL_FILE).write_bytes(np.arange(1000, 1400, dtype="<i4").tobytes())
    for k in range(GRANULES):
        ramp = np.arange(2000 + 100 * k, 2016 + 100 * k, dtype="<i4")
        (directory / "granules" / f"g{k}.bin").write_bytes(ramp.tobytes())


def authorize(prefix: str) -> dict:
    """The ``authorize_virtual_chunk_access`` argument accepted by this icechunk version."""
    return {prefix: ic.credentials.LocalFileSystemAccess if MAJOR >= 2 else None}


def repo_config(prefix: str) -> ic.RepositoryConfig:
    """Default config plus the virtual chunk container for ``prefix``."""
    config = ic.RepositoryConfig.default()
    if MAJOR >= 2:
        # Few updates per repo info file, so the ops log continues through repo_before_updates.
        config.num_updates_per_repo_info_file = 8
        # Dictionary-compressed virtual locations (icechunk's default only for big manifests).
        config.manifest = ic.ManifestConfig(
            virtual_chunk_location_compression=ic.ManifestVirtualChunkLocationCompressionConfig(
                min_num_chunks=LOCATION_COMPRESSION_MIN
            )
        )
    store_dir = prefix[len("file://") :]
    config.set_virtual_chunk_container(ic.VirtualChunkContainer(prefix, ic.local_filesystem_store(store_dir)))
    return config


class Builder:
    """Drives one repository through its history and records the facts tests need."""

    def __init__(self, path: Path, prefix: str) -> None:
        self.path = path
        self.prefix = prefix
        self.repo = ic.Repository.create(
            ic.local_filesystem_storage(str(path)),
            config=repo_config(prefix),
            authorize_virtual_chunk_access=authorize(prefix),
        )
        self.facts: dict = {"commits": [], "skipped": {}}

    def commit(self, session: ic.Session, message: str, **metadata: object) -> str:
        """Commit with metadata and remember the snapshot id under its message."""
        branch = session.branch  # read before committing: a committed session has no branch
        snap = session.commit(message, metadata={"author": "fixture-bot", **metadata})
        self.facts["commits"].append({"branch": branch, "message": message, "id": snap})
        return snap

    def session(self, branch: str = "main") -> ic.Session:
        """A writable session on ``branch``."""
        return self.repo.writable_session(branch)

    def vref(self, index: list[int], element: int, count: int) -> ic.VirtualChunkSpec:
        """A virtual ref to ``count`` int32 starting at element ``element`` of the virtual file."""
        return ic.VirtualChunkSpec(
            index=index, location=self.prefix + VIRTUAL_FILE, offset=4 * element, length=4 * count
        )

    def skip(self, feature: str, why: str) -> None:
        self.facts["skipped"][feature] = why


def build(b: Builder) -> None:
    """The shared history, with version-specific steps where icechunk allows them."""
    # 1: layout. Chunk sizes pick the storage kind: <= 512 B inline, larger native, refs virtual.
    s = b.session()
    root = zarr.group(
        store=s.store,
        attributes={
            "title": "zsarchive fixture",
            "icechunk": ic.__version__,
            "nested": {"list": [1, 2.5, None, True, "é"], "empty": {}},
        },
    )
    data = root.create_group("data", attributes={"description": "measured things"})
    sub = data.create_group("sub")
    sub.create_group("deep", attributes={"level": 3})
    temp = data.create_array(
        "temperature",
        shape=(4, 6),
        chunks=(2, 3),
        dtype="f4",
        fill_value=np.nan,
        dimension_names=["y", "x"],
        attributes={"units": "K"},
        compressors=None,
    )
    temp[:] = np.arange(24, dtype="f4").reshape(4, 6) + 273.0
    big = data.create_array(
        "big",
        shape=(64, 64),
        chunks=(32, 32),
        dtype="f8",
        fill_value=0.0,
        dimension_names=["row", "col"],
        compressors=None,
    )
    big[:] = np.arange(64 * 64, dtype="f8").reshape(64, 64)
    zipped = data.create_array("zipped", shape=(1000,), chunks=(500,), dtype="i8", fill_value=-1)
    zipped[:] = np.arange(1000) % 7  # default compressor: small stored chunks despite 4000 B raw
    virt = sub.create_array(
        "virt", shape=(100,), chunks=(25,), dtype="<i4", fill_value=-9, dimension_names=["t"], compressors=None
    )
    s.store.set_virtual_refs(
        virt.path, [b.vref([0], 0, 25), b.vref([1], 25, 25), b.vref([2], 100, 25)], validate_containers=False
    )  # chunk 3 left uninitialized: fill value
    root.create_array(
        "dotted",
        shape=(6,),
        chunks=(2,),
        dtype="i2",
        fill_value=7,
        chunk_key_encoding={"name": "default", "separator": "."},
    )
    b.commit(s, "create layout", step=1, tags=["init", "layout"])
    b.skip(
        "dotted chunk data",
        "icechunk rejects chunk keys with a '.' separator (invalid zarr key "
        "format); 'dotted' is metadata-only and reads as its fill value",
    )

    # 2: partial overwrite of inline chunks, attribute change.
    s = b.session()
    root = zarr.open_group(store=s.store, mode="r+")
    root["data/temperature"][0:2, 0:3] = -1.0
    root["data/temperature"].attrs["long_name"] = "air temperature"
    b.commit(s, "fix first temperature chunk", step=2)
    b.repo.create_tag("v1.0", b.repo.lookup_branch("main"))

    # 3-4: an array that lives for one commit, then is deleted.
    s = b.session()
    root = zarr.open_group(store=s.store, mode="r+")
    doomed = root.create_array(
        "data/to_delete", shape=(20, 20), chunks=(20, 20), dtype="f8", fill_value=0.0, compressors=None
    )
    doomed[:] = 1.5
    b.commit(s, "add scratch array", step=3)
    s = b.session()
    root = zarr.open_group(store=s.store, mode="r+")
    del root["data/to_delete"]
    b.commit(s, "delete scratch array", step=4)

    # 5-6: branch dev with its own commits.
    b.repo.create_branch("dev", b.repo.lookup_branch("main"))
    s = b.session("dev")
    root = zarr.open_group(store=s.store, mode="r+")
    root["data/big"][0:32, 0:32] = -2.0
    root.attrs["branch"] = "dev"
    b.commit(s, "dev: rewrite a native chunk", step=5)
    s = b.session("dev")
    root = zarr.open_group(store=s.store, mode="r+")
    only = root.create_array("dev_only", shape=(3,), chunks=(3,), dtype="u1", fill_value=0)
    only[:] = [1, 2, 3]
    b.commit(s, "dev: add dev_only", step=6)

    # 7: tags on main, one created and deleted.
    main_head = b.repo.lookup_branch("main")
    b.repo.create_tag("v1.1", main_head)
    b.repo.create_tag("doomed-tag", main_head)
    b.repo.delete_tag("doomed-tag")

    # 8-9: branch scratch gets two commits, then is reset back to where it started.
    b.repo.create_branch("scratch", main_head)
    for step in (8, 9):
        s = b.session("scratch")
        root = zarr.open_group(store=s.store, mode="r+")
        root.attrs["scratch"] = step
        b.commit(s, f"scratch work {step}", step=step)
    b.facts["reset"] = {"branch": "scratch", "from": b.repo.lookup_branch("scratch"), "to": main_head}
    b.repo.reset_branch("scratch", main_head)

    # 10-13: more history on main: virtual ref moved, chunk deleted, attrs, shape change.
    s = b.session()
    root = zarr.open_group(store=s.store, mode="r+")
    s.store.set_virtual_refs("data/sub/virt", [b.vref([3], 300, 25), b.vref([0], 200, 25)], validate_containers=False)
    b.commit(s, "virtual refs: fill chunk 3, move chunk 0", step=10)
    s = b.session()
    root = zarr.open_group(store=s.store, mode="r+")
    s.store.delete_dir("data/zipped/c/1")
    root["data"].attrs["description"] = "measured things, revised"
    b.commit(s, "drop a zipped chunk", step=11)
    s = b.session()
    root = zarr.open_group(store=s.store, mode="r+")
    root["data/temperature"].resize((6, 6))
    root["data/temperature"][4:6, :] = 300.0
    b.commit(s, "grow temperature", step=12, nested={"rows": 6, "ok": True})
    s = b.session()
    root = zarr.open_group(store=s.store, mode="r+")
    root["data/sub/deep"].attrs["level"] = 4
    b.commit(s, "deeper", step=13)
    # 14-15: a virtual chunk overwritten with real data (virtual -> inline), a new empty group.
    s = b.session()
    root = zarr.open_group(store=s.store, mode="r+")
    root["data/sub/virt"][25:50] = np.arange(25, dtype="<i4")
    b.commit(s, "replace virtual chunk 1 with data", step=14)
    s = b.session()
    root = zarr.open_group(store=s.store, mode="r+")
    root.create_group("data/empty")
    root.attrs["unicode"] = "\u0394 \u2603 \U0001f9ca"
    # Awkward names and shapes: a 0-d array (chunk key "scalar/c"), a group named "c" (so a chunk
    # key holds "/c/" twice), a name with non-ASCII letters and a space, and (below) non-ASCII keys
    # nested in the commit's metadata.
    scalar = root.create_array("scalar", shape=(), dtype="f8", fill_value=0.0)
    scalar[()] = 3.5
    root.create_group("data/c")
    in_c = root.create_array("data/c/t", shape=(2,), chunks=(1,), dtype="i1", fill_value=0)
    in_c[:] = [1, 2]
    odd = root.create_array("data/\u00fcn\u00ef c\u00f4de", shape=(2,), chunks=(2,), dtype="i1", fill_value=0)
    odd[:] = [5, 6]
    # Beside the group "c" (which has children), names holding bytes below "/": icechunk orders a
    # snapshot's nodes by the bytes of the whole path, so "/data/c-d" comes before "/data/c/t".
    for name in ("c-d", "c.e", "c+f"):
        root.create_array(f"data/{name}", shape=(2,), chunks=(2,), dtype="i1", fill_value=0)[:] = [7, 8]
    b.commit(
        s,
        "empty group, unicode attrs, awkward names",
        step=15,
        nested={"\u00e9t\u00e9": {"\u00f1": [1, 2]}, "plain": "x"},
    )
    # 16: virtual refs with checksums (one passes, two make icechunk refuse the read), and many
    # refs into several files (V2 stores their locations dictionary-compressed).
    s = b.session()
    root = zarr.open_group(store=s.store, mode="r+")
    checked = root.create_array(
        "data/sub/checked", shape=(8,), chunks=(2,), dtype="<i4", fill_value=0, compressors=None
    )
    future, past = datetime(2100, 1, 1, tzinfo=timezone.utc), datetime(2000, 1, 1, tzinfo=timezone.utc)
    location = b.prefix + VIRTUAL_FILE
    s.store.set_virtual_refs(
        checked.path,
        [
            ic.VirtualChunkSpec(index=[0], location=location, offset=0, length=8, last_updated_at_checksum=future),
            ic.VirtualChunkSpec(index=[1], location=location, offset=8, length=8, etag_checksum="fixture-etag"),
            ic.VirtualChunkSpec(index=[2], location=location, offset=16, length=8, last_updated_at_checksum=past),
        ],
        validate_containers=False,
    )
    many = root.create_array(
        "data/sub/many_virt", shape=(MANY, 2), chunks=(1, 2), dtype="<i4", fill_value=0, compressors=None
    )
    s.store.set_virtual_refs(
        many.path,
        [
            ic.VirtualChunkSpec(
                index=[i, 0], location=f"{b.prefix}granules/g{i % GRANULES}.bin", offset=8 * (i // GRANULES), length=8
            )
            for i in range(MANY)
        ],
        validate_containers=False,
    )
    b.commit(s, "checksummed and many virtual refs", step=16)
    b.facts["unreadable_chunks"] = {
        "data/sub/checked/c/1": "etag checksum does not match the file",
        "data/sub/checked/c/2": "file modified after the last_updated_at checksum (2000-01-01)",
    }
    b.repo.create_branch("temp-branch", b.repo.lookup_branch("main"))
    b.repo.delete_branch("temp-branch")
    b.facts["deleted_branches"] = ["temp-branch"]

    if MAJOR >= 2:
        build_v2_only(b)
    else:
        for feature in (
            "amend",
            "move",
            "repo metadata",
            "ops log",
            "repo status",
            "feature flags",
            "detached snapshot (flush)",
            "config change update",
        ):
            b.skip(feature, f"icechunk {ic.__version__} (spec V1) has no API for it")


def build_v2_only(b: Builder) -> None:
    """Steps only icechunk 2.x can take: amend, move, repo metadata, status, flags, flush."""
    s = b.session()
    zarr.open_group(store=s.store, mode="r+").attrs["amended"] = False
    first = b.commit(s, "commit to amend (typo)", step=17)
    s = b.session()
    zarr.open_group(store=s.store, mode="r+").attrs["amended"] = True
    amended = s.amend("amended commit", metadata={"author": "fixture-bot", "step": 17, "amended": True})
    b.facts["commits"].append({"branch": "main", "message": "amended commit", "id": amended})
    b.facts["amend"] = {"replaced": first, "by": amended}

    s = b.repo.rearrange_session("main")
    s.move("/data/sub/deep", "/data/deep_moved")
    s.move("/data/c/t", "/data/c/t_moved")  # an array: its chunks must follow it to the new path
    b.commit(s, "move deep group", step=18)
    b.facts["moved"] = {"from": "/data/sub/deep", "to": "/data/deep_moved"}
    b.facts["moved_nodes"] = [b.facts["moved"], {"from": "/data/c/t", "to": "/data/c/t_moved"}]

    b.repo.set_metadata({"project": "zsarchive", "fixture": True, "owners": ["a", "b"]})
    b.repo.update_metadata({"revision": 2})
    b.repo.set_status(ic.RepoStatus(ic.RepoAvailability.read_only, limited_availability_reason="fixture"))
    b.repo.set_status(ic.RepoStatus(ic.RepoAvailability.online))
    flag = b.repo.feature_flags()[0]
    b.repo.set_feature_flag(flag.name, True)
    b.repo.set_feature_flag(flag.name, None)
    b.facts["feature_flag_toggled"] = flag.name
    b.repo.save_config()

    s = b.session()
    zarr.open_group(store=s.store, mode="r+").attrs["detached"] = True
    detached = s.flush("detached snapshot", metadata={"author": "fixture-bot", "step": 19})
    b.facts["detached_snapshot"] = detached
    b.repo.create_tag("detached-tag", detached)

    s = b.session()
    zarr.open_group(store=s.store, mode="r+").attrs["final"] = True
    b.commit(s, "final commit", step=20)
    # Expiration and GC with a 1971 cutoff: both are logged, neither finds anything to delete.
    cutoff = datetime(1971, 1, 1, tzinfo=timezone.utc)
    b.facts["expired"] = sorted(b.repo.expire_snapshots(older_than=cutoff))
    summary = b.repo.garbage_collect(cutoff)
    b.facts["gc_deleted"] = summary.snapshots_deleted + summary.manifests_deleted + summary.chunks_deleted


def describe(b: Builder) -> dict:
    """Facts tests need, taken from icechunk itself after the build."""
    repo = b.repo
    facts = b.facts
    facts["icechunk_version"] = ic.__version__
    facts["spec_version"] = 2 if MAJOR >= 2 else 1
    facts["branches"] = sorted(repo.list_branches())
    facts["tags"] = sorted(repo.list_tags())
    facts["deleted_tags"] = ["doomed-tag"]
    facts["main_commits"] = sum(1 for _ in repo.ancestry(branch="main"))
    added = next(c["id"] for c in facts["commits"] if c["message"] == "add scratch array")
    awkward = next(c["id"] for c in facts["commits"] if c["message"].endswith("awkward names"))
    # Chunk kinds each array holds at a ref ("branch:NAME", "tag:NAME") or snapshot id.
    facts["arrays"] = {
        "data/temperature": {"at": "branch:main", "chunk_kinds": ["inline"], "dimension_names": ["y", "x"]},
        "data/big": {"at": "branch:main", "chunk_kinds": ["native"], "dimension_names": ["row", "col"]},
        "data/zipped": {"at": "branch:main", "chunk_kinds": ["inline"]},
        "data/sub/virt": {"at": "branch:main", "chunk_kinds": ["inline", "virtual"], "dimension_names": ["t"]},
        "dotted": {"at": "branch:main", "chunk_kinds": [], "chunk_key_separator": "."},
        "data/sub/checked": {"at": "branch:main", "chunk_kinds": ["virtual"]},
        "data/sub/many_virt": {"at": "branch:main", "chunk_kinds": ["virtual"]},
        "scalar": {"at": "branch:main", "chunk_kinds": ["inline"], "shape": []},
        "data/c/t": {"at": awkward, "chunk_kinds": ["inline"]},
        "data/\u00fcn\u00ef c\u00f4de": {"at": "branch:main", "chunk_kinds": ["inline"]},
        "dev_only": {"at": "branch:dev", "chunk_kinds": ["inline"]},
        "data/to_delete": {"at": added, "chunk_kinds": ["native"], "deleted_later": True},
    }
    if MAJOR >= 2:
        facts["arrays"]["data/c/t_moved"] = {"at": "branch:main", "chunk_kinds": ["inline"]}
    facts["virtual_arrays"] = ["data/sub/checked", "data/sub/many_virt", "data/sub/virt"]
    facts["location_compressed_arrays"] = ["data/sub/many_virt"] if MAJOR >= 2 else []
    facts["groups"] = ["", "data", "data/sub", "data/sub/deep", "data/empty", "data/c"]
    facts["generated_at"] = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return facts


def migrate(v1: Path, target: Path, prefix: str) -> dict:
    """Copy the V1 repository and upgrade the copy in place to spec V2 (icechunk 2.x only)."""
    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(v1, target)
    repo = ic.Repository.open(
        ic.local_filesystem_storage(str(target)), authorize_virtual_chunk_access=authorize(prefix)
    )
    repo = ic.upgrade_icechunk_repository(repo, dry_run=False, delete_unused_v1_files=True)
    return {
        "from": v1.name,
        "icechunk_version": ic.__version__,
        "spec_version": int(repo.spec_version),
        "branches": sorted(repo.list_branches()),
        "tags": sorted(repo.list_tags()),
        "v1_files_left": sorted(
            str(p.relative_to(target))
            for p in target.rglob("*")
            if p.is_file() and (p.name == "config.yaml" or "refs" in p.parts)
        ),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=TESTDATA, help="testdata/icechunk directory")
    parser.add_argument(
        "--virtual-prefix",
        default=VIRTUAL_PREFIX,
        help="file:/// URL the virtual refs use (tests regenerate under another one)",
    )
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    ic.set_logs_filter("error")
    out: Path = args.out
    write_virtual_data(out / VIRTUAL_DIR)
    link_virtual_prefix(args.virtual_prefix, out / VIRTUAL_DIR)
    name = f"v{2 if MAJOR >= 2 else 1}"
    path = out / name
    shutil.rmtree(path, ignore_errors=True)
    builder = Builder(path, args.virtual_prefix)
    build(builder)
    sidecar = out / "fixtures.json"
    doc = json.loads(sidecar.read_text()) if sidecar.exists() else {}
    doc["virtual"] = {"prefix": args.virtual_prefix, "directory": VIRTUAL_DIR, "file": VIRTUAL_FILE}
    doc[name] = describe(builder)
    if MAJOR >= 2 and (out / "v1").is_dir():
        # icechunk 2.x upgrading the repository icechunk 1.x wrote: the RepoMigrated update.
        doc["v1-migrated"] = migrate(out / "v1", out / "v1-migrated", args.virtual_prefix)
    sidecar.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
    print(f"wrote {path} ({sum(f.stat().st_size for f in path.rglob('*') if f.is_file())} bytes)", file=sys.stderr)


if __name__ == "__main__":
    main()
    # icechunk sometimes segfaults in its runtime's teardown after all work is done: skip it.
    sys.stderr.flush()
    os._exit(0)
