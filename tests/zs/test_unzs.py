"""docs/unzs.py, the emergency decoder: a bare interpreter (no site-packages, no zsarchive) writes
exactly what the reference ``zs dump`` writes, and stops on damage with one line and exit 1."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

import pytest

from toolkit.places import PEERS, ROOT, TESTDATA, load_module
from zsarchive import ZSWriter
from zsarchive.archive import export

UNZS = ROOT / "docs" / "unzs.py"
INTEROP = sorted((TESTDATA / "interop").glob("*.zs"))
# ours, and the oldest Python it claims (the reference's own interpreter)
INTERPRETERS = {"this python": Path(sys.executable), "python 3.6": PEERS / "zs36" / "bin" / "python"}


def unzs(path: Path, python: Path = Path(sys.executable)) -> subprocess.CompletedProcess:
    return subprocess.run([str(python), "-I", "-S", str(UNZS), str(path)], capture_output=True, timeout=300)


def reference_dump(reference_zs: Path, path: Path) -> bytes:
    return subprocess.run([str(reference_zs), "dump", str(path)], check=True, capture_output=True, timeout=300).stdout


def test_it_is_one_short_file_of_the_standard_library():
    lines = UNZS.read_text().splitlines()
    assert len(lines) <= 150
    imports = {line.split()[1] for line in lines if line.startswith("import ") or line.startswith("from ")}
    assert imports <= {"hashlib", "json", "lzma", "struct", "sys", "zlib"}, imports


@pytest.mark.parametrize("python", list(INTERPRETERS))
@pytest.mark.parametrize("path", INTEROP, ids=[p.name for p in INTEROP])
def test_reference_files_decode_as_the_reference_dumps_them(path, python, reference_zs):
    got = unzs(path, INTERPRETERS[python])
    assert got.returncode == 0 and got.stderr == b""
    assert got.stdout == reference_dump(reference_zs, path)


@pytest.mark.parametrize("codec", ["none", "deflate", "lzma"])
def test_an_exported_archive_decodes_as_the_reference_dumps_it(codec, tmp_path, reference_zs):
    archive = tmp_path / "repo.zs"
    export(
        TESTDATA / "icechunk" / "v2",
        archive,
        codec=codec,
        include_chunks=True,
        approx_block_size=4096,
        branching_factor=4,
    )  # several index levels
    got = unzs(archive)
    assert got.returncode == 0 and got.stderr == b""
    expected = reference_dump(reference_zs, archive)
    assert expected.count(b"\n") > 100 and got.stdout == expected


def test_binary_records_and_deep_indexes(tmp_path, reference_zs):
    records = sorted({bytes([i % 7, 10, i % 251]) * (i % 50) + b"\xff" * (i % 3) for i in range(3000)})
    path = tmp_path / "binary.zs"
    with ZSWriter(path, {"k": [1, "x"]}, codec="lzma", branching_factor=2, approx_block_size=300) as w:
        w.add_records(records)
        w.finish()
    got = unzs(path)
    assert got.returncode == 0 and got.stdout == reference_dump(reference_zs, path)


def _damaged(data: bytes, at: int) -> bytes:
    out = bytearray(data)
    out[at] ^= 0x04
    return bytes(out)


def test_damage_is_one_line_naming_file_and_offset(tmp_path):
    data = (TESTDATA / "interop" / "letters-deflate.zs").read_bytes()
    cases = {
        "flipped": (_damaged(data, len(data) - 30), "block CRC mismatch"),
        "header": (_damaged(data, 20), "header CRC mismatch"),
        "truncated": (data[:-1], "offset 32: the header says"),
        "partial": (b"\xabZStoBe\x01" + data[8:], "offset 0: partially written"),
        "not zs": (b"hello\n" * 20, "offset 0: not a ZS file"),
        "empty": (b"", "offset 0: not a ZS file"),
    }
    for name, (bad, message) in cases.items():
        path = tmp_path / f"{name}.zs"
        path.write_bytes(bad)
        got = unzs(path)
        err = got.stderr.decode()
        assert got.returncode == 1, name
        assert err.startswith(f"unzs: {path}: ") and message in err and err.count("\n") == 1, (name, err)


def test_every_truncation_and_bit_flip_of_a_small_file_is_refused(tmp_path):
    """Each damaged copy decodes to an error, never to other records given as right."""
    data = (TESTDATA / "interop" / "letters-none.zs").read_bytes()
    module = load_module(UNZS)
    variants = [data[:n] for n in range(0, len(data), 3)]
    variants += [_damaged(data, i) for i in range(len(data))]
    for bad in variants:
        out = io.BytesIO()
        with pytest.raises(module.Corrupt):
            module.unzs(io.BytesIO(bad), out)
