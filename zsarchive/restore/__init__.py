"""Bringing an archive back: a snapshot as plain Zarr (checkout)."""
