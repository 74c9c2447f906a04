"""Archives that claim more than a machine holds, and writers stopped halfway. ``zs restore`` and ``zs checkout``
count what they will write before writing (refusing more than --max-bytes, or than a local file system's
free space or inodes: measured on a tmpfs of fixed size), write embedded chunk files as they read them
(memory measured under an address-space ceiling does not follow a file's length), and every writer stopped
by SIGTERM leaves nothing behind, as for Ctrl-C. Each archive is a genuine export edited with zsarchive's
own writer; each command a fresh process."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator

import pytest

from toolkit.cli import one_line_error, run_hostile, terminated, zs_peak
from toolkit.crafted import Record, craft, find, target_is_empty
from toolkit.places import TESTDATA
from zsarchive.archive.format import schema as S
from zsarchive.archive.format.pieces import PIECE_SIZE

VECTOR = TESTDATA / "archive" / "v6" / "archive.zs"
MAIN = "FMYJC6EXHFEJEZFQ9JA0"
BIG = "ZK276DWXJJFYC"  # /data/big, its refs made at CREATED
CREATED = "1Z67CH011QJY4APYHNB0"
CHUNK = "B279VN9PA3DQ16R6847G"  # an embedded chunk file of 8192 bytes
MiB = 1 << 20
ZEROS = 512 * MiB  # a chunk file larger than the memory a restore or checkout may take for it
ZERO_ID = "Z" * 19 + "0"
AMPLIFIED = 65536  # refs of one array at main, each naming the 8192 bytes of CHUNK: 512 MiB to write


@contextlib.contextmanager
def tmpfs(where: Path, size: str, inodes: int | None = None) -> Iterator[Path]:
    """A file system of fixed size (and inode count) mounted at ``where`` for the block."""
    where.mkdir()
    options = f"size={size}" + (f",nr_inodes={inodes}" if inodes else "")
    subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(where)], check=True, capture_output=True)
    try:
        yield where
    finally:
        subprocess.run(["umount", str(where)], check=True, capture_output=True)


def _zero_pieces() -> Iterator[bytes]:
    piece = bytes(PIECE_SIZE)
    for start in range(0, ZEROS, PIECE_SIZE):
        yield S.record(S.CHUNK_DATA, (ZERO_ID, start), (piece,), version=2)


def _set_ref(records: list[Record], coords: tuple, value: tuple) -> None:
    i = find(records, S.CHUNK_REF, lambda k, v: k == (BIG, coords, CREATED))
    f, k, _, version = records[i]
    records[i] = (f, k, value, version)


@pytest.fixture(scope="module")
def zeros(tmp_path_factory) -> Path:
    """The vector whose chunk (0, 1) of /data/big at main is a chunk file of ZEROS zero bytes, embedded in
    compressed pieces (made one at a time): a valid archive of a few hundred KB."""
    path = craft(
        VECTOR,
        tmp_path_factory.mktemp("zeros") / "zeros.zs",
        lambda records: _set_ref(records, (0, 1), (S.NATIVE, ZERO_ID, 0, ZEROS)),
        codec="zstd",
        stored=False,
        streamed=_zero_pieces(),
        more={S.CHUNK_DATA: ZEROS // PIECE_SIZE},
    )
    assert path.stat().st_size < 2 * MiB
    return path


@pytest.fixture(scope="module")
def amplified(tmp_path_factory) -> Path:
    """The vector with an array /amp at main of AMPLIFIED chunks, each the whole of one 8192-byte embedded
    chunk file: a valid archive of a few hundred KB that checks out to 512 MiB."""
    node = "AMP" + "0" * 10
    zarr_json = (
        b'{"zarr_format":3,"node_type":"array","shape":[%d],"data_type":"uint8",'
        b'"chunk_grid":{"name":"regular","configuration":{"chunk_shape":[8192]}},"fill_value":0,'
        b'"chunk_key_encoding":{"name":"default","configuration":{"separator":"/"}},'
        b'"codecs":[{"name":"bytes"}]}' % (AMPLIFIED * 8192)
    )

    def add(records: list[Record]) -> None:
        records.append(
            (
                S.NODE,
                (MAIN, ("amp",)),
                (node, S.ARRAY, zarr_json, ((AMPLIFIED * 8192, None, AMPLIFIED),), None, (), MAIN),
                1,
            )
        )
        records.extend((S.CHUNK_REF, (node, (i,), MAIN), (S.NATIVE, CHUNK, 0, 8192), 2) for i in range(AMPLIFIED))

    path = craft(VECTOR, tmp_path_factory.mktemp("amplified") / "amplified.zs", add, codec="zstd")
    assert path.stat().st_size < MiB
    return path


def test_the_crafted_archives_are_valid(zeros, amplified):
    """What the archives claim is allowed: the refusals below are about the machine, not the records."""
    for archive in (zeros, amplified):
        done = run_hostile("validate", str(archive), timeout=120)
        assert done.returncode == 0 and done.stdout.strip() == "looks good!", done.stderr


def test_a_checkout_larger_than_the_limit_or_the_disk_is_refused_before_writing(tmp_path, amplified):
    """512 MiB from a small archive: refused up front past --max-bytes (any target), past a local file
    system's free space, and past its free inodes, naming the target given (not its hidden temporary), as
    soon as the count passes the room: "at least" so many files, the walk over the rest of the claim not
    waited for."""
    command = ["checkout", str(amplified), "main"]
    started = time.monotonic()
    one_line_error(
        run_hostile(*command, str(tmp_path / "out"), "--group", "/amp", "--max-bytes", "100M"),
        f"{tmp_path / 'out'}: at least 16,384 files, 134,2",
        "more than the limit of 104,857,600 bytes (--max-bytes)",
        "nothing written",
    )
    assert time.monotonic() - started < 10
    assert target_is_empty(tmp_path / "out")
    with tmpfs(tmp_path / "small", "64m") as small:
        one_line_error(
            run_hostile(*command, str(small / "out"), "--group", "/amp"),
            f"{small / 'out'}: at least ",
            " files",
            "but its file system has",
            "bytes free; nothing written",
        )
        assert not any(small.iterdir())
    with tmpfs(tmp_path / "few", "2g", inodes=1000) as few:
        one_line_error(
            run_hostile(*command, str(few / "out.zip"), "--group", "/amp"),
            f"{few / 'out.zip'}: at least 4,096 files",
            "but its file system has room for",
        )
        one_line_error(
            run_hostile(*command, str(few / "out"), "--group", "/amp"),
            f"{few / 'out'}: at least 4,096 files",
            "but its file system has room for",
        )
        assert not any(few.iterdir())


def test_a_restore_larger_than_the_disk_is_refused_before_writing(tmp_path, zeros):
    with tmpfs(tmp_path / "small", "256m") as small:
        one_line_error(
            run_hostile("restore", str(zeros), str(small / "restored")),
            str(small / "restored"),
            "bytes free; nothing written",
        )
        one_line_error(
            run_hostile("restore", str(zeros), str(tmp_path / "r"), "--max-bytes", "511M"),
            "more than the limit of 535,822,336 bytes",
        )
        assert not any(small.iterdir()) and target_is_empty(tmp_path / "r")


def test_an_object_store_target_is_held_to_max_bytes(amplified, zeros):
    """--max-bytes holds for an object store as for a local target (moto's S3 server): the checkout of 512
    MiB and the restore of a 512 MiB chunk file are refused before any object is put."""
    from toolkit.servers import moto_s3

    with moto_s3({"bounded": {}}) as client:
        one_line_error(
            run_hostile(
                "checkout", str(amplified), "main", "s3://bounded/out", "--group", "/amp", "--max-bytes", "100M"
            ),
            "s3://bounded/out: at least 16,384 files",
            "more than the limit of 104,857,600 bytes",
        )
        one_line_error(
            run_hostile("restore", str(zeros), "s3://bounded/restored", "--max-bytes", "511M"),
            "s3://bounded/restored",
            "more than the limit of 535,822,336 bytes",
        )
        assert client.list_objects_v2(Bucket="bounded").get("KeyCount") == 0


@pytest.mark.parametrize("command", ["restore", "checkout", "checkout.zip"])
def test_memory_does_not_follow_a_chunk_files_length(tmp_path, zeros, command):
    """A 512 MiB chunk file is written as it is read: the process, under an address space 384 MiB larger
    than the same command needs for the genuine archive, grows by far less than the file (the bound: 256
    MiB), and writes every byte."""

    def args(archive: Path, out: Path) -> list[str]:
        if command == "restore":
            return ["restore", str(archive), str(out)]
        return ["checkout", str(archive), "main", str(out), "--group", "/data/big"]

    suffix = ".zip" if command.endswith(".zip") else ""
    env = {"MALLOC_ARENA_MAX": "2"}
    done, base_rss, base_vm = zs_peak(tmp_path, *args(VECTOR, tmp_path / f"small{suffix}"), env=env)
    assert done.returncode == 0, done.stderr
    out = tmp_path / f"big{suffix}"
    done, rss, _ = zs_peak(tmp_path, *args(zeros, out), env=env, memory=base_vm + 384 * MiB)
    assert done.returncode == 0, done.stderr[-2000:]
    assert rss - base_rss < 256 * MiB, (rss - base_rss) // MiB
    if command == "restore":
        written = (out / "chunks" / ZERO_ID).stat().st_size
    elif suffix:
        import zipfile

        written = zipfile.ZipFile(out).getinfo("c/0/1").file_size
    else:
        written = (out / "c" / "0" / "1").stat().st_size
    assert written == ZEROS


@pytest.fixture(scope="module")
def zeros_repo(tmp_path_factory, zeros) -> Path:
    """The repository the zeros archive restores to (a 512 MiB chunk file): what an export reads for a while."""
    repo = tmp_path_factory.mktemp("zeros-repo") / "repo"
    done = run_hostile("restore", str(zeros), str(repo), timeout=300)
    assert done.returncode == 0, done.stderr
    return repo


def _writers(zeros: Path, repo: Path) -> dict[str, tuple[list[str], str | None]]:
    """Each writer: its arguments (``{out}`` the target) and what it reads from stdin (None: nothing)."""
    records = "".join(f"record {i:08d}\n" for i in range(1000))
    return {
        "restore": (["restore", str(zeros), "{out}"], None),
        "checkout": (["checkout", str(zeros), "main", "{out}", "--group", "/data/big"], None),
        "checkout.zip": (["checkout", str(zeros), "main", "{out}.zip", "--group", "/data/big"], None),
        "export": (["export", str(repo), "{out}.zs", "--include-chunks", "--no-progress"], None),
        "consolidate": (["consolidate", str(zeros), "{out}.zs"], None),
        "make": (["make", "{}", "-", "{out}.zs"], records),
    }


def _begun(out: Path) -> bool:
    """Whether a writer has begun writing ``out``: a hidden temporary beside it, or files below it."""
    beside = any(p.name.startswith(f".{out.name}") for p in out.parent.iterdir())
    return beside or (out.is_dir() and any(p.is_file() for p in out.rglob("*")))


@pytest.mark.parametrize("writer", ["restore", "checkout", "checkout.zip", "export", "consolidate", "make"])
def test_sigterm_mid_write_leaves_nothing_behind(tmp_path, zeros, zeros_repo, writer):
    """SIGTERM to a real process halfway through its write: it says so in one line (exit status 143) and
    no temporary, partial or written file remains (a stopped restore leaves its target empty)."""
    args, stdin = _writers(zeros, zeros_repo)[writer]
    out = tmp_path / "out"
    argv = [a.replace("{out}", str(out)) for a in args]
    target = Path(next(a for a in argv if a.startswith(str(out))))
    proc = subprocess.Popen(
        [sys.executable, "-m", "zsarchive", *argv],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    if stdin is not None:  # half the input, the rest held back: the file is begun, never finished
        proc.stdin.write(stdin)
        proc.stdin.flush()
    terminated(proc, lambda: _begun(target), writer)
    assert target_is_empty(target), sorted(os.listdir(tmp_path))
