"""Code that runs inside a dask cluster's worker processes (``client.run``): they import it from the
tests' path, which they share. A worker armed with :func:`die_writing` kills itself in the middle of
writing a file, as a machine lost midway would: a task half done, a temporary file half written."""

from __future__ import annotations

import os
import signal
from pathlib import Path

from zsarchive.io.sink import LocalSink

_ORIGINAL = LocalSink._write_temp


def die_writing(marker: str, under: str, after: int = 1) -> None:
    """Arm this worker: once it has written ``after`` files into a directory named ``under``, the next such
    file is half written, then the first worker of the cluster to get there records its pid in ``marker``
    and dies (SIGKILL); every other write goes on as usual."""
    written = [0]

    def write_temp(self: LocalSink, temp: Path, data, durable: bool = False) -> None:
        if temp.parent.name != under or os.path.exists(marker):
            return _ORIGINAL(self, temp, data, durable)
        if written[0] < after:
            _ORIGINAL(self, temp, data, durable)
            written[0] += 1
            return None
        whole = b"".join(self.parts(data))  # the file's bytes, however they are handed in (streamed or whole)
        with open(temp, "xb") as handle:
            handle.write(whole[: len(whole) // 2])
        try:
            claim = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:  # another worker died first: finish this file as usual
            os.unlink(temp)
            return _ORIGINAL(self, temp, whole, durable)
        os.write(claim, f"{os.getpid()} {temp}".encode())
        os.close(claim)
        os.kill(os.getpid(), signal.SIGKILL)
        return None

    LocalSink._write_temp = write_temp  # type: ignore[method-assign]


def disarm() -> None:
    """Undo :func:`die_writing` in this worker."""
    LocalSink._write_temp = _ORIGINAL  # type: ignore[method-assign]
