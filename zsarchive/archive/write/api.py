"""The public entry point of writing: :func:`export`, a full archive or a fragment over a base; it
stands above both (:mod:`exporter <zsarchive.archive.write.exporter>` and
:mod:`incremental <zsarchive.archive.write.incremental>`), which import neither it nor each other's caller."""

from __future__ import annotations

import os
import time
from typing import Any

from zsarchive.archive.write.incremental import export_fragment
from zsarchive.archive.write.job import ExportJob, ExportSummary, target_path
from zsarchive.archive.write.options import ExportOptions, given
from zsarchive.archive.write.plan import plan_export
from zsarchive.archive.write.scope import Scope
from zsarchive.icechunk import Repository
from zsarchive.io.location import parse_location
from zsarchive.io.outfile import check_new_target


def export(
    repo_location: str | os.PathLike,
    archive_path: str | os.PathLike,
    options: ExportOptions | None = None,
    **choices: Any,
) -> ExportSummary:
    """Export the repository at ``repo_location`` (a path or an object-store URL) into a new archive
    at ``archive_path``, as ``options`` say, or the keyword arguments of :class:`ExportOptions`
    (``codec``, ``include_chunks``, ``parallelism``, ``base``...) when ``options`` is not given.
    """
    options = given(ExportOptions, options, choices, "export")
    write_options = options.checked()
    started = time.monotonic()
    target, directory = target_path(archive_path)
    check_new_target(target, options.overwrite)
    location = parse_location(repo_location, options.storage_options, options.anon)
    repo = Repository.open(location)
    export_time = time.time_ns() // 1000 if options.export_time is None else options.export_time
    job = ExportJob(repo, location, target, directory, write_options, options, export_time)
    try:
        summary = (
            job.run(plan_export(repo), Scope(options.include_virtual))
            if options.base is None
            else export_fragment(job, options.base)
        )
    finally:
        repo.storage.close()
    summary.size = target.stat().st_size
    summary.seconds = time.monotonic() - started
    return summary
