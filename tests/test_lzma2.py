"""zsarchive's LZMA2 encoder (lzma levels 0e and 1e): liblzma decodes everything it writes.

Each stream is also checked chunk by chunk against the LZMA2 container rules a decoder relies
on: LZMA chunks of at most 2 MiB unpacked and 64 KiB packed, a dictionary reset and the
properties before the first LZMA chunk, a state reset after a stored chunk, one end byte.
Sizes against the reference's files are tests/test_codecs.py's job.
"""

from __future__ import annotations

import lzma
import random
import shutil
import struct
import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from zsarchive import ZS, ZSWriter
from zsarchive.zs.format import codecs

try:
    from zsarchive.zs.format import _lzma2
except ImportError:  # only a machine without a C compiler may lack it; anywhere else it is a failure
    if shutil.which("cc") or shutil.which("gcc"):
        raise
    pytest.skip("NO C COMPILER: zsarchive's LZMA2 encoder was not built; liblzma makes lzma blocks",
                allow_module_level=True)

DICTS = {"0e": 2**18, "1e": 2**20}


def liblzma_decode(stream: bytes) -> bytes:
    d = lzma.LZMADecompressor(format=lzma.FORMAT_RAW, filters=[{"id": lzma.FILTER_LZMA2, "dict_size": 2**20}])
    out = d.decompress(stream)
    assert d.eof and not d.unused_data
    return out


def chunks(stream: bytes) -> list[tuple[int, int, int]]:
    """(control byte, unpacked size, packed size) of every chunk; asserts the container's rules."""
    out, pos, lzma_seen, dict_reset, reset_needed = [], 0, False, False, False
    while True:
        control = stream[pos]
        if control == 0:
            assert pos == len(stream) - 1, "bytes after the end marker"
            return out
        if control in (1, 2):
            size = int.from_bytes(stream[pos + 1:pos + 3], "big") + 1
            assert control == 1 or dict_reset, "first chunk must reset the dictionary"
            dict_reset, reset_needed = True, True
            out.append((control, size, size))
            pos += 3 + size
            continue
        assert control >= 0x80, f"bad control byte {control:#x}"
        reset = (control >> 5) & 3
        usize = ((control & 0x1F) << 16 | int.from_bytes(stream[pos + 1:pos + 3], "big")) + 1
        csize = int.from_bytes(stream[pos + 3:pos + 5], "big") + 1
        assert usize <= 2**21 and csize <= 2**16
        assert reset == 3 or dict_reset, "first chunk must reset the dictionary"
        assert reset >= 2 or lzma_seen, "first LZMA chunk must carry the properties"
        assert reset >= 1 or not reset_needed, "an LZMA chunk after a stored one must reset the state"
        if reset >= 2:
            assert stream[pos + 5] == 93, "properties must be lc=3 lp=0 pb=2"
        dict_reset, lzma_seen, reset_needed = True, True, False
        out.append((control, usize, csize))
        pos += 5 + (reset >= 2) + csize


def roundtrip(data: bytes, level: str = "0e") -> list[tuple[int, int, int]]:
    stream = _lzma2.compress(data, DICTS[level], codecs.LZMA2_NICE_LEN, codecs.LZMA2_DEPTH)
    assert liblzma_decode(stream) == data
    return chunks(stream)


def text(n: int, seed: int = 1) -> bytes:
    rng = random.Random(seed)
    words = [bytes(rng.choices(b"abcdefghij", k=rng.randint(2, 9))) for _ in range(300)]
    out = bytearray()
    while len(out) < n:
        out += b" ".join(rng.choices(words, k=12)) + b"\n"
    return bytes(out[:n])


def periodic_with_sparse_changes() -> bytes:
    rng = random.Random(1)
    out = bytearray(bytes(rng.choices(b"abcdefgh", k=47)) * 12_000)
    for i in range(0, len(out), 53):
        out[i] = rng.randrange(256)
    return bytes(out)


def numbers() -> bytes:
    rng = random.Random(2)
    return b"".join(struct.pack("<di", 20 + rng.gauss(0, 0.5), 1000 + i // 7 + rng.randint(0, 3))
                    for i in range(50_000))


@pytest.mark.parametrize("level", ["0e", "1e"])
@pytest.mark.parametrize("make", [periodic_with_sparse_changes, numbers,
                                  lambda: bytes(random.Random(4).choices(b"ab", k=400_000))],
                         ids=["periodic with sparse changes", "float and int columns", "two-symbol noise"])
def test_hard_inputs_stay_within_2_percent_of_liblzma(make, level):
    """Data where a parse shortcut could cost the most, against the reference's own liblzma preset."""
    data = make()
    ours = codecs.get_codec("lzma", level).compress(data)
    assert liblzma_decode(ours) == data
    preset = {"0e": 0, "1e": 1}[level] | lzma.PRESET_EXTREME
    theirs = lzma.compress(data, format=lzma.FORMAT_RAW, filters=[{"id": lzma.FILTER_LZMA2, "preset": preset}])
    assert len(ours) <= 1.02 * len(theirs), (len(ours), len(theirs))


@pytest.mark.parametrize("data", [b"", b"a", b"ab", b"abc", b"abcd", b"aaaaaaa", bytes(range(256))],
                         ids=["empty", "1", "2", "3", "4", "run", "all-bytes"])
def test_tiny_inputs_round_trip(data):
    roundtrip(data)


def test_empty_input_is_the_end_marker_alone():
    assert _lzma2.compress(b"", DICTS["0e"], 48, 16) == b"\x00"


def test_long_runs_split_into_chunks_of_at_most_2_mib():
    found = roundtrip(bytes(5 * 2**20))
    assert len(found) >= 3 and all(u <= 2**21 for _, u, _ in found)


def test_text_fills_chunks_up_to_64_kib_packed():
    found = roundtrip(text(3 * 2**20), "1e")
    assert len(found) > 3 and max(c for _, _, c in found) > 60_000


def test_incompressible_data_is_stored_not_grown():
    data = random.Random(5).randbytes(300_000)
    found = roundtrip(data)
    assert all(control in (1, 2) for control, _, _ in found)
    assert sum(c for _, _, c in found) == len(data)


def test_stored_and_coded_chunks_alternate_with_state_resets():
    rng = random.Random(9)
    parts = [rng.randbytes(70_000) if i % 2 else text(150_000, seed=i) for i in range(6)]
    found = roundtrip(b"".join(parts))
    kinds = [control >= 0x80 for control, _, _ in found]
    assert True in kinds and False in kinds


@pytest.mark.parametrize("level", ["0e", "1e"])
def test_matches_as_far_back_as_the_dictionary_reaches(level):
    dict_size = DICTS[level]
    block = random.Random(3).randbytes(4096)
    filler = random.Random(4).randbytes(dict_size - len(block))
    roundtrip(block + filler + block + block[:100], level)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.one_of(st.binary(max_size=40), st.sampled_from([b"ab" * 30, b"\x00" * 300, b"xyz"])),
                max_size=80),
       st.integers(min_value=1, max_value=40))
def test_any_structured_input_round_trips(pieces, repeat):
    roundtrip(b"".join(pieces) * repeat)


def test_threads_get_the_same_bytes_as_one_thread():
    inputs = [text(200_000, seed=s) for s in range(4)]
    expected = [_lzma2.compress(d, DICTS["0e"], 48, 16) for d in inputs]
    results: dict[int, bytes] = {}

    def work(i: int) -> None:
        results[i] = _lzma2.compress(inputs[i], DICTS["0e"], 48, 16)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [results[i] for i in range(4)] == expected


@pytest.mark.parametrize("args", [(2**21, 48, 16), (1024, 48, 16), (2**18, 4, 16), (2**18, 300, 16), (2**18, 48, 0)])
def test_settings_out_of_range_are_refused(args):
    with pytest.raises(ValueError, match="lzma2 encoder"):
        _lzma2.compress(b"abc", *args)


@pytest.mark.parametrize("own", [True, False], ids=["own encoder", "liblzma fallback"])
def test_zs_files_read_back_with_either_encoder(own, tmp_path, monkeypatch):
    if not own:
        monkeypatch.setattr(codecs, "_lzma2", None)
    sample = text(50_000)
    by_liblzma = lzma.compress(sample, format=lzma.FORMAT_RAW, filters=[codecs._lzma_filters("0e")])
    assert (codecs.get_codec("lzma", "0e").compress(sample) == by_liblzma) is not own
    records = sorted(text(600_000).splitlines())
    path = tmp_path / "f.zs"
    with ZSWriter(str(path), {}, codec="lzma", approx_block_size=100_000, parallelism=2) as w:
        w.add_records(records)
        w.finish()
    with ZS(str(path)) as z:
        assert list(z) == records
        z.validate()


class _BrokenEncoder:
    """Stands in for the C encoder: a stream that is not LZMA2, or one of other bytes."""

    def __init__(self, wrong: str):
        self.wrong = wrong

    def compress(self, data: bytes, *settings) -> bytes:
        if self.wrong == "garbage":
            return b"\x80not lzma2"
        return _lzma2.compress(data[:-1] + b"?", *settings)


@pytest.mark.parametrize("wrong", ["garbage", "other bytes"])
def test_a_block_our_encoder_got_wrong_is_made_by_liblzma(wrong, monkeypatch):
    monkeypatch.setattr(codecs, "_lzma2", _BrokenEncoder(wrong))
    sample = text(50_000)
    with pytest.warns(RuntimeWarning, match="made by liblzma instead"):
        out = codecs.get_codec("lzma", "0e").compress(sample)
    assert out == lzma.compress(sample, format=lzma.FORMAT_RAW, filters=[codecs._lzma_filters("0e")])
    assert liblzma_decode(out) == sample
