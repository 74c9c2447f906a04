"""Build a random Icechunk repository with the REAL icechunk, reproducibly from a seed.

Run under an icechunk Python (``.peers/ic1/bin/python`` for 1.1, ``.peers/ic2/bin/python`` for 2.x)::

    random_icechunk_repo.py OUT --seed N

writes the repository to ``OUT/repo`` and the files its virtual refs point into to ``OUT/virtual``,
then prints one JSON line: what was done (every operation, in order) and the facts icechunk has no
API for (the deleted tags of a V1 repository). The differential test (tests/system/test_differential.py)
exports such repositories and holds every answer of the archive against icechunk's own.

A history mixes, at random: nested groups and arrays whose names come from a wide alphabet (ASCII
punctuation, spaces, non-ASCII and non-BMP characters, long names, names that are prefixes of
their siblings), arrays of many dtypes and shapes (0-d, empty, ragged edge chunks), writes that
become inline, native or virtual chunks, chunk and node deletes, resizes, attribute updates, commit
metadata with non-ASCII keys, branches, tags, tag deletion, reset_branch, and where the version has
them moves, amends, repository metadata, manifest splitting, expire_snapshots and garbage_collect.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import sys
import warnings
from datetime import datetime, timezone
from pathlib import Path

import icechunk as ic
import numpy as np
import zarr
import zarr.errors

MAJOR = int(ic.__version__.split(".")[0])
# Every ASCII punctuation character but "/" and "\\" (zarr-python reads a backslash as a separator).
PUNCTUATION = "!\"#$%&'()*+,-.:;<=>?@[]^_`{|}~"
LETTERS = "abcxyzABZ019"
V1_REF_PUNCTUATION = "&()@!,+'$;=_.-: "
WIDE = ["é", "ü", "Δ", "中", "！", "ｚ", "\u00a0", "😀", "🧊", "𝄞"]  # Latin-1, BMP, full-width, non-BMP
DTYPES = ["bool", "i1", "u1", "i2", "u2", "i4", "u4", "i8", "u8", "f2", "f4", "f8", "c8", "c16"]
VIRTUAL_FILE = "blob.bin"
VIRTUAL_SIZE = 1 << 16


def authorize(prefix: str) -> dict:
    """The ``authorize_virtual_chunk_access`` argument this icechunk version takes."""
    return {prefix: ic.credentials.LocalFileSystemAccess if MAJOR >= 2 else None}


class Generator:
    """One random history; ``log`` records each operation as it is done."""

    def __init__(self, out: Path, seed: int) -> None:
        self.rnd = random.Random(seed)
        self.np = np.random.default_rng(seed)
        self.log: list[list] = []
        self.deleted_tags: list[str] = []
        self.created_tags: set[str] = set()
        virtual = out / "virtual"
        virtual.mkdir(parents=True, exist_ok=True)
        (virtual / VIRTUAL_FILE).write_bytes(self.np.integers(0, 256, VIRTUAL_SIZE, dtype=np.uint8).tobytes())
        self.prefix = f"file://{virtual.resolve()}/"
        self.repo = ic.Repository.create(
            ic.local_filesystem_storage(str(out / "repo")),
            config=self.config(),
            authorize_virtual_chunk_access=authorize(self.prefix),
        )
        self.branch = "main"
        session = self.repo.writable_session("main")
        zarr.group(store=session.store, attributes=self.metadata())
        self.log.append(["commit", "main", session.commit("root group")])

    # -- choices --------------------------------------------------------------------------------

    def config(self) -> ic.RepositoryConfig:
        config = ic.RepositoryConfig.default()
        config.inline_chunk_threshold_bytes = self.rnd.choice([0, 8, 64, 512])
        splitting = None
        if self.rnd.random() < 0.5:
            size = self.rnd.choice([1, 2, 3])
            splitting = ic.ManifestSplittingConfig.from_dict(
                {ic.ManifestSplitCondition.AnyArray(): {ic.ManifestSplitDimCondition.Any(): size}}
            )
        manifest = {"splitting": splitting}
        if MAJOR >= 2:
            config.num_updates_per_repo_info_file = self.rnd.choice([2, 5, 100])
            if self.rnd.random() < 0.5:
                manifest["virtual_chunk_location_compression"] = ic.ManifestVirtualChunkLocationCompressionConfig(
                    min_num_chunks=self.rnd.choice([1, 4])
                )
        config.manifest = ic.ManifestConfig(**manifest)
        store_dir = self.prefix[len("file://") :]
        config.set_virtual_chunk_container(ic.VirtualChunkContainer(self.prefix, ic.local_filesystem_store(store_dir)))
        self.log.append(["config", config.inline_chunk_threshold_bytes, None if splitting is None else size])
        return config

    def name(self, siblings: list[str]) -> str:
        """A fresh child name; often a sibling's name with a suffix (so one is a prefix of the other)."""
        for _ in range(100):
            r = self.rnd.random()
            if siblings and r < 0.4:
                base = self.rnd.choice(siblings)
                name = base + self.rnd.choice(["-", ".", " ", "!", "_", "~", "0", "é", "😀", "a"])
            elif r < 0.5:
                name = "".join(self.rnd.choice(LETTERS + PUNCTUATION) for _ in range(self.rnd.randint(40, 120)))
            else:
                pool = LETTERS * 3 + PUNCTUATION + " " + "".join(WIDE)
                name = "".join(self.rnd.choice(pool) for _ in range(self.rnd.randint(1, 6)))
            if (
                name not in siblings
                and name.strip() not in ("", ".", "..")
                and not name.startswith("__")
                and name != "zarr.json"
            ):
                return name
        raise RuntimeError("no fresh name found")

    def ref_name(self, taken: list[str]) -> str:
        """A fresh branch or tag name. icechunk 1.1 stores a ref under a path that percent-encodes
        characters such as ``~`` or ``é``, then lists such branches encoded and such tags not at all
        (tests/system/test_real_icechunk_cases.py covers them): its refs use the characters it keeps."""
        if MAJOR >= 2:
            return self.name(taken)
        while True:
            name = "".join(self.rnd.choice(LETTERS + V1_REF_PUNCTUATION) for _ in range(self.rnd.randint(1, 12)))
            if name not in taken and name.strip(". "):
                return name

    def metadata(self, depth: int = 0) -> dict:
        keys = ["author", "é", "ключ", "😀", "a b", "x-y", "中文"]
        out: dict = {}
        for _ in range(self.rnd.randint(0, 3)):
            key = self.rnd.choice(keys)
            r = self.rnd.random()
            if r < 0.3 and depth < 2:
                out[key] = self.metadata(depth + 1)
            elif r < 0.45:
                out[key] = [self.rnd.randint(-5, 5), "é", None, True]
            else:
                out[key] = self.rnd.choice([1, -7, 2.5, "värde", None, False, 2**40])
        return out

    # -- the hierarchy as the session sees it -----------------------------------------------------

    @staticmethod
    def root(session):
        """The root group, created if a reset went back to the repository's empty first snapshot."""
        return zarr.open_group(store=session.store, mode="a")

    def nodes(self, session) -> tuple[list[str], list[str]]:
        """(group paths, array paths) of the session's hierarchy ("" is the root)."""
        root = self.root(session)
        groups, arrays = [""], []
        for path, node in root.members(max_depth=None):
            (arrays if isinstance(node, zarr.Array) else groups).append(path)
        return sorted(groups), sorted(arrays)

    @staticmethod
    def children(root, parent: str) -> list[str]:
        group = root[parent] if parent else root
        return [name for name, _ in group.members()]

    # -- operations ---------------------------------------------------------------------------

    def add_group(self, session) -> None:
        root = self.root(session)
        groups, _ = self.nodes(session)
        parent = self.rnd.choice(groups)
        name = self.name(self.children(root, parent))
        (root[parent] if parent else root).create_group(name, attributes=self.metadata())
        self.log.append(["group", f"{parent}/{name}"])

    def add_array(self, session) -> None:
        root = self.root(session)
        groups, _ = self.nodes(session)
        parent = self.rnd.choice(groups)
        name = self.name(self.children(root, parent))
        ndim = self.rnd.choice([0, 1, 1, 2, 2, 3])
        shape = tuple(
            self.rnd.choice([0, 1, 3, 5, 7]) if self.rnd.random() < 0.15 else self.rnd.randint(1, 9)
            for _ in range(ndim)
        )
        chunks = tuple(self.rnd.randint(1, 4) for _ in range(ndim))
        dtype = self.rnd.choice(DTYPES)
        raw = self.rnd.random() < 0.6  # no compressor: chunk bytes are the values, virtual refs possible
        kwargs = {}
        if self.rnd.random() < 0.3:
            kwargs["dimension_names"] = [self.rnd.choice([None, "t", "é", "y x"]) for _ in range(ndim)]
        group = root[parent] if parent else root
        array = group.create_array(
            name,
            shape=shape,
            chunks=chunks,
            dtype=dtype,
            fill_value=0,
            compressors=None if raw else "auto",
            attributes=self.metadata(),
            **kwargs,
        )
        self.log.append(["array", array.path, list(shape), list(chunks), dtype, raw])
        if self.rnd.random() < 0.7:
            self.write(session, array.path)

    def write(self, session, path: str) -> None:
        array = zarr.open_array(store=session.store, path=path, mode="r+")
        if 0 in array.shape:
            return
        region = tuple(slice(lo, self.rnd.randint(lo + 1, n)) for n in array.shape for lo in [self.rnd.randrange(n)])
        size = [s.stop - s.start for s in region]
        values = self.np.integers(0, 100, size=size).astype(array.dtype)
        array[region] = values
        self.log.append(["write", path, [[s.start, s.stop] for s in region]])

    def write_virtual(self, session, path: str) -> None:
        array = zarr.open_array(store=session.store, path=path, mode="r+")
        grid = [-(-n // c) for n, c in zip(array.shape, array.chunks)]
        if 0 in grid or array.compressors:
            return
        nbytes = int(np.prod(array.chunks, dtype=np.int64)) * array.dtype.itemsize
        specs = []
        for _ in range(self.rnd.randint(1, 4)):
            index = [self.rnd.randrange(g) for g in grid]
            offset = self.rnd.randrange(VIRTUAL_SIZE - nbytes)
            specs.append(
                ic.VirtualChunkSpec(index=index, location=self.prefix + VIRTUAL_FILE, offset=offset, length=nbytes)
            )
        specs = list({tuple(s.index): s for s in specs}.values())
        session.store.set_virtual_refs(path, specs, validate_containers=False)
        self.log.append(["virtual", path, [s.index for s in specs]])

    def delete_chunk(self, session, path: str) -> None:
        keys = [k for k in asyncio.run(_keys(session.store, path)) if k == f"{path}/c" or k.startswith(f"{path}/c/")]
        if keys:
            key = self.rnd.choice(keys)
            asyncio.run(session.store.delete(key))
            self.log.append(["delete chunk", key])

    def resize(self, session, path: str) -> None:
        array = zarr.open_array(store=session.store, path=path, mode="r+")
        if not array.shape:
            return
        shape = tuple(max(0, n + self.rnd.randint(-3, 3)) for n in array.shape)
        array.resize(shape)
        self.log.append(["resize", path, list(shape)])

    def attrs(self, session, path: str) -> None:
        root = self.root(session)
        node = root[path] if path else root
        node.attrs.update(self.metadata() or {"k": self.rnd.randint(0, 9)})
        self.log.append(["attrs", path])

    def delete_node(self, session, path: str) -> None:
        root = self.root(session)
        parent, _, name = path.rpartition("/")
        del (root[parent] if parent else root)[name]
        self.log.append(["delete", path])

    def change(self, session) -> None:
        """One random change to the hierarchy or its data."""
        try:
            self.one_change(session)
        except (zarr.errors.ContainsGroupError, zarr.errors.ContainsArrayError) as exc:
            # zarr's members() does not list some names (e.g. with a backslash): a "fresh" name can exist
            self.log.append(["exists", str(exc)[:80]])

    def one_change(self, session) -> None:
        groups, arrays = self.nodes(session)
        r = self.rnd.random()
        if r < 0.2 or (not arrays and r < 0.6):
            self.add_array(session)
        elif r < 0.32 or not arrays:
            self.add_group(session)
        elif r < 0.55:
            self.write(session, self.rnd.choice(arrays))
        elif r < 0.65:
            self.write_virtual(session, self.rnd.choice(arrays))
        elif r < 0.72:
            self.delete_chunk(session, self.rnd.choice(arrays))
        elif r < 0.78:
            self.resize(session, self.rnd.choice(arrays))
        elif r < 0.9:
            self.attrs(session, self.rnd.choice(groups + arrays))
        elif len(groups) + len(arrays) > 1:
            self.delete_node(session, self.rnd.choice([p for p in groups + arrays if p]))

    # -- history --------------------------------------------------------------------------------

    def commit(self) -> None:
        session = self.repo.writable_session(self.branch)
        for _ in range(self.rnd.randint(1, 4)):
            self.change(session)
        message = self.rnd.choice(["commit", "é ü 😀", "", "x" * 200, "line\nbreak"])
        metadata = self.metadata()
        if MAJOR >= 2 and self.rnd.random() < 0.15 and self.head_has_parent():
            try:
                sid = session.amend(message, metadata=metadata)
                self.log.append(["amend", self.branch, sid])
                return
            except ic.IcechunkError as exc:  # e.g. amending a commit that moved nodes
                self.log.append(["refused", str(exc).strip().splitlines()[0]])
        if MAJOR >= 2 and self.rnd.random() < 0.05:
            sid = session.flush(message, metadata=metadata)
            name = self.ref_name(sorted(self.created_tags))
            self.repo.create_tag(name, sid)
            self.created_tags.add(name)
            self.log.append(["flush", sid, "tag", name])
        elif session.has_uncommitted_changes:
            sid = session.commit(message, metadata=metadata)
            self.log.append(["commit", self.branch, sid])

    def live_tags(self) -> set[str]:
        """The tags not deleted."""
        return set(self.repo.list_tags())

    def head_has_parent(self) -> bool:
        return sum(1 for _ in zip(range(2), self.repo.ancestry(branch=self.branch))) > 1

    def move(self) -> None:
        session = self.repo.rearrange_session(self.branch)
        if not asyncio.run(session.store.exists("zarr.json")):
            return
        groups, arrays = self.nodes(session)
        movable = [p for p in groups + arrays if p]
        if not movable:
            return
        root = zarr.open_group(store=session.store, mode="r")
        for _ in range(self.rnd.randint(1, 3)):
            source = self.rnd.choice(movable)
            targets = [g for g in groups if g != source and not g.startswith(source + "/")]
            parent = self.rnd.choice(targets)
            name = self.name(self.children(root, parent))
            target = f"{parent}/{name}" if parent else name
            session.move("/" + source, "/" + target)
            self.log.append(["move", source, target])
            break
        sid = session.commit("move")
        self.log.append(["commit", self.branch, sid])

    def snapshot_of(self, branch: str) -> str:
        history = [s.id for s in self.repo.ancestry(branch=branch)]
        return self.rnd.choice(history)

    def refs(self) -> None:
        """Branch, tag, delete a tag, reset or delete a branch, or switch branches (an operation
        icechunk refuses, e.g. 1.1 resetting a branch whose name it percent-encodes, is logged)."""
        try:
            self.ref_change()
        except ic.IcechunkError as exc:
            self.log.append(["refused", str(exc).strip().splitlines()[0]])
        if self.branch not in self.repo.list_branches():
            self.branch = "main"

    def ref_change(self) -> None:
        branches = sorted(self.repo.list_branches())
        tags = sorted(self.repo.list_tags())
        r = self.rnd.random()
        if r < 0.3:
            name = self.ref_name(branches)
            self.repo.create_branch(name, self.snapshot_of(self.rnd.choice(branches)))
            self.log.append(["branch", name])
        elif r < 0.55:
            name = self.ref_name(sorted(self.created_tags))
            self.repo.create_tag(name, self.snapshot_of(self.rnd.choice(branches)))
            self.created_tags.add(name)
            self.log.append(["tag", name])
        elif r < 0.65 and tags:
            name = self.rnd.choice(tags)
            self.repo.delete_tag(name)
            self.deleted_tags.append(name)
            self.log.append(["delete tag", name])
        elif r < 0.75:
            branch = self.rnd.choice(branches)
            target = self.snapshot_of(self.rnd.choice(branches))
            self.repo.reset_branch(branch, target)
            self.log.append(["reset", branch, target])
        elif r < 0.8 and len(branches) > 1:
            name = self.rnd.choice([b for b in branches if b != "main"])
            self.repo.delete_branch(name)
            self.log.append(["delete branch", name])
        else:
            self.branch = self.rnd.choice(branches)
            self.log.append(["switch", self.branch])

    def repo_metadata(self) -> None:
        self.repo.set_metadata(self.metadata())
        self.log.append(["repo metadata"])

    def expire(self) -> None:
        """Expire snapshots older than a moment in the middle of the history, then collect garbage."""
        times = sorted(s.written_at for b in self.repo.list_branches() for s in self.repo.ancestry(branch=b))
        cutoff = times[len(times) // 2] if self.rnd.random() < 0.7 else datetime.now(timezone.utc)
        expired = self.repo.expire_snapshots(
            older_than=cutoff,
            delete_expired_branches=self.rnd.random() < 0.3,
            delete_expired_tags=self.rnd.random() < 0.3,
        )
        summary = self.repo.garbage_collect(cutoff)
        self.log.append(["expire", len(expired), summary.snapshots_deleted, summary.chunks_deleted])
        if self.branch not in self.repo.list_branches():  # expiration deleted it
            self.branch = "main"

    def run(self, steps: int, pause=None) -> None:
        """``steps`` operations, then perhaps expiration and a commit; ``pause(done)`` is called
        between operations (it may stop the process until the caller has looked at the repository)."""
        for done in range(steps):
            if pause is not None and done:
                pause(done)
            r = self.rnd.random()
            if r < 0.65:
                self.commit()
            elif r < 0.75 and MAJOR >= 2:
                self.move()
            elif r < 0.78 and MAJOR >= 2:
                self.repo_metadata()
            else:
                self.refs()
        if self.rnd.random() < 0.3:
            self.expire()
            self.commit()


async def _keys(store, prefix: str) -> list[str]:
    return sorted([k async for k in store.list_prefix(prefix)])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="directory to create (repo/ and virtual/ inside)")
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--steps", type=int, default=12, help="operations in the history")
    parser.add_argument(
        "--pause-every",
        type=int,
        default=0,
        metavar="K",
        help="after every K operations print the JSON line so far and wait for a line on stdin",
    )
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    answer = os.fdopen(os.dup(1), "w")  # icechunk 1.x logs to stdout
    os.dup2(2, 1)
    ic.set_logs_filter("error")
    gen = Generator(args.out, args.seed)

    def report() -> None:
        json.dump(
            {
                "seed": args.seed,
                "icechunk_version": ic.__version__,
                "virtual_prefix": gen.prefix,
                "virtual_dir": str((args.out / "virtual").resolve()),
                "deleted_tags": sorted(gen.created_tags - gen.live_tags()),
                "log": gen.log,
            },
            answer,
            ensure_ascii=False,
        )
        answer.write("\n")
        answer.flush()

    def pause(done: int) -> None:
        if done % args.pause_every == 0:
            report()
            sys.stdin.readline()

    gen.run(args.steps, pause if args.pause_every else None)
    report()
    answer.close()
    sys.stderr.flush()
    os._exit(0)  # icechunk sometimes crashes in its runtime's teardown, after the work is done


if __name__ == "__main__":
    main()
