"""Run under icechunk 2.x with VirtualiZarr (``.peers/ic2/bin/python``): virtual repositories made as users
make them, and icechunk's answers about them.

``netcdf DIR NAME SEED START TIMES``: a NetCDF-4 file written with h5netcdf: ``temp`` (float32, chunked,
gzip + shuffle), ``elev`` (float64, contiguous), ``rain`` (int16, CF-packed with scale_factor, add_offset
and a _FillValue, chunked, gzip), coordinates ``time``, ``lat``, ``lon``.

``commit REPO SOURCE MESSAGE FILE [--create] [--append | --overwrite] [--branch B] [--tag T] [--at SECONDS]``:
``open_virtual_dataset`` of the file (HDFParser, an obstore ObjectStoreRegistry) written with
``vds.vz.to_icechunk`` (appended along time with ``--append``; ``--at``: its ``last_updated_at``), committed;
prints the snapshot id. SOURCE is JSON: ``{"prefix": URL prefix, "kind": "file"|"http"|"s3", "root": local
dir (file), "endpoint", "bucket" (s3)}``.

``answers REPO SOURCE OUT``: for every snapshot of every branch and tag, what icechunk's own store gives:
each chunk key's stored bytes (``store.get``), the dataset xarray reads from it (``to_dict``) and the
locations its virtual refs point into (``all_virtual_chunk_locations``), pickled; for a snapshot icechunk
refuses to read (a source changed), the first line of its error instead of the bytes and the dataset.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import pickle
import sys

import numpy as np


def netcdf(directory: str, name: str, seed: int, start: int, times: int) -> None:
    import h5netcdf

    rnd = np.random.default_rng(seed)
    with h5netcdf.File(os.path.join(directory, name), "w") as f:
        f.dimensions = {"time": times, "lat": 4, "lon": 5}
        time = f.create_variable("time", ("time",), "f8")
        time[:] = np.arange(start, start + times, dtype="f8")
        time.attrs.update(units="days since 2025-01-01", calendar="standard")
        lat = f.create_variable("lat", ("lat",), "f4")
        lat[:] = np.linspace(-30, 30, 4, dtype="f4")
        lon = f.create_variable("lon", ("lon",), "f4")
        lon[:] = np.linspace(0, 40, 5, dtype="f4")
        temp = f.create_variable(
            "temp", ("time", "lat", "lon"), "f4", chunks=(1, 4, 5), compression="gzip", shuffle=True
        )
        temp[:] = rnd.normal(280, 5, (times, 4, 5)).astype("f4")
        temp.attrs.update(units="K")
        elev = f.create_variable("elev", ("lat", "lon"), "f8")  # contiguous: one chunk of the whole array
        elev[:] = rnd.uniform(0, 3000, (4, 5)) + seed
        rain = f.create_variable(
            "rain", ("time", "lat", "lon"), "i2", chunks=(2, 4, 5), compression="gzip", fillvalue=np.int16(-32767)
        )
        packed = rnd.integers(0, 20000, (times, 4, 5)).astype("i2")
        packed[0, 0, 0] = -32767  # a missing value
        rain[:] = packed
        rain.attrs.update(scale_factor=np.float32(0.01), add_offset=np.float32(1.5), units="mm")


def _source_store(source: dict):
    """The obstore store VirtualiZarr reads the source through, and the registry key it lives under."""
    from obstore.store import HTTPStore, LocalStore, S3Store

    if source["kind"] == "file":
        return source["prefix"], LocalStore(prefix=source["root"])
    if source["kind"] == "http":
        return source["prefix"], HTTPStore.from_url(source["prefix"], client_options={"allow_http": True})
    return f"s3://{source['bucket']}", S3Store(
        source["bucket"],
        endpoint=source["endpoint"],
        region="us-east-1",
        access_key_id="testing",
        secret_access_key="testing",
        client_options={"allow_http": True},
    )


def _container(source: dict):
    import icechunk as ic

    if source["kind"] == "file":
        store = ic.local_filesystem_store(source["root"])
    elif source["kind"] == "http":
        store = ic.http_store({"allow_http": "true"})
    else:
        store = ic.s3_store(endpoint_url=source["endpoint"], allow_http=True, region="us-east-1", force_path_style=True)
    return ic.VirtualChunkContainer(source["prefix"], store)


def _credentials(source: dict) -> dict:
    import icechunk as ic

    if source["kind"] == "s3":
        found = ic.s3_credentials(access_key_id="testing", secret_access_key="testing")
    elif source["kind"] == "file":
        found = ic.credentials.LocalFileSystemAccess
    else:
        found = ic.credentials.HttpAccess
    return ic.containers_credentials({source["prefix"]: found})


def _repo(path: str, source: dict, create: bool):
    import icechunk as ic

    storage = ic.local_filesystem_storage(path)
    if create:
        config = ic.RepositoryConfig.default()
        config.set_virtual_chunk_container(_container(source))
        return ic.Repository.create(storage, config=config, authorize_virtual_chunk_access=_credentials(source))
    return ic.Repository.open(storage, authorize_virtual_chunk_access=_credentials(source))


def commit(args: argparse.Namespace) -> None:
    from obspec_utils.registry import ObjectStoreRegistry
    from virtualizarr import open_virtual_dataset
    from virtualizarr.parsers import HDFParser

    source = json.loads(args.source)
    repo = _repo(args.repo, source, args.create)
    key, store = _source_store(source)
    vds = open_virtual_dataset(
        url=source["prefix"] + args.file,
        parser=HDFParser(),
        registry=ObjectStoreRegistry({key: store}),
        loadable_variables=["time", "lat", "lon"],
    )
    session = repo.writable_session(args.branch)
    at = None if args.at is None else datetime.datetime.fromtimestamp(args.at, datetime.timezone.utc)
    vds.vz.to_icechunk(
        session.store,
        append_dim="time" if args.append else None,
        last_updated_at=at,
        mode="w" if args.overwrite else None,
    )
    snapshot = session.commit(args.message)
    if args.tag:
        repo.create_tag(args.tag, snapshot)
    print(snapshot)


def answers(args: argparse.Namespace) -> None:
    import xarray as xr
    import zarr
    from zarr.core.buffer import default_buffer_prototype
    from zarr.core.sync import sync

    source = json.loads(args.source)
    repo = _repo(args.repo, source, False)
    heads = {
        **{f"branch:{b}": repo.lookup_branch(b) for b in repo.list_branches()},
        **{f"tag:{t}": repo.lookup_tag(t) for t in repo.list_tags()},
    }
    snapshots = {s.id for head in heads.values() for s in repo.ancestry(snapshot_id=head)}
    out = {"heads": heads, "snapshots": {}}
    for sid in sorted(snapshots):
        session = repo.readonly_session(snapshot_id=sid)
        store = session.store
        chunks = {}
        locations = sorted(session.all_virtual_chunk_locations())
        try:
            group = zarr.open_group(store=store, mode="r")
        except zarr.errors.GroupNotFoundError:  # the repository's first, empty, snapshot
            out["snapshots"][sid] = {"chunks": {}, "dataset": None, "locations": locations}
            continue
        try:
            for name, array in group.arrays():
                for coords in np.ndindex(*array.cdata_shape):
                    key = f"{name}/c/" + "/".join(map(str, coords))
                    found = sync(store.get(key, default_buffer_prototype()))
                    if found is not None:
                        chunks[key] = found.to_bytes()
            with xr.open_zarr(store, consolidated=False, chunks=None) as ds:
                data = ds.load().to_dict(data="array")
        except Exception as exc:  # icechunk refuses a snapshot whose sources changed: say why
            out["snapshots"][sid] = {"error": str(exc).splitlines()[0], "locations": locations}
            continue
        out["snapshots"][sid] = {"chunks": chunks, "dataset": data, "locations": locations}
    with open(args.out, "wb") as f:
        pickle.dump(out, f)


def main() -> None:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command", required=True)
    make = sub.add_parser("netcdf")
    for name, kind in (("dir", str), ("name", str), ("seed", int), ("start", int), ("times", int)):
        make.add_argument(name, type=kind)
    write = sub.add_parser("commit")
    for name in ("repo", "source", "message", "file"):
        write.add_argument(name)
    write.add_argument("--create", action="store_true")
    write.add_argument("--append", action="store_true")
    write.add_argument("--overwrite", action="store_true")
    write.add_argument("--branch", default="main")
    write.add_argument("--tag")
    write.add_argument("--at", type=float)
    read = sub.add_parser("answers")
    for name in ("repo", "source", "out"):
        read.add_argument(name)
    args = parser.parse_args()
    if args.command == "netcdf":
        netcdf(args.dir, args.name, args.seed, args.start, args.times)
    elif args.command == "commit":
        commit(args)
    else:
        answers(args)
    sys.stdout.flush()
    os._exit(0)  # icechunk 2.3 sometimes crashes in its own shutdown, after the work is done


if __name__ == "__main__":
    main()
