"""The test suite's shared helpers, one module per job (as zarr keeps its ``testing`` package); the tests
import them as ``toolkit.<module>``.

- ``places``: the clone, its test data and the installed peers; ``peers``: run a script under an icechunk
  interpreter; ``servers``: nginx, moto, Azurite, the GCS emulator and misbehaving servers on loopback;
  ``workers``: run inside a dask cluster's worker processes (a worker that dies halfway through a write).
- ``oracle``: the live icechunk's answers about the committed fixtures; ``agreement``: an archive's answers
  held against them; ``icechunk_answers``: answers about a restored repository made comparable;
  ``xarray_repo``: an xarray history written and read by the real icechunk.
- ``cli``: run ``zs`` in a fresh process and check its one-line errors; ``archives``: small archives and
  chains compared as records; ``reads``: which process reads which repository metadata files;
  ``imports``: what a source file imports, for the layer rules; ``columns``: a batch decoded by the C or
  the numpy column decoder.
- Bytes of each format, built, read or patched without our code: ``zsfiles`` and ``zsheader`` (ZS),
  ``archive_format`` (archive records), ``icechunk_files`` (icechunk files), ``shards`` and
  ``virtualshards`` (zarr shards).
"""
