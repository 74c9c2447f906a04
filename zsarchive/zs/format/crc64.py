"""CRC-64 as used by .xz and ZS (poly 0x42f0e1eba9ea3693, reflected, all-ones init/xorout)."""

from __future__ import annotations

import warnings

import crcmod

crc64 = crcmod.mkCrcFun(0x142F0E1EBA9EA3693, initCrc=0, rev=True, xorOut=0xFFFFFFFFFFFFFFFF)
"""Return the CRC-64-xz of a bytes-like object as an int."""

try:
    import crcmod._crcfunext  # noqa: F401
    FAST = True
except ImportError:  # pragma: no cover - depends on the build
    FAST = False
    warnings.warn(
        "zsarchive: crcmod's C extension is not available; CRC-64 runs about 1000x slower. "
        "Reinstall crcmod with a C compiler and Python headers present.",
        RuntimeWarning,
        stacklevel=2,
    )
