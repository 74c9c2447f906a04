"""Reading an archive: opening one archive or a chain of fragments, history, nodes, chunk queries,
changes and validation of meaning. Nothing here imports :mod:`zsarchive.archive.write`."""
