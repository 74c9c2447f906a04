"""Bytes-only building blocks of the ZS v0.10 format: no I/O, no policy."""
