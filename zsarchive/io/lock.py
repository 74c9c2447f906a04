"""A lock object in a directory or object-store prefix: created only if absent (``O_EXCL`` locally, a
conditional put on object stores), so that one of two programs working on the same target proceeds and
the other refuses or waits.

The lock holds JSON naming its holder: host, process id, the process's start (to tell a reused id), the
machine's boot id, the holder's own clock, and a random token. A lock is *stale* when its holder ran on this
machine and is gone (another boot, no such process, or another process under the id), or when it is older
than a limit by the store's own clock: the time the store stamped on it against the time it stamps on a
probe written now, so that no two machines' clocks are ever compared. A stale lock is broken only when the
caller asks, and only by one breaker: the breaker first creates ``LOCK.broken-TOKEN`` (create-if-absent
again), checks that the lock still holds that token, and removes it. An object store that ignores the
condition of a create-only put is found out on every acquisition (a second create-only put of the lock
must fail) and refused: its lock could not keep two writers apart.
"""

from __future__ import annotations

import json
import os
import secrets
import socket
import time
from typing import Callable

from zsarchive.errors import ZSError
from zsarchive.io.sink import AlreadyExists, Directory, LocalSink

LOCK_VERSION = 1
"""The version of the lock's JSON (its ``zsarchive_lock`` field)."""
_LIMIT = 1 << 16
"""Bytes a lock may hold (it is a few hundred)."""
_VANISHED = 16
"""Times in a row a lock may refuse to be created and then not be there, before that is an error."""
_FIRST_WAIT, _LONGEST_WAIT = 1.0, 30.0
"""Seconds between attempts while waiting: doubling from the first to the longest."""


class Locked(ZSError):
    """Another holder has the lock (and it is not stale, or breaking it was not asked for)."""


class Holder:
    """Who holds a lock, as its JSON says."""

    def __init__(self, fields: dict, stamp: int | None):
        self.fields = fields
        self.stamp = stamp
        """When the store wrote the lock (its own clock, microseconds); None when it is gone."""

    @property
    def token(self) -> str:
        return str(self.fields.get("token"))

    def describe(self) -> str:
        """``host H, pid P, since TIME`` (the holder's clock)."""
        f = self.fields
        return f"host {f.get('host')!s:.100}, pid {f.get('pid')!s:.20}, since {f.get('started')!s:.40}"

    def gone_here(self) -> str | None:
        """Why the holder is known to be gone, when it ran on this machine and no longer runs; else None."""
        f = self.fields
        if f.get("host") != socket.gethostname() or not isinstance(f.get("pid"), int):
            return None
        boot = _boot_id()
        if boot is not None and f.get("boot_id") not in (None, boot):
            return "this machine has restarted since"
        pid = f["pid"]
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return f"no process {pid} runs here"
        except (PermissionError, OverflowError, ValueError):
            return None
        started = _process_start(pid)
        if started is not None and f.get("process_start") not in (None, started):
            return f"process {pid} is another program now"
        return None


def _boot_id() -> str | None:
    try:
        with open("/proc/sys/kernel/random/boot_id") as handle:
            return handle.read().strip()
    except OSError:
        return None


def _process_start(pid: int) -> int | None:
    """When process ``pid`` started, in clock ticks since boot (Linux), to tell a process id reused."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            fields = handle.read().rsplit(b")", 1)[1].split()
        return int(fields[19])
    except (OSError, IndexError, ValueError):
        return None


class Lock:
    """The lock ``key`` of ``directory``, held from :meth:`acquire` to :meth:`release` (or ``with``)."""

    def __init__(self, directory: Directory, key: str):
        self.directory = directory
        self.key = key
        self.token = secrets.token_hex(16)
        self.body = json.dumps(
            {
                "zsarchive_lock": LOCK_VERSION,
                "host": socket.gethostname(),
                "pid": os.getpid(),
                "process_start": _process_start(os.getpid()),
                "boot_id": _boot_id(),
                "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "token": self.token,
            }
        ).encode()
        self.held = False

    @property
    def where(self) -> str:
        return self.directory.url(self.key)

    def holder(self) -> Holder | None:
        """Who holds the lock now (None: nobody); a lock that is not such JSON is held by an unknown holder."""
        raw = self.directory.get(self.key, _LIMIT)
        if raw is None:
            return None
        try:
            fields = json.loads(raw)
        except ValueError:
            fields = None
        if not isinstance(fields, dict):
            fields = {"host": "unknown (not a lock this program wrote)"}
        return Holder(fields, self.directory.modified(self.key))

    def acquire(
        self,
        wait: float | None = None,
        break_stale: bool = False,
        stale_after: float = 86400.0,
        report: Callable[[str], None] | None = None,
    ) -> None:
        """Take the lock. A held lock: :class:`Locked` at once, or after waiting up to ``wait`` seconds
        (``float('inf')``: for as long as it takes); with ``break_stale`` a stale one (its holder gone from
        this machine, or older than ``stale_after`` seconds by the store's clock) is broken first.
        ``report`` hears, once, that the run waits."""
        deadline = None if wait is None else time.monotonic() + wait
        pause = _FIRST_WAIT
        vanished = 0
        while True:
            try:
                self.directory.put_new(self.key, self.body)
            except KeyboardInterrupt:
                # Ctrl-C or SIGTERM while the lock was being made (its sync may take a while): it may be
                # there, and is then this run's to remove (release checks the token)
                self.held = True
                self.release()
                raise
            except AlreadyExists:
                holder = self.holder()
                if holder is None:  # released meanwhile: try again at once, but not for ever
                    vanished += 1
                    if vanished > _VANISHED:
                        raise ZSError(f"{self.where}: exists, yet cannot be read (a dangling link?)") from None
                    continue
                why = self._stale(holder, stale_after) if break_stale else None
                if why is not None:
                    self._break(holder)
                    continue
                if deadline is None or time.monotonic() >= deadline:
                    raise Locked(self._refusal(holder, why or self._stale(holder, stale_after))) from None
                if report is not None:
                    report(f"{self.where}: held by {holder.describe()}; waiting")
                    report = None
                time.sleep(min(pause * (1 + secrets.randbelow(100) / 400), max(0.0, deadline - time.monotonic())))
                pause = min(pause * 2, _LONGEST_WAIT)
                continue
            self.held = True
            self._check_exclusive()
            return

    def _check_exclusive(self) -> None:
        """Refuse a store that ignores create-only puts: a second one of the lock must fail."""
        if isinstance(self.directory, LocalSink):
            return  # a hard link (or O_EXCL) is exclusive by the file system's own rule
        try:
            self.directory.put_new(self.key, self.body)
        except AlreadyExists:
            return
        self.release()
        raise ZSError(
            f"{self.where}: the store ignores the condition of a create-only write (If-None-Match: *): "
            "a lock there cannot keep two runs apart, so this one stops (run without a lock only "
            "where nothing else can run at the same time)"
        )

    def _stale(self, holder: Holder, stale_after: float) -> str | None:
        gone = holder.gone_here()
        if gone is not None:
            return gone
        if holder.stamp is None:
            return None
        age = (self.directory.clock() - holder.stamp) / 1e6
        return f"it is {_duration(age)} old by the store's clock" if age > stale_after else None

    def _break(self, stale: Holder) -> None:
        """Remove a stale lock, as one breaker only (see the module's docstring)."""
        marker = f"{self.key}.broken-{stale.token[:64]}"
        try:
            self.directory.put_new(marker, self.body)
        except AlreadyExists:
            raise Locked(f"{self.where}: another run is breaking this stale lock ({stale.describe()})") from None
        try:
            now = self.holder()
            if now is not None and now.token == stale.token:
                self.directory.delete(self.key)
        finally:
            self.directory.delete(marker)

    def _refusal(self, holder: Holder, stale: str | None) -> str:
        text = f"{self.where}: another run holds the lock ({holder.describe()})"
        if stale is not None:
            return f"{text}, which looks stale: {stale}; --break-lock breaks it"
        return f"{text}; --wait waits for it, and a lock left by a run that died is broken by --break-lock"

    def release(self) -> None:
        """Remove the lock if it is still this one's (a lock broken as stale meanwhile is another's now)."""
        if not self.held:
            return
        self.held = False
        holder = self.holder()
        if holder is not None and holder.token == self.token:
            self.directory.delete(self.key)

    def __enter__(self) -> Lock:
        return self

    def __exit__(self, *exc) -> None:
        self.release()


def _duration(seconds: float) -> str:
    """``3 h 20 min``, ``45 s``: an age for a message."""
    seconds = int(seconds)
    if seconds < 120:
        return f"{seconds} s"
    if seconds < 7200:
        return f"{seconds // 60} min"
    return f"{seconds // 3600} h {seconds % 3600 // 60} min"
