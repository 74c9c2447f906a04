"""The archive test vectors (testdata/archive/v<N>/): a committed archive and its records decoded as
documented JSON. Our reader must decode each archive to its JSON; an independent decoder written
here from docs/archive-format.rst alone (over docs/unzs.py, no zsarchive code) must too; our
record encoder must rebuild every record's bytes; and today's exporter must write the current
format's vector byte for byte."""

from __future__ import annotations

import importlib.util
import json
import struct
from pathlib import Path

import pytest

from conftest import ROOT, TESTDATA
from zsarchive.archive import export
from zsarchive.archive.format import schema as S
from zsarchive.zs.reader import ZS

VECTORS = sorted((TESTDATA / "archive").glob("v*/records.json"))


def _vector(path: Path) -> dict:
    return json.loads(path.read_text())


def _json_element(item):
    if isinstance(item, bytes):
        return {"bytes": item.hex()}
    if isinstance(item, tuple):
        return [_json_element(i) for i in item]
    return item


def _python_element(item):
    if isinstance(item, dict):
        return bytes.fromhex(item["bytes"])
    if isinstance(item, list):
        return tuple(_python_element(i) for i in item)
    return item


# -- an independent reading of docs/archive-format.rst ("Records", "Tuple encoding") --

def _elements(buf: bytes, pos: int) -> tuple[list, int]:
    """Elements up to an END byte (consumed) or the end of ``buf``."""
    out = []
    while pos < len(buf):
        code = buf[pos]
        pos += 1
        if code == 0x00:
            return out, pos
        if code in (0x01, 0x02):  # escaped string, 0x00 0xFF is a 0x00, a lone 0x00 ends it
            raw = bytearray()
            while not (buf[pos] == 0 and (pos + 1 >= len(buf) or buf[pos + 1] != 0xFF)):
                raw.append(buf[pos])
                pos += 2 if buf[pos] == 0 else 1
            pos += 1
            out.append({"bytes": raw.hex()} if code == 0x01 else raw.decode("utf-8"))
        elif code == 0x03:
            out.append(None)
        elif code == 0x04:  # uleb128 length, raw bytes
            n = shift = 0
            while True:
                byte = buf[pos]
                pos += 1
                n |= (byte & 0x7F) << shift
                shift += 7
                if byte < 0x80:
                    break
            out.append({"bytes": buf[pos:pos + n].hex()})
            pos += n
        elif code == 0x05:
            sub, pos = _elements(buf, pos)
            out.append(sub)
        elif code in (0x26, 0x27):
            out.append(code == 0x27)
        elif 0x0B <= code <= 0x1D:
            if code in (0x0B, 0x1D):
                n = buf[pos] if code == 0x1D else 255 - buf[pos]
                pos += 1
                negative = code == 0x0B
            else:
                n, negative = abs(code - 0x14), code < 0x14
            body = int.from_bytes(buf[pos:pos + n], "big")
            out.append(body - (2 ** (8 * n) - 1) if negative else body)
            pos += n
        else:
            raise AssertionError(f"type code 0x{code:02x} is not in the format document")
    return out, pos


def _documented_record(rec: bytes) -> dict:
    key, pos = _elements(rec, 1)
    value, end = _elements(rec, pos + 1)
    assert end == len(rec)
    return {"family": rec[:1].decode("ascii"), "hex": rec.hex(), "key": key, "version": rec[pos],
            "value": value}


def _unzs_records(path: Path) -> tuple[dict, list[bytes]]:
    """The ZS metadata and records of ``path`` read by docs/unzs.py, the standard-library decoder."""
    spec = importlib.util.spec_from_file_location("unzs", ROOT / "docs" / "unzs.py")
    unzs = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(unzs)
    with open(path, "rb") as f:
        f.seek(8)
        (header_length,) = struct.unpack("<Q", f.read(8))
        header = f.read(header_length)
        root_offset, root_length, _, _, codec, meta_length = struct.unpack_from("<QQQ32s16sQ", header)
        metadata = json.loads(header[80:80 + meta_length])
        size = f.seek(0, 2)
        decompress = unzs.CODECS[codec.rstrip(b"\0").decode()]
        records = [r for _, block in unzs.data_blocks(f, size, decompress, root_offset, root_length,
                                                      range(1, 64), set()) for r in block]
    return metadata, records


@pytest.mark.parametrize("vector", VECTORS, ids=lambda p: p.parent.name)
def test_our_reader_decodes_the_archive_to_its_json(vector):
    expected = _vector(vector)
    with ZS(str(vector.parent / "archive.zs")) as z:
        assert z.metadata == expected["metadata"]
        got = []
        for rec in z:
            family, key, value = S.split(rec)
            got.append({"family": family.decode(), "hex": rec.hex(), "key": _json_element(key),
                        "version": S.record_version(rec), "value": _json_element(value)})
    assert got == expected["records"]


@pytest.mark.parametrize("vector", VECTORS, ids=lambda p: p.parent.name)
def test_the_format_document_alone_derives_the_same_json(vector):
    expected = _vector(vector)
    metadata, records = _unzs_records(vector.parent / "archive.zs")
    assert metadata == expected["metadata"]
    assert [_documented_record(r) for r in records] == expected["records"]
    header = [r for r in expected["records"] if r["family"] == "Z"]
    assert len(header) == 1 and header[0]["value"][0] == metadata["icechunk-archive"]["format_version"]
    assert header[0]["value"][2] == expected["export_time"]


@pytest.mark.parametrize("vector", VECTORS, ids=lambda p: p.parent.name)
def test_our_encoder_rebuilds_every_record(vector):
    for rec in _vector(vector)["records"]:
        family = rec["family"].encode()
        built = S.record(family, _python_element(rec["key"]), _python_element(rec["value"]), rec["version"])
        assert built.hex() == rec["hex"], rec


def test_the_exporter_writes_the_current_vector(tmp_path):
    current = TESTDATA / "archive" / f"v{S.FULL_FORMAT}"
    expected = _vector(current / "records.json")
    export(ROOT / expected["source"], tmp_path / "a.zs", export_time=expected["export_time"],
           include_chunks=expected.get("include_chunks", False))
    assert (tmp_path / "a.zs").read_bytes() == (current / "archive.zs").read_bytes()
