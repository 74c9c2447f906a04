"""Files written by the reference ``zs`` 0.10.0 read identically in zsarchive: info, dump and search
are compared with the reference's own CLI and Python API on the same files."""

from __future__ import annotations

import json
import random
import shutil
import subprocess

import pytest
from click.testing import CliRunner

from toolkit.places import TESTDATA
from toolkit.cli import run_zs
from zsarchive import ZS
from zsarchive.cli import main
from zsarchive.zs.format import uleb128

INTEROP_NAMES = ["letters-deflate.zs", "letters-lzma.zs", "letters-none.zs", "tiny-4grams.zs"]

# The reference's own Python API, run in its interpreter on one file: a JSON job on stdin (hex
# byte strings), results out. A fresh ZS per call: the reference's file transport dup()s one
# descriptor for stream reads, so a long-lived object's index reads sometimes come back short.
REFERENCE_JOB = r"""
import binascii, io, json, sys
from zs import ZS
job = json.load(sys.stdin)
unhex = lambda kw: dict((k, None if v is None else binascii.unhexlify(v)) for k, v in kw.items())
out = {"search": [], "dump": []}
for q in job["search"]:
    with ZS(job["path"], parallelism=0) as z:
        out["search"].append([binascii.hexlify(r).decode("ascii") for r in z.search(**unhex(q))])
for d in job["dump"]:
    buf = io.BytesIO()
    kw = unhex(d["select"])
    with ZS(job["path"], parallelism=0) as z:
        z.dump(buf, terminator=binascii.unhexlify(d["terminator"]), length_prefixed=d["length_prefixed"], **kw)
    out["dump"].append(binascii.hexlify(buf.getvalue()).decode("ascii"))
with ZS(job["path"], parallelism=0) as z:
    out["metadata_json"] = json.dumps(z.metadata, indent=4) + "\n"
json.dump(out, sys.stdout)
"""


def _words(rng: random.Random, n: int) -> list[bytes]:
    alphabet = "abcdefgh"
    words = ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 9))) for _ in range(n)]
    words += rng.sample(words, n // 10)  # duplicates, some spanning block boundaries
    return sorted(w.encode() for w in words)


def _binary(rng: random.Random, n: int) -> list[bytes]:
    pool = b"\x00\n\r\x01\x7f\x80\xfe\xffab"
    recs = [bytes(rng.choice(pool) for _ in range(rng.randint(0, 12))) for _ in range(n)]
    recs += [b"", b"", b"\n", b"\x00"] + recs[: n // 20]
    recs += [bytes(rng.randrange(256) for _ in range(rng.randint(100, 400))) for _ in range(30)]
    return sorted(recs)


def _huge(rng: random.Random) -> list[bytes]:
    # Records far larger than a block (multi-byte uleb128 lengths), compressible to keep it quick.
    return sorted(
        [b"h" + bytes([65 + i]) * rng.randint(130_000, 600_000) for i in range(4)] + [b"a", b"z", b"m" * 70_000]
    )


def _length_prefixed(records: list[bytes]) -> bytes:
    return b"".join(uleb128.encode(len(r)) + r for r in records)


# name -> (records kind, zs make options)
SPECS = {
    "words-none-bf2": ("words", ["--codec", "none", "--approx-block-size", "300", "--branching-factor", "2"]),
    "words-deflate-bf3": ("words", ["--codec", "deflate", "--approx-block-size", "500", "--branching-factor", "3"]),
    "words-lzma-small": ("words", ["--codec", "lzma", "--approx-block-size", "2000"]),
    "words-default": ("words", []),
    "binary-deflate-bf3": ("binary", ["--codec", "deflate", "--approx-block-size", "400", "--branching-factor", "3"]),
    "binary-lzma": ("binary", ["--codec", "lzma", "--approx-block-size", "1500", "-z", "1"]),
    "huge-none": ("huge", ["--codec", "none", "--approx-block-size", "100000"]),
    "huge-deflate": ("huge", ["--codec", "deflate", "--approx-block-size", "100000", "--branching-factor", "2"]),
}
METADATA = {
    "title": "interop \u00fcn\u00efcode \u2603",
    "nested": {"list": [1, 2.5, None, True], "s": "x\"y"},
    "empty": {},
}


class RefFile:
    """A reference-written ZS file with the records that went into it."""

    def __init__(self, name: str, path, records: list[bytes]) -> None:
        self.name, self.path, self.records = name, path, records

    def __repr__(self) -> str:
        return self.name


@pytest.fixture(scope="session")
def ref_files(tmp_path_factory, reference_zs) -> dict[str, RefFile]:
    """Every SPECS file, made once per session by the reference ``zs make``."""
    rng = random.Random(20141)
    records = {"words": _words(rng, 3000), "binary": _binary(rng, 1500), "huge": _huge(rng)}
    tmp = tmp_path_factory.mktemp("refzs")
    for kind, recs in records.items():
        (tmp / f"{kind}.in").write_bytes(_length_prefixed(recs))
    files = {}
    for name, (kind, options) in SPECS.items():
        out = tmp / f"{name}.zs"
        meta = dict(METADATA, name=name)
        subprocess.run(
            [
                str(reference_zs),
                "make",
                "--no-spinner",
                "--length-prefixed=uleb128",
                *options,
                json.dumps(meta),
                str(tmp / f"{kind}.in"),
                str(out),
            ],
            check=True,
            capture_output=True,
        )
        files[name] = RefFile(name, out, records[kind])
    for name in INTEROP_NAMES:
        shutil.copy(TESTDATA / "interop" / name, tmp / name)
        files[name] = RefFile(name, tmp / name, None)
    return files


ALL_NAMES = list(SPECS) + INTEROP_NAMES


@pytest.fixture(params=ALL_NAMES)
def ref_file(request, ref_files) -> RefFile:
    return ref_files[request.param]


def ours(*args: str) -> bytes:
    result = CliRunner().invoke(main, list(args), catch_exceptions=False)
    assert result.exit_code == 0, result.stderr
    return result.stdout_bytes


def reference(reference_zs, *args: str) -> bytes:
    return subprocess.run([str(reference_zs), *args], check=True, capture_output=True).stdout


# Framings as (terminator, length_prefixed) for ZS.dump and as zs dump options.
FRAMINGS = [(b"\n", None), (b"\n", "uleb128"), (b"\n", "u64le"), (b"\x00--\n", None)]
FRAMING_OPTIONS = [[], ["--length-prefixed=uleb128"], ["--length-prefixed=u64le"], ["--terminator", r"\x00--\n"]]
SELECTIONS = [
    {},
    {"prefix": b"ab"},
    {"start": b"b", "stop": b"de"},
    {"start": b"\x00\n"},
    {"stop": b"\x80"},
    {"prefix": b"\x00"},
    {"start": b"hB", "stop": b"hE"},
    {"start": b"c", "prefix": b"cd"},
]


def _queries(rng: random.Random, records: list[bytes], n: int) -> list[dict]:
    def probe() -> bytes:
        if rng.random() < 0.8 and records:
            r = rng.choice(records)
            return r[: rng.randint(0, len(r))] if rng.random() < 0.7 else r
        return bytes(rng.randrange(256) for _ in range(rng.randint(0, 3)))

    queries = [{}, {"prefix": b""}]
    while len(queries) < n:
        q = {}
        for arg in ("start", "stop", "prefix"):
            if rng.random() < 0.5:
                q[arg] = probe()
        if q.get("prefix", b"").endswith(b"\xff"):
            continue  # the reference cannot compute the end of such a prefix (it raises)
        queries.append(q)
    return queries


class RefAnswers:
    """What the reference's Python API answers for one file: searches, dumps, metadata JSON."""

    def __init__(self, queries, dumps, raw) -> None:
        self.queries = queries
        self.search = [[bytes.fromhex(h) for h in hits] for hits in raw["search"]]
        self.dumps = dict(zip(dumps, (bytes.fromhex(h) for h in raw["dump"])))
        self.metadata_json = raw["metadata_json"].encode()


@pytest.fixture(scope="session")
def ref_answers(ref_files, reference_python):
    """Reference answers per file name, computed on first use (one reference process per file)."""
    cache: dict[str, RefAnswers] = {}

    def get(name: str) -> RefAnswers:
        if name not in cache:
            ref = ref_files[name]
            with ZS(ref.path) as z:
                queries = _queries(random.Random(name), list(z), 15 if name.startswith("huge") else 60)
            dumps = [
                (f, i)
                for f in range(len(FRAMINGS))
                for i in range(len(SELECTIONS))
                if i == 0 or FRAMINGS[f][1] == "u64le"
            ]
            job = {
                "path": str(ref.path),
                "search": [{k: v.hex() for k, v in q.items()} for q in queries],
                "dump": [
                    {
                        "terminator": FRAMINGS[f][0].hex(),
                        "length_prefixed": FRAMINGS[f][1],
                        "select": {k: v.hex() for k, v in SELECTIONS[i].items()},
                    }
                    for f, i in dumps
                ],
            }
            proc = subprocess.run(
                [str(reference_python), "-c", REFERENCE_JOB],
                input=json.dumps(job).encode(),
                check=True,
                capture_output=True,
            )
            cache[name] = RefAnswers(queries, dumps, json.loads(proc.stdout))
        return cache[name]

    return get


def test_info_same_json_as_reference_cli(ref_file, reference_zs):
    assert ours("info", str(ref_file.path)) == reference(reference_zs, "info", str(ref_file.path))


def test_info_metadata_only_same_as_reference(ref_file, ref_answers):
    assert ours("info", "-m", str(ref_file.path)) == ref_answers(ref_file.name).metadata_json


@pytest.mark.parametrize("framing", range(len(FRAMINGS)))
def test_dump_same_bytes_as_reference(ref_file, ref_answers, framing):
    expected = ref_answers(ref_file.name).dumps[framing, 0]
    path = str(ref_file.path)
    assert ours("dump", *FRAMING_OPTIONS[framing], path) == expected
    assert ours("dump", "-j0", *FRAMING_OPTIONS[framing], path) == expected


@pytest.mark.parametrize("selection", range(1, len(SELECTIONS)))
def test_dump_selection_same_as_reference(ref_file, ref_answers, selection):
    expected = ref_answers(ref_file.name).dumps[2, selection]
    options = [
        f"--{k}={v.decode('latin-1').encode('unicode_escape').decode()}" for k, v in SELECTIONS[selection].items()
    ]
    assert ours("dump", *options, "--length-prefixed=u64le", str(ref_file.path)) == expected


def test_dump_cli_same_as_reference_cli(ref_files, reference_zs):
    for name in ("words-deflate-bf3", "binary-lzma"):
        args = ["dump", "--start", r"b\x00", "--stop", "g", "--length-prefixed=u64le", str(ref_files[name].path)]
        assert ours(*args) == reference(reference_zs, *args)


def test_search_same_as_reference_python(ref_file, ref_answers):
    answers = ref_answers(ref_file.name)
    with ZS(ref_file.path) as z:
        for q, expected in zip(answers.queries, answers.search):
            assert list(z.search(**q)) == expected, q
    with ZS(ref_file.path, parallelism=0, data_block_cache=0) as z:
        for q, expected in zip(answers.queries, answers.search):
            assert list(z.search(**q)) == expected, q
    assert sum(map(len, answers.search)) > 0


@pytest.mark.parametrize("name", list(SPECS))
def test_records_are_what_went_in(ref_files, name):
    ref_file = ref_files[name]
    with ZS(ref_file.path) as z:
        assert list(z) == ref_file.records
        assert [r for rs in z.block_map(list) for r in rs] == ref_file.records


def test_tiny_4grams_dumps_to_its_text():
    text = (TESTDATA / "interop" / "tiny-4grams.txt").read_bytes()
    assert ours("dump", str(TESTDATA / "interop" / "tiny-4grams.zs")) == text


def test_cli_runs_as_a_program(ref_files):
    path = str(ref_files["words-lzma-small"].path)
    proc = run_zs("dump", "--prefix", "a", path, text=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split(b"\n")[:-1] == [r for r in ref_files["words-lzma-small"].records if r.startswith(b"a")]
