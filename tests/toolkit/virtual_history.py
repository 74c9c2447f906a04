"""Virtual repositories written by VirtualiZarr and icechunk 2.x (``virtualizarr_repo.py`` in the ic2 peer)
over NetCDF-4 sources on local disk, nginx or moto S3, and the comparison of what icechunk answered about
them with what an archive answers once the sources are gone."""

from __future__ import annotations

import json
import os
import pickle
import shutil
from pathlib import Path
from typing import Any

import numpy as np

from toolkit.peers import run_peer_script
from toolkit.places import ROOT

SCRIPT = ROOT / "tests" / "toolkit" / "virtualizarr_repo.py"
BUCKET = "sources"


def peer(python: Path, *args: str) -> str:
    """``virtualizarr_repo.py ARGS`` in the ic2 peer: its stdout's last line."""
    out = run_peer_script(python, SCRIPT.read_text(), *args, env={**os.environ, "RUST_LOG": "error"})
    return out.strip().splitlines()[-1] if out.strip() else ""


class Sources:
    """Where NetCDF files live for a repository: a local directory, an nginx root, or a moto bucket
    (files are written locally by the peer, then put where the kind says)."""

    def __init__(self, kind: str, local: Path, nginx: Any = None, s3: Any = None, endpoint: str | None = None):
        self.kind, self.local, self.nginx, self.s3, self.endpoint = kind, local, nginx, s3, endpoint
        local.mkdir(parents=True, exist_ok=True)
        if kind == "file":
            self.prefix = f"file://{local}/"
        elif kind == "http":
            (nginx.root / local.name).mkdir()
            self.prefix = nginx.url(f"{local.name}/")
        else:
            self.prefix = f"s3://{BUCKET}/{local.name}/"

    @property
    def json(self) -> str:
        """The SOURCE argument of ``virtualizarr_repo.py``."""
        return json.dumps(
            {
                "prefix": self.prefix,
                "kind": self.kind,
                "root": str(self.local),
                "endpoint": self.endpoint,
                "bucket": BUCKET,
            }
        )

    @property
    def authorize(self) -> dict[str, dict[str, str]]:
        """The prefix an export may read, with the storage options of an S3 source."""
        return {self.prefix: {"region": "us-east-1"} if self.kind == "s3" else {}}

    def write(self, python: Path, name: str, seed: int, start: int, times: int) -> None:
        """A NetCDF file, put where readers find it."""
        peer(python, "netcdf", str(self.local), name, str(seed), str(start), str(times))
        self.put(name, (self.local / name).read_bytes())

    def put(self, name: str, data: bytes) -> None:
        """``data`` as the source file ``name`` (a local file is rewritten in place)."""
        if self.kind == "file":
            if (self.local / name).read_bytes() != data:
                with open(self.local / name, "r+b") as f:
                    f.write(data)
                    f.truncate()
        elif self.kind == "http":
            (self.nginx.root / self.local.name / name).write_bytes(data)
        else:
            self.s3.put_object(Bucket=BUCKET, Key=f"{self.local.name}/{name}", Body=data)

    def delete(self, name: str | None = None) -> None:
        """One source file, or all of them."""
        if self.kind == "file":
            if name is None:
                shutil.rmtree(self.local)
            else:
                (self.local / name).unlink()
        elif self.kind == "http":
            target = self.nginx.root / self.local.name
            shutil.rmtree(target) if name is None else (target / name).unlink()
        else:
            keys = (
                [f"{self.local.name}/{name}"]
                if name
                else [
                    o["Key"]
                    for o in self.s3.list_objects_v2(Bucket=BUCKET, Prefix=f"{self.local.name}/").get("Contents", [])
                ]
            )
            for key in keys:
                self.s3.delete_object(Bucket=BUCKET, Key=key)


def commit(python: Path, repo: Path, sources: Sources, message: str, name: str, *flags: str) -> str:
    """A commit of the virtual dataset of source ``name`` (``--create``, ``--append``, ``--tag T`` ...): its id."""
    return peer(python, "commit", str(repo), sources.json, message, name, *flags)


def answers(python: Path, repo: Path, sources: Sources, out: Path) -> dict:
    """What icechunk's own store gives for every snapshot of every branch and tag: chunk bytes by key,
    and the dataset xarray reads."""
    peer(python, "answers", str(repo), sources.json, str(out))
    with open(out, "rb") as f:
        return pickle.load(f)


def same(a: Any, b: Any, where: str = "") -> None:
    """Deep equality of decoded datasets (dicts in any order, arrays by value, NaN equal to NaN)."""
    if isinstance(a, dict):
        assert isinstance(b, dict) and set(a) == set(b), (where, sorted(a), sorted(b) if isinstance(b, dict) else b)
        for key in a:
            same(a[key], b[key], f"{where}/{key}")
    elif isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        a, b = np.asarray(a), np.asarray(b)
        assert a.shape == b.shape and a.dtype == b.dtype, (where, a.dtype, b.dtype, a.shape, b.shape)
        assert np.array_equal(a, b, equal_nan=a.dtype.kind in "fc"), where
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            same(x, y, f"{where}[{i}]")
    else:
        assert a == b or (a != a and b != b), (where, a, b)
