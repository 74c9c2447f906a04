"""Which process reads which repository metadata files: a spy on local storage reads."""

from __future__ import annotations

import os
from pathlib import Path

from zsarchive.icechunk.storage import LocalStorage

METADATA = ("manifests/", "transactions/")


def spy_on_metadata_reads(monkeypatch, worker_log: Path) -> list[str]:
    """The manifests and transaction logs this process reads from local storage, listed as read; forked
    worker processes inherit the spy and append theirs, a line each, to ``worker_log``."""
    main, mine = os.getpid(), []
    real = LocalStorage.read

    def read(self, key: str):
        if key.startswith(METADATA):
            if os.getpid() == main:
                mine.append(key)
            else:
                with open(worker_log, "a") as log:
                    log.write(key + "\n")
        return real(self, key)

    monkeypatch.setattr(LocalStorage, "read", read)
    return mine
