"""Run under icechunk 2.x (``.peers/ic2/bin/python``): write an xarray history, or read it back.

``xarray_repo.py write REPO`` writes datasets with ``Dataset.to_zarr`` into a new repository (a
create, an append along time, a region rewrite, a new group, a group whose chunks are virtual refs
into ``REPO-virtual/blob.bin``, and a branch) and prints its snapshot
ids, newest first, and its branches as JSON. ``xarray_repo.py read REPO OUT GROUP SNAPSHOT...``
pickles, per snapshot, ``xr.open_zarr(session.store, group=GROUP).to_dict(data="array")``: what
icechunk's own store gives xarray, to compare with the archive's engine in another Python.
"""

from __future__ import annotations

import json
import os
import pickle
import sys

import icechunk as ic
import numpy as np
import pandas as pd
import xarray as xr
import zarr


def _dataset(times: int, start: int, seed: int) -> xr.Dataset:
    rnd = np.random.default_rng(seed)
    temperature = rnd.normal(280, 5, (times, 3, 4)).astype("f4")
    temperature[0, 0, 0] = np.nan
    return xr.Dataset(
        {
            "temperature": (
                ("time", "lat", "lon"),
                temperature,
                {"units": "K", "long_name": "air temperature <b>&</b>"},
            ),
            "station": (("lat",), np.array(["a", "bé", "中"], dtype="U2")),
            "flag": (("time",), rnd.integers(0, 3, times).astype("i2"), {"flag_values": [0, 1, 2]}),
        },
        coords={
            "time": pd.date_range("2025-01-01", periods=times, freq="D") + pd.Timedelta(days=start),
            "lat": [10.0, 20.0, 30.0],
            "lon": np.arange(4, dtype="i4"),
        },
        attrs={"title": "xarray history", "seed": seed},
    )


def _virtual_prefix(path: str) -> str:
    """The directory beside the repository that its virtual chunks point into, as a URL prefix."""
    return f"file://{os.path.abspath(path)}-virtual/"


def write(path: str) -> None:
    prefix = _virtual_prefix(path)
    blob = np.arange(24, dtype="<f4") * 0.5
    os.makedirs(prefix[len("file://") :], exist_ok=True)
    with open(prefix[len("file://") :] + "blob.bin", "wb") as f:
        f.write(blob.tobytes())
    config = ic.RepositoryConfig.default()
    config.set_virtual_chunk_container(ic.VirtualChunkContainer(prefix, ic.local_filesystem_store(prefix[7:])))
    repo = ic.Repository.create(
        ic.local_filesystem_storage(path),
        config=config,
        authorize_virtual_chunk_access={prefix: ic.credentials.LocalFileSystemAccess},
    )
    session = repo.writable_session("main")
    encoding = {"temperature": {"chunks": (2, 3, 2)}, "flag": {"chunks": (2,)}}
    _dataset(4, 0, 1).to_zarr(session.store, group="data", zarr_format=3, consolidated=False, encoding=encoding)
    session.commit("create")
    session = repo.writable_session("main")
    _dataset(3, 4, 2).to_zarr(session.store, group="data", zarr_format=3, consolidated=False, append_dim="time")
    session.commit("append three days")
    repo.create_branch("dev", repo.lookup_branch("main"))
    session = repo.writable_session("main")
    region = _dataset(2, 1, 3).drop_vars(["station", "lat", "lon"])
    region.to_zarr(session.store, group="data", zarr_format=3, consolidated=False, region={"time": slice(1, 3)})
    session.commit("rewrite days 2 and 3")
    session = repo.writable_session("main")
    xr.Dataset({"height": (("x",), np.arange(5.0))}, attrs={"note": "second group"}).to_zarr(
        session.store, group="other", zarr_format=3, consolidated=False
    )
    session.commit("add a second group")
    session = repo.writable_session("main")
    zarr.open_group(store=session.store, mode="a").create_group("virtual").create_array(
        "v",
        shape=(24,),
        chunks=(6,),
        dtype="<f4",
        compressors=None,
        fill_value=0,
        dimension_names=["t"],
        attributes={"units": "m"},
    )
    session.store.set_virtual_refs(
        "virtual/v",
        [ic.VirtualChunkSpec(index=[i], location=prefix + "blob.bin", offset=24 * i, length=24) for i in range(4)],
    )
    session.commit("virtual chunks")
    session = repo.writable_session("dev")
    _dataset(1, 7, 4).to_zarr(session.store, group="data", zarr_format=3, consolidated=False, append_dim="time")
    session.commit("dev: one more day")
    print(
        json.dumps(
            {"main": [s.id for s in repo.ancestry(branch="main")], "dev": [s.id for s in repo.ancestry(branch="dev")]}
        )
    )


def read(path: str, out: str, group: str, snapshots: list[str]) -> None:
    repo = ic.Repository.open(
        ic.local_filesystem_storage(path),
        authorize_virtual_chunk_access={_virtual_prefix(path): ic.credentials.LocalFileSystemAccess},
    )
    answers = {}
    for sid in snapshots:
        session = repo.readonly_session(snapshot_id=sid)
        with xr.open_zarr(session.store, group=group or None, consolidated=False, chunks=None) as ds:
            answers[sid] = ds.load().to_dict(data="array")
    with open(out, "wb") as f:
        pickle.dump(answers, f)


if __name__ == "__main__":
    if sys.argv[1] == "write":
        write(sys.argv[2])
    else:
        read(sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5:])
    sys.stdout.flush()
    os._exit(0)  # icechunk 2.3 sometimes crashes in its own shutdown, after the work is done
