"""An archive decoder written from docs/archive-format.rst ("Records", "Tuple encoding") alone, over
docs/unzs.py (the standard-library ZS decoder): no zsarchive code, so it can hold our reader to the
document."""

from __future__ import annotations

import json
import struct
from pathlib import Path
from toolkit.places import ROOT, load_module


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
            out.append({"bytes": buf[pos : pos + n].hex()})
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
            body = int.from_bytes(buf[pos : pos + n], "big")
            out.append(body - (2 ** (8 * n) - 1) if negative else body)
            pos += n
        else:
            raise AssertionError(f"type code 0x{code:02x} is not in the format document")
    return out, pos


def documented_record(rec: bytes) -> dict:
    """One record as the vector JSON writes it: family, hex, key, version, value."""
    key, pos = _elements(rec, 1)
    value, end = _elements(rec, pos + 1)
    assert end == len(rec)
    return {"family": rec[:1].decode("ascii"), "hex": rec.hex(), "key": key, "version": rec[pos], "value": value}


def unzs_records(path: Path) -> tuple[dict, list[bytes]]:
    """The ZS metadata and records of ``path`` read by docs/unzs.py, the standard-library decoder."""
    unzs = load_module(ROOT / "docs" / "unzs.py")
    with open(path, "rb") as f:
        f.seek(8)
        (header_length,) = struct.unpack("<Q", f.read(8))
        header = f.read(header_length)
        root_offset, root_length, _, _, codec, meta_length = struct.unpack_from("<QQQ32s16sQ", header)
        metadata = json.loads(header[80 : 80 + meta_length])
        size = f.seek(0, 2)
        decompress = unzs.CODECS[codec.rstrip(b"\0").decode()]
        records = [
            r
            for _, block in unzs.data_blocks(f, size, decompress, root_offset, root_length, range(1, 64), set())
            for r in block
        ]
    return metadata, records


def documented_records(path: Path) -> list[dict]:
    """Every record of the archive at ``path``, decoded by the document alone."""
    return [documented_record(r) for r in unzs_records(path)[1]]


def _frozen(element):
    """A decoded element as something hashable (arrays as tuples, byte strings as their hex)."""
    if isinstance(element, list):
        return tuple(_frozen(e) for e in element)
    if isinstance(element, dict):
        return ("bytes", element["bytes"])
    return element


def documented_history(records: list[dict], format_version: int) -> set[tuple]:
    """Every ``(node_id, coords, flushed_at, snapshot_id)`` of the per-chunk history, as family ``H``
    says: its record keys up to format 3; from format 5 the ``C`` records (node_id, coords, snapshot_id)
    with their snapshot's ``flushed_at``, less the ``H`` exceptions of value false, plus those of value
    true."""
    history = {_frozen(r["key"]): r["value"] for r in records if r["family"] == "H"}
    if format_version < 5:
        return set(history)
    flushed = {r["key"][0]: r["value"][1] for r in records if r["family"] == "S"}
    out = {k for k, value in history.items() if value == [True]}
    for r in records:
        if r["family"] == "C":
            node_id, coords, sid = _frozen(r["key"])
            key = (node_id, coords, flushed[sid], sid)
            if history.get(key) != [False]:
                out.add(key)
    return out


def documented_file_forms(records: list[dict]) -> dict[str, tuple]:
    """Family ``Y`` (format 6) as the document says: metadata file path -> (implementation name,
    compression algorithm or None, location dictionary bytes or None)."""
    out = {}
    for r in records:
        if r["family"] == "Y":
            (path,), (implementation, algorithm, dictionary) = r["key"], r["value"][:3]
            out[path] = (implementation, algorithm, None if dictionary is None else bytes.fromhex(dictionary["bytes"]))
    return out


def documented_repo_file(records: list[dict]) -> dict:
    """``G repo_file`` (format 6, spec V2): the repo file's implementation name and ops-log counts."""
    return next(json.loads(r["value"][0]) for r in records if r["family"] == "G" and r["key"] == ["repo_file"])


def documented_ops_log_files(records: list[dict]) -> list[tuple[str, int]]:
    """The ops log's repo info files as ``G repo_file`` and the ``O`` entries say (format 6): each
    file's path (``repo``, then ``overwritten/`` + the backup path of its first, newest, entry) and how
    many entries it holds."""
    counts = documented_repo_file(records)["ops_log_files"]
    newest_first = [r["value"][1] for r in reversed([r for r in records if r["family"] == "O"])]
    out, at = [], 0
    for i, n in enumerate(counts):
        out.append(("repo" if i == 0 else f"overwritten/{newest_first[at]}", n))
        at += n
    assert at == len(newest_first)
    return out


def documented_virtual_bytes(records: list[dict]) -> dict[tuple, bytes]:
    """Family ``E`` (format 7) as the document says: ``(location, offset, length, etag, last_modified)``
    of each kept virtual range -> its bytes: its pieces' bytes joined (they must start at the range's
    offset and follow each other to its end), or those of the checksum its alias names."""
    pieces: dict[tuple, list] = {}
    aliases: dict[tuple, tuple] = {}
    for r in records:
        if r["family"] != "E":
            continue
        key = tuple(r["key"])
        if len(key) == 6:
            pieces.setdefault(key[:5], []).append((key[5], bytes.fromhex(r["value"][0]["bytes"])))
        else:
            assert len(key) == 5 and len(r["value"]) >= 2
            aliases[key] = (*key[:3], *r["value"][:2])
    out = {}
    for key, parts in pieces.items():
        at = key[1]
        for start, data in parts:
            assert start == at, (key, start, at)
            at += len(data)
        assert at == key[1] + key[2], key
        out[key] = b"".join(data for _, data in parts)
    for key, target in aliases.items():
        assert key not in pieces and target in out, key
        out[key] = out[target]
    return out
