"""The xarray backend ``engine="zsarchive"``: any snapshot of an archive as a Dataset or DataTree.

xarray's own zarr backend reads our read-only store (:func:`zsarchive.open_store`), so decoding is
exactly ``xr.open_zarr``'s. Only xarray imports this module (through the ``xarray.backends`` entry
point) or a user who asks for it: reading commands never pay for xarray.
"""

from __future__ import annotations

import importlib.util
import os
from typing import Any, Callable, Iterable, Mapping

import xarray as xr
from xarray.backends import BackendEntrypoint
from xarray.backends.zarr import ZarrBackendEntrypoint

from zsarchive.archive.zarrstore import open_store

_DECODING = (
    "mask_and_scale",
    "decode_times",
    "concat_characters",
    "decode_coords",
    "drop_variables",
    "use_cftime",
    "decode_timedelta",
)
"""xarray's CF decoding keywords, handed to its zarr backend unchanged."""


class ZsarchiveBackendEntrypoint(BackendEntrypoint):
    """Open the snapshot REF names in a repo archive (a path or URL) with xarray.

    Keywords: ``ref`` (branch, tag, snapshot id, with any ``~N``, ``^`` or ``@TIME``; default ``main``), ``group`` (a path in
    the snapshot), ``repo`` (where native chunks not embedded live, with ``storage_options`` and
    ``anon``), ``authorize`` (virtual chunk prefixes to follow); every other keyword is xarray's.
    """

    description = "Open any snapshot of a zsarchive repo archive (.zs) as a Dataset or DataTree"
    open_dataset_parameters = (
        "filename_or_obj",
        "ref",
        "group",
        "repo",
        "authorize",
        "storage_options",
        "anon",
        *_DECODING,
    )

    def guess_can_open(self, filename_or_obj: Any) -> bool:
        """Paths and URLs ending in ``.zs``."""
        return isinstance(filename_or_obj, (str, os.PathLike)) and os.fspath(filename_or_obj).endswith(".zs")

    def open_dataset(
        self,
        filename_or_obj: Any,
        *,
        ref: str = "main",
        group: str | None = None,
        repo: str | None = None,
        authorize: Iterable[str] | Mapping[str, Mapping[str, Any]] = (),
        storage_options: Mapping[str, object] | None = None,
        anon: bool = False,
        mask_and_scale=True,
        decode_times=True,
        concat_characters=True,
        decode_coords=True,
        drop_variables: str | Iterable[str] | None = None,
        use_cftime=None,
        decode_timedelta=None,
    ) -> xr.Dataset:
        """The group ``group`` of the snapshot REF names, lazily (chunks are read when values are)."""
        return _over_store(
            filename_or_obj,
            ref,
            repo,
            authorize,
            storage_options,
            anon,
            lambda store: ZarrBackendEntrypoint().open_dataset(
                store,
                group=group,
                consolidated=False,
                zarr_format=3,
                mask_and_scale=mask_and_scale,
                decode_times=decode_times,
                concat_characters=concat_characters,
                decode_coords=decode_coords,
                drop_variables=drop_variables,
                use_cftime=use_cftime,
                decode_timedelta=decode_timedelta,
            ),
        )

    def open_datatree(
        self,
        filename_or_obj: Any,
        *,
        ref: str = "main",
        group: str | None = None,
        repo: str | None = None,
        authorize: Iterable[str] | Mapping[str, Mapping[str, Any]] = (),
        storage_options: Mapping[str, object] | None = None,
        anon: bool = False,
        **decoding: Any,
    ) -> xr.DataTree:
        """Every group under ``group`` (default the root) of the snapshot REF names, as one tree."""
        return _over_store(
            filename_or_obj,
            ref,
            repo,
            authorize,
            storage_options,
            anon,
            lambda store: ZarrBackendEntrypoint().open_datatree(
                store, group=group, consolidated=False, zarr_format=3, **_decoding(decoding)
            ),
        )

    def open_groups_as_dict(
        self,
        filename_or_obj: Any,
        *,
        ref: str = "main",
        group: str | None = None,
        repo: str | None = None,
        authorize: Iterable[str] | Mapping[str, Mapping[str, Any]] = (),
        storage_options: Mapping[str, object] | None = None,
        anon: bool = False,
        **decoding: Any,
    ) -> dict[str, xr.Dataset]:
        """Path of each group under ``group`` -> its Dataset (what ``xr.open_groups`` returns)."""
        return _over_store(
            filename_or_obj,
            ref,
            repo,
            authorize,
            storage_options,
            anon,
            lambda store: ZarrBackendEntrypoint().open_groups_as_dict(
                store, group=group, consolidated=False, zarr_format=3, **_decoding(decoding)
            ),
        )


def _decoding(given: dict[str, Any]) -> dict[str, Any]:
    unknown = set(given) - set(_DECODING)
    if unknown:
        raise TypeError(f"unexpected keyword arguments for engine 'zsarchive': {', '.join(sorted(unknown))}")
    return given


def _over_store(
    archive: Any, ref: str, repo: Any, authorize: Any, storage_options: Any, anon: bool, opener: Callable[[Any], Any]
) -> Any:
    """``opener`` (xarray's zarr backend) over the snapshot's store; closing what it returns (a Dataset, a
    DataTree, or the first Dataset of a dict of groups) closes the archive too: xarray leaves a store it
    was given open."""
    store = open_store(archive, ref, repo=repo, authorize=authorize, storage_options=storage_options, anon=anon)
    try:
        opened = opener(store)
    except BaseException:
        store.close()
        raise
    owner = next(iter(opened.values()), None) if isinstance(opened, dict) else opened
    if owner is None:
        store.close()
        return opened
    inner = owner._close

    def close() -> None:
        try:
            if inner is not None:
                inner()
        finally:
            store.close()

    owner.set_close(close)
    return opened


def _default_chunks() -> dict | None:
    # as xr.open_zarr: dask chunks matching the stored ones when dask is there, lazy arrays otherwise
    return {} if importlib.util.find_spec("dask") is not None else None


def open_dataset(
    archive: Any, ref: str = "main", group: str | None = None, *, chunks: Any = "default", **kwargs: Any
) -> xr.Dataset:
    """``xr.open_dataset(archive, engine="zsarchive", ...)`` with ``open_zarr``'s default chunks: dask
    arrays chunked as stored (plain lazy arrays without dask)."""
    chunks = _default_chunks() if chunks == "default" else chunks
    return xr.open_dataset(archive, engine=ZsarchiveBackendEntrypoint, ref=ref, group=group, chunks=chunks, **kwargs)


def open_datatree(
    archive: Any, ref: str = "main", group: str | None = None, *, chunks: Any = "default", **kwargs: Any
) -> xr.DataTree:
    """``xr.open_datatree(archive, engine="zsarchive", ...)`` with ``open_zarr``'s default chunks."""
    chunks = _default_chunks() if chunks == "default" else chunks
    return xr.open_datatree(archive, engine=ZsarchiveBackendEntrypoint, ref=ref, group=group, chunks=chunks, **kwargs)
