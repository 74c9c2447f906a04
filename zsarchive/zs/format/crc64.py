"""CRC-64 as used by .xz and ZS (poly 0x42f0e1eba9ea3693, reflected, all-ones init/xorout)."""

from __future__ import annotations

from fastcrc import crc64 as _crc64

crc64 = _crc64.xz
"""Return the CRC-64-xz of a bytes-like object as an int; ``crc64(b, crc64(a))`` is the CRC of ``a + b``."""
