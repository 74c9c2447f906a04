"""Write the archive test vectors: ``testdata/archive/v<N>/archive.zs`` exported from the committed
icechunk fixture repository, and ``records.json``, every record of it decoded as
docs/archive-format.rst ("Test vectors") describes, so that another implementation can test itself.
The current format's vector keeps the bytes of the fixture's virtual chunks (``include_virtual``, under
the fixture's virtual prefix, which is linked to ``testdata/icechunk/virtual-data/`` as the oracle links it).

    PYTHONPATH=. python scripts/make_archive_vectors.py
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from zsarchive.archive import export  # noqa: E402
from zsarchive.archive.format import schema as S  # noqa: E402
from zsarchive.zs.reader import ZS  # noqa: E402

SOURCE = "testdata/icechunk/v2"
EXPORT_TIME = 1_000_000  # 1970-01-01T00:00:01Z: fixed, so the vector never changes unless the format does
INCLUDE_CHUNKS = True  # format 3 is written by archives that embed chunk bytes: the vector shows their pieces
INCLUDE_VIRTUAL = True  # format 7 keeps virtual chunk bytes: the vector shows their pieces and refusals


def element(item):
    """One decoded tuple element as JSON: byte strings and blobs as ``{"bytes": hex}``, tuples as arrays."""
    if isinstance(item, bytes):
        return {"bytes": item.hex()}
    if isinstance(item, tuple):
        return [element(i) for i in item]
    return item


def decoded(path: Path) -> dict:
    """Every record of the archive at ``path`` as the vector's JSON describes it."""
    with ZS(str(path)) as z:
        records = []
        for rec in z:
            family, key, value = S.split(rec)
            records.append(
                {
                    "hex": rec.hex(),
                    "family": family.decode("ascii"),
                    "key": element(key),
                    "version": S.record_version(rec),
                    "value": element(value),
                }
            )
        return {
            "source": SOURCE,
            "export_time": EXPORT_TIME,
            "include_chunks": INCLUDE_CHUNKS,
            "include_virtual": INCLUDE_VIRTUAL,
            "authorize": [virtual_prefix()],
            "metadata": z.metadata,
            "records": records,
        }


def virtual_prefix() -> str:
    """The fixture's virtual prefix, linked to the committed virtual data of this clone."""
    sys.path.insert(0, str(ROOT / "scripts"))
    from icechunk_oracle import link_virtual_prefix

    fixtures = json.loads((ROOT / "testdata" / "icechunk" / "fixtures.json").read_text())
    prefix = fixtures["virtual"]["prefix"]
    link_virtual_prefix(prefix, ROOT / "testdata" / "icechunk" / fixtures["virtual"]["directory"])
    return prefix


def main() -> None:
    out = ROOT / "testdata" / "archive" / f"v{S.FORMAT_VERSION}"
    out.mkdir(parents=True, exist_ok=True)
    (out / "archive.zs").unlink(missing_ok=True)
    export(
        ROOT / SOURCE,
        out / "archive.zs",
        export_time=EXPORT_TIME,
        codec="deflate",
        include_chunks=INCLUDE_CHUNKS,
        include_virtual=INCLUDE_VIRTUAL,
        authorize=[virtual_prefix()],
    )
    vector = decoded(out / "archive.zs")
    records = vector.pop("records")
    line = lambda value: json.dumps(value, ensure_ascii=False, sort_keys=True)  # noqa: E731
    head = line(vector)[:-1]  # one record per line: diffs of a changed vector stay readable
    (out / "records.json").write_text(head + ', "records": [\n' + ",\n".join(map(line, records)) + "\n]}\n")


if __name__ == "__main__":
    main()
