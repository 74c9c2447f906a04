"""The test suite's shared helpers, one per job (as zarr keeps its ``testing`` package).

``cli``: run ``zs`` in a fresh process and check its one-line errors; ``peers``: run a script under an
icechunk interpreter; ``bytes``: shard indexes, header CRCs and icechunk payloads, read and patched; ``reads``:
which process reads which repository metadata files.
"""
