"""zarr's own store test suite (``zarr.testing.store.StoreTests``) run against the archive's store.

The archive store is read-only and immutable, so zarr's cases that first write a key through the
backend are replaced by the same reads on keys a real icechunk 2.x repository holds, each answer
held against icechunk's own store answering the same call on that repository; every write case
becomes an assertion that the store refuses the write the way zarr's read-only stores do, and leaves
the data as it was. zarr's keys that no icechunk repository can hold are mapped to the nearest keys
it can: bare names (``"0"``, ``"key"``, ``"foo/bar"``) are no zarr keys at all, ``zarr.json`` must be
node metadata, and icechunk refuses zero-length chunks (a chunk must decode to its full shape).
"""

from __future__ import annotations

import json
import pickle

import pytest
from zarr.abc.store import (
    OffsetByteRequest,
    RangeByteRequest,
    SuffixByteRequest,
    SupportsDeleteSync,
    SupportsGetSync,
    SupportsSetSync,
)
from zarr.core.buffer import default_buffer_prototype
from zarr.core.buffer.cpu import Buffer
from zarr.core.sync import _collect_aiterator, sync
from zarr.storage._utils import _normalize_byte_range_index
from zarr.testing.store import StoreTests

from toolkit.peers import run_peer_script
from zsarchive.archive import RepoArchive, export
from zsarchive.archive.zarrstore import ArchiveStore

RANGES = {
    "all": None,
    "range-1-4": RangeByteRequest(1, 4),
    "offset-1": OffsetByteRequest(1),
    "suffix-1": SuffixByteRequest(1),
    "range-0-2": RangeByteRequest(0, 2),
    "suffix-2": SuffixByteRequest(2),
    "offset-2": OffsetByteRequest(2),
}
CHUNKS = [
    "get/c/0",
    *(f"many/c/{i}" for i in range(10)),
    "partial/c/0/0",
    "partial/c/0/1",
    "partial/c/0/2",
    "foo/bar/c/1",
    "foo/baz/c/0",
]
METADATA = ["zarr.json", "get/zarr.json", "a/b/c/zarr.json", "foo/bar/zarr.json"]
MISSING = ["get/c/1", "nothing/zarr.json", "foo/bar/c/0", "c/0", "foo"]
PREFIXES = ["", "a/", "a/b/", "a/b/c/", "fo", "foo", "foo/", "foo/bar/", "many/c/", "spam/"]
PARTIAL = {
    "none": [],
    "metadata": [("zarr.json", "range-0-2")],
    "chunk-and-metadata": [("get/c/0", "range-0-2"), ("zarr.json", "all")],
    "three-kinds": [("partial/c/0/0", "range-0-2"), ("partial/c/0/1", "suffix-2"), ("partial/c/0/2", "offset-2")],
}

# Written and then read by icechunk 2.x: the repository, and icechunk's store's answer to every read
# the cases below make of ours.
ICECHUNK_STORE = r"""
import asyncio, json, sys
import icechunk as ic, zarr
from zarr.abc.store import OffsetByteRequest, RangeByteRequest, SuffixByteRequest
from zarr.core.buffer import default_buffer_prototype
from zarr.core.buffer.cpu import Buffer
from zarr.core.sync import _collect_aiterator

out, job = sys.argv[1], json.loads(sys.argv[2])
repo = ic.Repository.create(ic.local_filesystem_storage(out))
s = repo.writable_session("main")
root = zarr.group(s.store)
root.create_group("a").create_group("b").create_group("c")
raw = dict(dtype="u1", compressors=None, fill_value=0)
root.create_array("get", shape=(4,), chunks=(4,), **raw)
root.create_array("many", shape=(10,), chunks=(1,), **raw)
root.create_array("partial", shape=(1, 3), chunks=(1, 1), **raw)
foo = root.create_group("foo")
foo.create_array("bar", shape=(2,), chunks=(1,), **raw)
foo.create_array("baz", shape=(1,), chunks=(1,), **raw)
values = {"get/c/0": b"\x01\x02\x03\x04", "foo/bar/c/1": b"\x01", "foo/baz/c/0": b"chunk"}
values.update({f"many/c/{i}": str(i).encode() for i in range(10)})
values.update({f"partial/c/0/{j}": f"partial/c/0/{j}".encode() for j in range(3)})

async def write():
    for key, value in values.items():
        await s.store.set(key, Buffer.from_bytes(value))
asyncio.run(write())
s.commit("the keys zarr's store tests read")
ranges = {"all": None, "range-1-4": RangeByteRequest(1, 4), "offset-1": OffsetByteRequest(1),
          "suffix-1": SuffixByteRequest(1), "range-0-2": RangeByteRequest(0, 2), "suffix-2": SuffixByteRequest(2),
          "offset-2": OffsetByteRequest(2)}
store = repo.readonly_session("main").store
proto = default_buffer_prototype()

async def answers():
    get = {}
    for key in job["keys"] + job["missing"]:
        for name, rng in ranges.items():
            try:
                buf = await store.get(key, prototype=proto, byte_range=rng)
            except ic.InvalidInputError as exc:  # a range past a chunk's end; a chunk key under a group
                get[f"{key} {name}"] = "refused: " + str(exc).splitlines()[0]
                continue
            get[f"{key} {name}"] = None if buf is None else buf.to_bytes().hex()
    partial = {}
    for case, pairs in job["partial"].items():
        bufs = await store.get_partial_values(proto, [(k, ranges[r]) for k, r in pairs])
        partial[case] = [None if b is None else b.to_bytes().hex() for b in bufs]
    exists = {}
    for key in job["keys"] + job["missing"]:
        try:
            exists[key] = await store.exists(key)
        except ic.InvalidInputError as exc:
            exists[key] = "refused: " + str(exc).splitlines()[0]
    return {
        "get": get, "partial": partial, "exists": exists,
        "getsize": {k: await store.getsize(k) for k in job["keys"]},
        "getsize_prefix": {p: await store.getsize_prefix(p) for p in ("many", "partial", "foo")},
        "list": sorted(await _collect_aiterator(store.list())),
        "list_prefix": {p: await attempt(lambda: _collect_aiterator(store.list_prefix(p)))
                        for p in job["prefixes"]},
        "list_dir": {p: await attempt(lambda: _collect_aiterator(store.list_dir(p))) for p in job["prefixes"]},
        "is_empty": {p: await attempt(lambda: store.is_empty(p)) for p in job["prefixes"]},
    }

async def attempt(call):
    # the answer, sorted if a listing; or why icechunk refused (a prefix that names no node)
    try:
        got = await call()
    except ic.InvalidInputError as exc:
        return "refused: " + str(exc).splitlines()[0]
    return got if isinstance(got, bool) else sorted(got)
print(json.dumps(asyncio.run(answers())))
"""


@pytest.fixture(scope="module")
def icechunk_store(tmp_path_factory, icechunk2_python) -> dict:
    """The archive of the repository icechunk wrote, and icechunk's answers about that repository."""
    work = tmp_path_factory.mktemp("contract")
    job = {"keys": CHUNKS + METADATA, "missing": MISSING, "prefixes": PREFIXES, "partial": PARTIAL}
    answers = json.loads(run_peer_script(icechunk2_python, ICECHUNK_STORE, str(work / "repo"), json.dumps(job)))
    export(work / "repo", work / "repo.zs", include_chunks=True, export_time=1)
    return {"path": work / "repo.zs", **answers}


def _hex(buf: Buffer | None) -> str | None:
    return None if buf is None else buf.to_bytes().hex()


def _value(answers: dict, key: str) -> bytes | None:
    """The whole value icechunk holds at ``key``; None for a key it lacks or refuses as no key at all."""
    whole = answers["get"][f"{key} all"]
    if whole is None:
        return None
    if whole.startswith("refused"):
        assert "invalid zarr key" in whole or "there is not an array" in whole, whole
        return None
    return bytes.fromhex(whole)


def _by_prefix(answers: dict, call: str, prefix: str):
    """icechunk's answer to ``call(prefix)``; where icechunk refuses a prefix that names no node, the
    answer zarr's stores give for a plain string prefix, from icechunk's list of every key."""
    answer = answers[call][prefix]
    if not (isinstance(answer, str) and answer.startswith("refused")):
        return answer
    assert "Only prefixes pointing to a group or array" in answer, answer
    under = [k for k in answers["list"] if k.startswith(prefix)]
    if call == "list_prefix":
        return under
    if call == "is_empty":
        return not under
    base = prefix.rstrip("/") + "/" if prefix.rstrip("/") else ""
    return sorted({k[len(base) :].split("/")[0] for k in answers["list"] if k.startswith(base)})


_READ_ONLY = "store was opened in read-only mode and does not support writing"


class TestArchiveStore(StoreTests[ArchiveStore, Buffer]):
    store_cls = ArchiveStore
    buffer_cls = Buffer

    @pytest.fixture
    def store_kwargs(self, icechunk_store) -> dict:
        archive = RepoArchive(icechunk_store["path"])
        yield {"archive": archive, "ref": "main", "repo": None}
        archive.close()

    async def set(self, store: ArchiveStore, key: str, value: Buffer) -> None:
        """The backend is an immutable archive: nothing can put a key into it."""
        raise AssertionError("an archive is immutable: every case reads keys icechunk wrote")

    async def get(self, store: ArchiveStore, key: str) -> Buffer:
        """The value from the archive's records, not through the store."""
        for node in store.archive.ls(f"snapshot:{store.snapshot_id}"):
            if key == (node["path"].strip("/") + "/zarr.json").lstrip("/"):
                return self.buffer_cls.from_bytes(node["user_data"])
        raise KeyError(key)

    async def _unchanged(self, store: ArchiveStore, answers: dict) -> None:
        for key in ("get/c/0", "zarr.json"):
            assert _hex(await store.get(key, prototype=default_buffer_prototype())) == answers["get"][f"{key} all"]

    # -- the store's own description -------------------------------------------------------------

    def test_store_repr(self, store: ArchiveStore) -> None:
        assert repr(store) == (f"ArchiveStore({store.archive.name!r}, ref='main', snapshot={store.snapshot_id!r})")

    def test_store_supports_writes(self, store: ArchiveStore) -> None:
        assert not store.supports_writes and not store.supports_deletes

    def test_store_supports_listing(self, store: ArchiveStore) -> None:
        assert store.supports_listing

    def test_store_read_only(self, store: ArchiveStore) -> None:
        assert store.read_only
        with pytest.raises(AttributeError):
            store.read_only = False

    @pytest.mark.parametrize("read_only", [True, False])
    async def test_store_open_read_only(self, open_kwargs: dict, read_only: bool) -> None:
        if read_only:
            store = await self.store_cls.open(**open_kwargs, read_only=True)
            assert store._is_open and store.read_only
        else:
            with pytest.raises(ValueError, match="cannot be opened for writing"):
                await self.store_cls.open(**open_kwargs, read_only=False)

    async def test_serializable_store(self, store: ArchiveStore) -> None:
        copy = pickle.loads(pickle.dumps(store))
        try:
            assert copy == store and copy.read_only
            assert copy.archive is not store.archive  # the copy opened the archive file itself
            meta = await copy.get("zarr.json", prototype=default_buffer_prototype())
            assert meta.to_bytes() == (await self.get(store, "zarr.json")).to_bytes()
        finally:
            copy.close()

    # -- reads, each held against icechunk's store on the same repository --------------------------

    @pytest.mark.parametrize("key", CHUNKS + METADATA + MISSING)
    @pytest.mark.parametrize("byte_range", sorted(RANGES))
    async def test_get(self, store: ArchiveStore, icechunk_store, key: str, byte_range: str) -> None:
        """The range of the value icechunk holds at ``key``, as zarr's stores cut it (a Python slice),
        and icechunk's own answer alike, but where icechunk refuses a range past a chunk's end,
        answers a suffix request on a ``zarr.json`` with all BUT its last n bytes, and refuses keys it
        cannot parse (zarr: a missing key, None)."""
        observed = await store.get(key, prototype=default_buffer_prototype(), byte_range=RANGES[byte_range])
        whole = _value(icechunk_store, key)
        if whole is None:
            assert observed is None
            return
        start, stop = _normalize_byte_range_index(Buffer.from_bytes(whole), RANGES[byte_range])
        assert _hex(observed) == whole[start:stop].hex()
        theirs = icechunk_store["get"][f"{key} {byte_range}"]
        if key in METADATA and byte_range.startswith("suffix"):
            assert theirs == whole[: -RANGES[byte_range].suffix].hex()
        elif theirs.startswith("refused"):
            assert key in CHUNKS and "out of bounds" in theirs, theirs
        else:
            assert theirs == whole[start:stop].hex()

    async def test_get_metadata_is_the_archived_user_data(self, store: ArchiveStore) -> None:
        for key in METADATA:
            got = await store.get(key, prototype=default_buffer_prototype())
            assert got.to_bytes() == (await self.get(store, key)).to_bytes()

    async def test_get_not_open(self, store_not_open: ArchiveStore, icechunk_store) -> None:
        assert not store_not_open._is_open
        observed = await store_not_open.get("get/c/0", prototype=default_buffer_prototype())
        assert _hex(observed) == icechunk_store["get"]["get/c/0 all"] == "01020304"

    async def test_get_raises(self, store: ArchiveStore) -> None:
        with pytest.raises((ValueError, TypeError), match=r"Unexpected byte_range, got.*"):
            await store.get("get/c/0", prototype=default_buffer_prototype(), byte_range=(0, 2))

    async def test_get_many(self, store: ArchiveStore, icechunk_store) -> None:
        keys = [f"many/c/{i}" for i in range(10)]
        observed = await _collect_aiterator(store._get_many((k, default_buffer_prototype(), None) for k in keys))
        assert (
            sorted((k, _hex(b)) for k, b in observed)
            == sorted((k, icechunk_store["get"][f"{k} all"]) for k in keys)
            == sorted((k, k[-1].encode().hex()) for k in keys)
        )

    @pytest.mark.parametrize("key", CHUNKS + METADATA)
    async def test_getsize(self, store: ArchiveStore, icechunk_store, key: str) -> None:
        assert await store.getsize(key) == icechunk_store["getsize"][key]

    @pytest.mark.parametrize("prefix", ["many", "partial", "foo"])
    async def test_getsize_prefix(self, store: ArchiveStore, icechunk_store, prefix: str) -> None:
        assert await store.getsize_prefix(prefix) == icechunk_store["getsize_prefix"][prefix]

    async def test_getsize_raises(self, store: ArchiveStore) -> None:
        for key in MISSING:
            with pytest.raises(FileNotFoundError):
                await store.getsize(key)

    @pytest.mark.parametrize("case", sorted(PARTIAL))
    async def test_get_partial_values(self, store: ArchiveStore, icechunk_store, case: str) -> None:
        observed = await store.get_partial_values(
            prototype=default_buffer_prototype(), key_ranges=[(k, RANGES[r]) for k, r in PARTIAL[case]]
        )
        assert [_hex(b) for b in observed] == icechunk_store["partial"][case]

    async def test_exists(self, store: ArchiveStore, icechunk_store) -> None:
        """A chunk key under a group, which icechunk refuses, does not exist to zarr."""
        expected = {k: v if isinstance(v, bool) else False for k, v in icechunk_store["exists"].items()}
        assert {k: await store.exists(k) for k in expected} == expected
        assert not await store.exists("foo") and await store.exists("zarr.json")

    async def test_is_empty(self, store: ArchiveStore, icechunk_store) -> None:
        expected = {p: _by_prefix(icechunk_store, "is_empty", p) for p in PREFIXES}
        assert {p: await store.is_empty(p) for p in PREFIXES} == expected

    async def test_list(self, store: ArchiveStore, icechunk_store) -> None:
        assert sorted(await _collect_aiterator(store.list())) == icechunk_store["list"]

    async def test_list_prefix(self, store: ArchiveStore, icechunk_store) -> None:
        for prefix in PREFIXES:
            observed = sorted(await _collect_aiterator(store.list_prefix(prefix)))
            assert observed == _by_prefix(icechunk_store, "list_prefix", prefix), prefix

    async def test_list_empty_path(self, store: ArchiveStore, icechunk_store) -> None:
        assert sorted(await _collect_aiterator(store.list_prefix(""))) == icechunk_store["list"]

    async def test_list_dir(self, store: ArchiveStore, icechunk_store) -> None:
        for prefix in PREFIXES:
            observed = sorted(await _collect_aiterator(store.list_dir(prefix)))
            assert observed == _by_prefix(icechunk_store, "list_dir", prefix), prefix

    async def test_get_bytes(self, store: ArchiveStore, icechunk_store) -> None:
        proto = default_buffer_prototype()
        assert (await store._get_bytes("get/c/0", prototype=proto)).hex() == icechunk_store["get"]["get/c/0 all"]
        with pytest.raises(FileNotFoundError):
            await store._get_bytes("nonexistent_key", prototype=proto)

    def test_get_bytes_sync(self, store: ArchiveStore, icechunk_store) -> None:
        got = store._get_bytes_sync("foo/baz/c/0", prototype=default_buffer_prototype())
        assert got.hex() == icechunk_store["get"]["foo/baz/c/0 all"]

    async def test_get_json(self, store: ArchiveStore, icechunk_store) -> None:
        got = await store._get_json("get/zarr.json", prototype=default_buffer_prototype())
        assert got == json.loads(bytes.fromhex(icechunk_store["get"]["get/zarr.json all"]))

    def test_get_json_sync(self, store: ArchiveStore, icechunk_store) -> None:
        got = store._get_json_sync("a/b/c/zarr.json", prototype=default_buffer_prototype())
        assert got == json.loads(bytes.fromhex(icechunk_store["get"]["a/b/c/zarr.json all"]))

    def test_get_sync(self, store: ArchiveStore, icechunk_store) -> None:
        """Like zarr's ZipStore and FsspecStore, the store offers no sync methods: zarr reads it through
        ``get`` in its event loop."""
        assert not isinstance(store, (SupportsGetSync, SupportsSetSync, SupportsDeleteSync))
        got = sync(store.get("partial/c/0/1", prototype=default_buffer_prototype()))
        assert _hex(got) == icechunk_store["get"]["partial/c/0/1 all"]

    def test_get_sync_missing(self, store: ArchiveStore) -> None:
        assert not isinstance(store, SupportsGetSync)
        assert sync(store.get("nonexistent", prototype=default_buffer_prototype())) is None

    # -- writes: each refused as zarr's read-only stores refuse it, the data unchanged --------------

    async def test_read_only_store_raises(self, open_kwargs: dict, icechunk_store) -> None:
        store = await self.store_cls.open(**open_kwargs, read_only=True)
        for write in (store.set("foo", self.buffer_cls.from_bytes(b"bar")), store.delete("foo")):
            with pytest.raises(ValueError, match=_READ_ONLY):
                await write
        await self._unchanged(store, icechunk_store)

    @pytest.mark.parametrize("key", ["zarr.json", "get/c/0", "many/c/3", "new/c/0"])
    @pytest.mark.parametrize("data", [b"\x01\x02\x03\x04", b""])
    async def test_set(self, store: ArchiveStore, icechunk_store, key: str, data: bytes) -> None:
        assert store.read_only
        with pytest.raises(ValueError, match=_READ_ONLY):
            await store.set(key, self.buffer_cls.from_bytes(data))
        await self._unchanged(store, icechunk_store)
        assert not await store.exists("new/c/0")

    async def test_set_not_open(self, store_not_open: ArchiveStore, icechunk_store) -> None:
        assert not store_not_open._is_open
        with pytest.raises(ValueError, match=_READ_ONLY):
            await store_not_open.set("get/c/0", self.buffer_cls.from_bytes(b"\x01\x02\x03\x04"))
        await self._unchanged(store_not_open, icechunk_store)

    async def test_set_many(self, store: ArchiveStore, icechunk_store) -> None:
        pairs = [(k, self.buffer_cls.from_bytes(k.encode())) for k in ("zarr.json", "get/c/0", "new/c/0")]
        with pytest.raises(ValueError, match=_READ_ONLY):
            await store._set_many(pairs)
        await self._unchanged(store, icechunk_store)

    async def test_set_if_not_exists(self, store: ArchiveStore, icechunk_store) -> None:
        for key in ("get/c/0", "k2"):
            with pytest.raises(ValueError, match=_READ_ONLY):
                await store.set_if_not_exists(key, self.buffer_cls.from_bytes(b"1111"))
        await self._unchanged(store, icechunk_store)
        assert not await store.exists("k2")

    async def test_delete(self, store: ArchiveStore, icechunk_store) -> None:
        with pytest.raises(ValueError, match=_READ_ONLY):
            await store.delete("get/zarr.json")
        assert await store.exists("get/zarr.json")

    async def test_delete_dir(self, store: ArchiveStore, icechunk_store) -> None:
        with pytest.raises(ValueError, match=_READ_ONLY):
            await store.delete_dir("foo")
        assert sorted(await _collect_aiterator(store.list_prefix("foo/"))) == icechunk_store["list_prefix"]["foo/"]

    async def test_delete_nonexistent_key_does_not_raise(self, store: ArchiveStore) -> None:
        """zarr's writable stores ignore deleting a missing key; a read-only store refuses every delete."""
        with pytest.raises(ValueError, match=_READ_ONLY):
            await store.delete("nonexistent_key")

    async def test_clear(self, store: ArchiveStore, icechunk_store) -> None:
        with pytest.raises(ValueError, match=_READ_ONLY):
            await store.clear()
        assert not await store.is_empty("")
        assert sorted(await _collect_aiterator(store.list())) == icechunk_store["list"]

    def test_set_sync(self, store: ArchiveStore) -> None:
        assert not isinstance(store, SupportsSetSync)
        with pytest.raises(ValueError, match=_READ_ONLY):
            sync(store.set("sync_set", self.buffer_cls.from_bytes(b"\x01")))

    def test_delete_sync(self, store: ArchiveStore) -> None:
        assert not isinstance(store, SupportsDeleteSync)
        with pytest.raises(ValueError, match=_READ_ONLY):
            sync(store.delete("get/c/0"))

    def test_delete_sync_missing(self, store: ArchiveStore) -> None:
        assert not isinstance(store, SupportsDeleteSync)
        with pytest.raises(ValueError, match=_READ_ONLY):
            sync(store.delete("nonexistent_sync"))
