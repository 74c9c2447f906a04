"""Crockford base32 for Icechunk object ids (uppercase, unpadded, zero bits appended on the right).

Decoding forgives what Crockford's alphabet forgives (lower case, ``O`` for 0, ``I`` and ``L`` for 1), so
several texts decode to one id; icechunk prints each id one way only, its *canonical spelling*: the
upper-case alphabet below, the padding bits zero (the last character of a 12-byte id is ``0`` or ``G``, of
an 8-byte id one of even value). Everywhere an id names a file or keys a record, only that spelling is an
id: another one would name a second file holding the same id's bytes.
"""

from __future__ import annotations

import base64
import re
from typing import TypeGuard

from zsarchive.errors import ZSError

ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
_VALUES = {c: i for i, c in enumerate(ALPHABET)}
# Crockford decoding forgives the look-alike letters and lower case.
_VALUES.update({c.lower(): i for c, i in list(_VALUES.items())})
_VALUES.update({"O": 0, "o": 0, "I": 1, "i": 1, "L": 1, "l": 1})


# RFC 4648 base32 pads with zero bits on the right exactly like Crockford's; only the alphabet differs.
_FROM_RFC4648 = bytes.maketrans(b"ABCDEFGHIJKLMNOPQRSTUVWXYZ234567", ALPHABET.encode("ascii"))


def base32(raw: bytes) -> bytes:
    """Crockford base32 of ``raw`` as ASCII, padded with ``=`` to a multiple of 8 characters."""
    return base64.b32encode(raw).translate(_FROM_RFC4648)


def encode(raw: bytes) -> str:
    """Crockford base32 of ``raw``: 12 bytes -> 20 characters, 8 bytes -> 13."""
    return base32(raw).rstrip(b"=").decode("ascii")


def decode_many(texts: list[str], nbytes: int):
    """The raw bytes of many ids (as :func:`decode` reads each) as an (ids, ``nbytes``) uint8 array, in a few
    passes of numpy; ZSError naming the first text that is not such an id."""
    import numpy as np

    nchars = -(-nbytes * 8 // 5)
    joined = "".join(texts).encode("ascii", "replace")
    if len(joined) != nchars * len(texts):
        wrong = next(t for t in texts if len(t) != nchars or not t.isascii())
        decode(wrong, nbytes)  # raises, naming it
    values = np.frombuffer(_DIGITS, np.uint8)[np.frombuffer(joined, np.uint8).reshape(len(texts), nchars)]
    bad = (values == 255).any(axis=1)
    bits = np.unpackbits(values[:, :, None], axis=2)[:, :, 3:].reshape(len(texts), 5 * nchars)
    bad |= bits[:, 8 * nbytes :].any(axis=1)  # padding bits
    if bad.any():
        decode(texts[int(bad.argmax())], nbytes)  # raises, naming it
    return np.packbits(bits[:, : 8 * nbytes], axis=1)


_DIGITS = bytes(_VALUES.get(chr(b), 255) for b in range(256))
"""Each ASCII byte's Crockford digit value (255: not a digit)."""


def decode(text: str, nbytes: int) -> bytes:
    """The ``nbytes`` raw bytes an id string encodes; ZSError if it is not such an id."""
    nchars = -(-nbytes * 8 // 5)
    if len(text) != nchars:
        raise ZSError(f"{text!r} is not an object id: expected {nchars} base32 characters")
    value = 0
    for c in text:
        digit = _VALUES.get(c)
        if digit is None:
            raise ZSError(f"{text!r} is not an object id: {c!r} is not a Crockford base32 digit")
        value = value << 5 | digit
    padding = nchars * 5 - nbytes * 8
    if value & ((1 << padding) - 1):
        raise ZSError(f"{text!r} is not an object id: its padding bits are not zero")
    return (value >> padding).to_bytes(nbytes, "big")


CANONICAL = {12: re.compile("[0-9A-HJKMNP-TV-Z]{19}[0G]"), 8: re.compile("[0-9A-HJKMNP-TV-Z]{12}[02468ACEGJMPRTWY]")}
"""The canonical spelling of a 12-byte id (snapshots, manifests, chunks) and of an 8-byte one (nodes): what
``encode`` makes (a test holds the two equal)."""


def is_id(text: object, nbytes: int = 12) -> TypeGuard[str]:
    """Whether ``text`` is the canonical spelling (``encode``'s) of an ``nbytes`` id (12 or 8)."""
    return type(text) is str and CANONICAL[nbytes].fullmatch(text) is not None
