"""The lock of a directory or object-store prefix: one holder at a time (O_EXCL locally, a conditional put on
moto's S3), a stale lock judged by its holder's process on this machine or by its age on the store's own
clock, broken only when asked and by one breaker, and a store that ignores create-only writes refused."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time

import pytest

from toolkit.servers import ObjectStoreProxy, moto_s3
from zsarchive.errors import ZSError
from zsarchive.io.lock import Lock, Locked
from zsarchive.io.sink import open_sink


def _foreign(directory, **fields) -> dict:
    body = {
        "zsarchive_lock": 1,
        "host": "elsewhere.example",
        "pid": 4242,
        "started": "2099-01-01T00:00:00Z",
        "token": "t" * 32,
        **fields,
    }
    (directory / "the.lock").write_text(json.dumps(body))
    return body


def test_one_holder_at_a_time(tmp_path):
    sink = open_sink(str(tmp_path))
    first, second = Lock(sink, "the.lock"), Lock(sink, "the.lock")
    first.acquire()
    with pytest.raises(Locked) as refused:
        second.acquire()
    message = str(refused.value)
    assert f"host {socket.gethostname()}, pid {os.getpid()}, since " in message and "\n" not in message
    started = time.monotonic()
    with pytest.raises(Locked):
        second.acquire(wait=0.3)
    assert time.monotonic() - started >= 0.3
    first.release()
    second.acquire()
    first.release()  # not held any more: leaves the other's lock alone
    assert json.loads((tmp_path / "the.lock").read_text())["token"] == second.token
    second.release()
    assert not (tmp_path / "the.lock").exists()


def test_an_interruption_while_the_lock_is_made_leaves_no_lock(tmp_path, monkeypatch):
    """Ctrl-C or SIGTERM (both KeyboardInterrupt in zs) arriving once the lock file exists but before the
    lock is taken (here: while its directory is synced) removes it, as release would: no stale lock for the
    next run to break."""
    import zsarchive.io.sink

    def interrupted(directory):
        raise KeyboardInterrupt

    monkeypatch.setattr(zsarchive.io.sink, "fsync_directory", interrupted)
    lock = Lock(open_sink(str(tmp_path)), "the.lock")
    with pytest.raises(KeyboardInterrupt):
        lock.acquire()
    assert not (tmp_path / "the.lock").exists() and not lock.held


def test_a_lock_is_stale_by_its_age_on_the_stores_clock_never_the_holders(tmp_path):
    sink = open_sink(str(tmp_path))
    _foreign(tmp_path)  # its holder's clock says 2099: no matter
    two_days_ago = time.time() - 2 * 86400
    os.utime(tmp_path / "the.lock", (two_days_ago, two_days_ago))
    with pytest.raises(Locked, match=r"which looks stale: it is 48 h 0 min old by the store's clock; --break-lock"):
        Lock(sink, "the.lock").acquire()
    lock = Lock(sink, "the.lock")
    lock.acquire(break_stale=True)
    assert json.loads((tmp_path / "the.lock").read_text())["token"] == lock.token
    lock.release()
    _foreign(tmp_path)
    an_hour_ago = time.time() - 3600
    os.utime(tmp_path / "the.lock", (an_hour_ago, an_hour_ago))
    with pytest.raises(Locked) as live:
        Lock(sink, "the.lock").acquire(break_stale=True)  # younger than the limit: alive as far as anyone knows
    assert "looks stale" not in str(live.value)
    Lock(sink, "the.lock").acquire(break_stale=True, stale_after=1800)


def test_a_holder_gone_from_this_machine_is_stale(tmp_path):
    sink = open_sink(str(tmp_path))
    ended = subprocess.Popen(["true"])
    ended.wait()
    _foreign(tmp_path, host=socket.gethostname(), pid=ended.pid)
    with pytest.raises(Locked, match=rf"looks stale: no process {ended.pid} runs here"):
        Lock(sink, "the.lock").acquire()
    # a live process id that another program now has (its start differs from the one the lock names)
    _foreign(tmp_path, host=socket.gethostname(), pid=os.getpid(), process_start=1)
    with pytest.raises(Locked, match=rf"process {os.getpid()} is another program now"):
        Lock(sink, "the.lock").acquire()
    _foreign(tmp_path, host=socket.gethostname(), pid=os.getpid(), boot_id="another boot")
    with pytest.raises(Locked, match="this machine has restarted since"):
        Lock(sink, "the.lock").acquire()
    Lock(sink, "the.lock").acquire(break_stale=True)


def test_one_breaker_only(tmp_path):
    sink = open_sink(str(tmp_path))
    stale = _foreign(tmp_path)
    os.utime(tmp_path / "the.lock", (0, 0))
    (tmp_path / f"the.lock.broken-{stale['token']}").write_text("another breaker")
    with pytest.raises(Locked, match="another run is breaking this stale lock"):
        Lock(sink, "the.lock").acquire(break_stale=True)
    assert json.loads((tmp_path / "the.lock").read_text())["token"] == stale["token"]


def test_a_lock_this_program_did_not_write_is_held_by_an_unknown_holder(tmp_path):
    (tmp_path / "the.lock").write_bytes(b"\x00garbage")
    with pytest.raises(Locked, match=r"host unknown \(not a lock this program wrote\)"):
        Lock(open_sink(str(tmp_path)), "the.lock").acquire()


def test_an_object_store_ignoring_create_only_writes_is_refused():
    with moto_s3({"locks": {}}):
        honest = open_sink("s3://locks/honest/")
        first, second = Lock(honest, "the.lock"), Lock(honest, "the.lock")
        first.acquire()
        with pytest.raises(Locked, match="another run holds the lock"):
            second.acquire()
        first.release()
        port = int(os.environ["AWS_ENDPOINT_URL"].rsplit(":", 1)[1])
        proxy = ObjectStoreProxy(port, drop=("if-none-match",))  # as a store that ignores the condition
        try:
            os.environ["AWS_ENDPOINT_URL"] = proxy.endpoint
            careless = open_sink("s3://locks/careless/")
            with pytest.raises(ZSError) as refused:
                Lock(careless, "the.lock").acquire()
            assert "ignores the condition of a create-only write (If-None-Match: *)" in str(refused.value)
            assert careless.listing() == {}  # the lock it could not trust is gone
        finally:
            proxy.stop()


def test_a_lock_that_exists_but_cannot_be_read_ends_in_one_line(tmp_path):
    (tmp_path / "the.lock").symlink_to(tmp_path / "nowhere")  # creating it fails, reading it finds nothing
    with pytest.raises(ZSError, match=r"the.lock: exists, yet cannot be read"):
        Lock(open_sink(str(tmp_path)), "the.lock").acquire()
    (tmp_path / "the.lock").unlink()
    (tmp_path / "the.lock").mkdir()
    with pytest.raises(ZSError, match=r"the.lock: cannot read: Is a directory"):
        Lock(open_sink(str(tmp_path)), "the.lock").acquire()
