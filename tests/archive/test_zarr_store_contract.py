"""zarr's own store test suite (``zarr.testing.store.StoreTests``) run against the archive's store.

The archive store is read-only and immutable: nothing can insert a key behind its back, so the
suite's tests that first write data through the store or its backend are replaced here by their
read-only counterparts on an archive of a repository the real icechunk wrote, and the rest run as
zarr wrote them.
"""

from __future__ import annotations

import pickle

import pytest
from zarr.core.buffer import default_buffer_prototype
from zarr.core.buffer.cpu import Buffer
from zarr.core.sync import _collect_aiterator
from zarr.testing.store import StoreTests

from oracle import repo_path
from zsarchive.archive import RepoArchive, export
from zsarchive.archive.zarrstore import ArchiveStore

_IMMUTABLE = "an archive is immutable: no key can be inserted behind the store's back"


@pytest.fixture(scope="module")
def archive_path(tmp_path_factory):
    path = tmp_path_factory.mktemp("contract") / "v2.zs"
    export(repo_path(2), path, include_chunks=True, export_time=1)
    return path


class TestArchiveStore(StoreTests[ArchiveStore, Buffer]):
    store_cls = ArchiveStore
    buffer_cls = Buffer

    @pytest.fixture
    def store_kwargs(self, archive_path) -> dict:
        archive = RepoArchive(archive_path)
        yield {"archive": archive, "ref": "main", "repo": None}
        archive.close()

    async def set(self, store: ArchiveStore, key: str, value: Buffer) -> None:
        pytest.skip(_IMMUTABLE)

    async def get(self, store: ArchiveStore, key: str) -> Buffer:
        """The value from the archive's records, not through the store."""
        for node in store.archive.ls(f"snapshot:{store.snapshot_id}"):
            if key == (node["path"].strip("/") + "/zarr.json").lstrip("/"):
                return self.buffer_cls.from_bytes(node["user_data"])
        raise KeyError(key)

    def test_store_repr(self, store: ArchiveStore) -> None:
        assert repr(store) == (f"ArchiveStore({store.archive.name!r}, ref='main', "
                               f"snapshot={store.snapshot_id!r})")

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

    async def test_get_metadata_through_the_store(self, store: ArchiveStore) -> None:
        keys = [k for k in await _collect_aiterator(store.list()) if k.endswith("zarr.json")]
        assert keys
        for key in keys:
            got = await store.get(key, prototype=default_buffer_prototype())
            assert got.to_bytes() == (await self.get(store, key)).to_bytes()
            assert await store.getsize(key) == len(got.to_bytes())

    async def test_exists(self, store: ArchiveStore) -> None:
        assert not await store.exists("foo")
        assert await store.exists("zarr.json")

    async def test_is_empty(self, store: ArchiveStore) -> None:
        assert not await store.is_empty("")
        assert await store.is_empty("spam/")

    async def test_list_prefix(self, store: ArchiveStore) -> None:
        every = await _collect_aiterator(store.list())
        for prefix in ("", "data/", "data/sub/", "nothing/"):
            observed = sorted(await _collect_aiterator(store.list_prefix(prefix)))
            assert observed == sorted(k for k in every if k.startswith(prefix))

    async def test_list_dir(self, store: ArchiveStore) -> None:
        every = await _collect_aiterator(store.list())
        for root in ("", "data", "data/"):
            base = root.rstrip("/") + "/" if root.rstrip("/") else ""
            names = {k[len(base):].split("/")[0] for k in every if k.startswith(base)}
            assert names <= set(await _collect_aiterator(store.list_dir(root)))

    # The suite's write-first tests below are skipped: the read-only store refuses each write, as
    # zarr's read-only stores do.
    async def test_writes_are_refused(self, store: ArchiveStore) -> None:
        buf = self.buffer_cls.from_bytes(b"x")
        for write in (store.set("foo/zarr.json", buf), store._set_many([("c/0", buf)]), store.clear()):
            with pytest.raises(ValueError, match="read-only"):
                await write

    async def test_list(self, store: ArchiveStore) -> None:
        pytest.skip(_IMMUTABLE)

    async def test_list_empty_path(self, store: ArchiveStore) -> None:
        pytest.skip(_IMMUTABLE)

    async def test_getsize_prefix(self, store: ArchiveStore) -> None:
        pytest.skip(_IMMUTABLE)

    async def test_set_many(self, store: ArchiveStore) -> None:
        pytest.skip(_IMMUTABLE)

    async def test_set_not_open(self, store_not_open: ArchiveStore) -> None:
        pytest.skip(_IMMUTABLE)

    @pytest.mark.parametrize("key", ["zarr.json"])
    @pytest.mark.parametrize("data", [b""])
    async def test_set(self, store: ArchiveStore, key: str, data: bytes) -> None:
        pytest.skip(_IMMUTABLE)
