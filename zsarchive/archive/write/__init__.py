"""Writing an archive: planning, the export stages, the engines (this process, worker processes,
dask), fragments and consolidation."""
