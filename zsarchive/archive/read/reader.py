"""Opening a repo archive and reading its records: what every query of :class:`RepoArchive
<zsarchive.archive.read.repoarchive.RepoArchive>` stands on.

Every answer is a handful of ``ZS.search(prefix=...)`` lookups or one range scan, so a cold
lookup reads only the index path and the data block of each record family it touches, locally
or over HTTP through the same reader.
"""

from __future__ import annotations

import functools
import os
import types
from typing import Any, Iterator, Self

from zsarchive.archive.format import schema
from zsarchive.archive.format.header import ArchiveHeader, archive_metadata, keeps_virtual_data
from zsarchive.archive.format.views import RepoFactKey, RepoFactValue, starts_with
from zsarchive.archive.read.chain import Chain, Member, open_chain, records_format
from zsarchive.archive.read.invariants import UniqueKeys, duplicate
from zsarchive.errors import MALFORMED, RecordFault, ZSCorrupt, ZSError
from zsarchive.icechunk.kinds import REPOSITORY, local_kind, repository_not_archive
from zsarchive.io.location import is_url, local_path
from zsarchive.io.base import ObjectMissing
from zsarchive.times import format_time
from zsarchive.limits import load_json
from zsarchive.zs.reader import ZS


def checked_record(family: bytes):
    """Turn a record value of the wrong shape (from a damaged or hostile archive) into ZSCorrupt."""

    def wrap(build):
        @functools.wraps(build)
        def checked(*args):
            try:
                return build(*args)
            except MALFORMED as exc:
                raise RecordFault(  # a query puts the archive's name in front
                    f"archive {schema.FAMILY_NAMES[family]} record {args[:-1]!r} has a malformed value: {exc}"
                ) from None

        return checked

    return wrap


def guarded(method):
    """A query whose every failure is a ZSError: a record of the wrong shape (from a damaged or hostile
    archive) becomes ZSCorrupt naming the archive, also while a streamed answer is being read."""

    @functools.wraps(method)
    def run(self, *args, **kwargs):
        try:
            result = method(self, *args, **kwargs)
        except RecordFault as exc:
            raise exc.named(self.name) from None
        except ZSError:
            raise
        except MALFORMED as exc:
            raise _malformed(self, exc) from None
        return _guarded_stream(self, result) if isinstance(result, Iterator) else result

    run.guarded = True
    return run


def _guard_queries(cls: type) -> None:
    """Every public method ``cls`` defines, :func:`guarded` (a query added later cannot miss it)."""
    for name, value in list(vars(cls).items()):
        if not name.startswith("_") and isinstance(value, types.FunctionType) and not getattr(value, "guarded", False):
            setattr(cls, name, guarded(value))


def _guarded_stream(archive: "ArchiveReader", items: Iterator) -> Iterator:
    try:
        yield from items
    except RecordFault as exc:
        raise exc.named(archive.name) from None
    except ZSError:
        raise
    except MALFORMED as exc:
        raise _malformed(archive, exc) from None


def _malformed(archive: "ArchiveReader", exc: BaseException) -> ZSCorrupt:
    return ZSCorrupt(f"{archive.name}: a record of the wrong shape ({type(exc).__name__}: {exc})")


class NotFound(ZSError, LookupError):
    """A ref, path, chunk or snapshot that the archive does not have."""


def header_summary(zs: ZS | Chain) -> dict | None:
    """The archive header record of ``zs`` as a JSON-ready dict, or None if ``zs`` is no archive."""
    if archive_metadata(zs) is None:
        return None
    header = ArchiveHeader.read(zs, zs_name(zs))
    return {
        "format_version": header.format_version,
        "source_spec_version": header.spec_version,
        "export_time": format_time(header.export_time),
        "exporter": header.exporter,
        "counts": header.counts,
    }


def zs_name(zs: ZS | Chain) -> str:
    """The file name or URL a ZS reads (for messages)."""
    return str(getattr(zs, "name", None) or getattr(getattr(zs, "transport", None), "name", "archive"))


def open_archive(source: Any) -> tuple[ZS | Chain, str, int]:
    """The reader of a repo archive (a ZS, a path or a URL; a fragment read with the archives it builds
    on; a backup set's directory or prefix: its newest whole chain), the name it goes by and its format
    version; a one-line error for a file that is no archive, or of a format newer than this zsarchive reads."""
    if isinstance(source, ZS):
        return _as_archive(source, zs_name(source))
    name = str(source)
    if not names_backup_set(source):
        try:
            return _as_archive(_open_file(source), name)
        except ObjectMissing:  # maybe an object-store prefix given without its trailing "/"
            if not is_url(source):
                raise
            from zsarchive.archive.read.backupset import BackupSet

            if not BackupSet(source).holds_set():
                raise
    from zsarchive.archive.read.backupset import BackupSet  # here: opening a file needs none of it

    newest = BackupSet(source).open_newest(lambda where: _as_archive(_open_file(where), where)[0])
    return newest, name, _checked(newest, name)[2]


def names_backup_set(source: Any) -> bool:
    """Whether ``source`` names a backup set: a local directory (not a repository's) or a URL ending in ``/``."""
    text = os.fspath(source)
    if is_url(text):
        return text.endswith("/")
    path = local_path(text)
    return os.path.isdir(path) and local_kind(path) != REPOSITORY


def _as_archive(zs: ZS, name: str) -> tuple[ZS | Chain, str, int]:
    """:func:`_checked`, closing ``zs`` when it fails."""
    try:
        return _checked(zs, name)
    except BaseException:
        zs.close()
        raise


def _open_file(source: Any) -> ZS:
    if is_url(source):
        return ZS(url=source)
    path = local_path(source)
    if local_kind(path) == REPOSITORY:
        raise repository_not_archive(path)
    return ZS(path)


def _checked(zs: ZS | Chain, name: str) -> tuple[ZS | Chain, str, int]:
    """``zs`` as an archive (a fragment: with its chain), its name and format version; a one-line error
    for a ZS file that is no archive or of a format newer than this zsarchive reads."""
    marker = archive_metadata(zs)
    if marker is None:
        raise ZSError(
            f"{name}: a ZS file but not a repo archive (no {schema.METADATA_KEY!r} "
            "object in its metadata); make one with `zs export`"
        )
    version = marker.get("format_version")
    if not isinstance(version, int) or version > schema.FORMAT_VERSION:
        raise ZSError(
            f"{name}: archive format version {version!r} is newer than this "
            f"zsarchive reads ({schema.FORMAT_VERSION}): upgrade zsarchive"
        )
    if isinstance(zs, ZS) and marker.get("fragment") is not None:
        return open_chain(zs, name), name, version
    return zs, name, version


def records_under(
    zs: ZS | Chain, family: bytes, key: tuple = (), unique: bool = False
) -> Iterator[tuple[tuple, tuple]]:
    """(key, value) of every record of ``family`` whose key starts with the elements ``key``; ``unique``:
    ZSCorrupt for two records of one key (a reader that keeps every record checks it)."""
    keys = UniqueKeys() if unique else None
    for rec in zs.search(prefix=schema.key_prefix(family, key)):
        _, k, v = schema.split(rec)
        if keys is not None:
            keys.check(rec)
        if starts_with(k, key):
            yield k, v


class ArchiveReader:
    """An open repo archive (a ZS, a path or a URL; a fragment with its chain): its records by family
    and key, its header, chain and repository facts. Every public method of it and of every class
    built on it is :func:`guarded`: whatever an archive holds, a query fails only with a ZSError."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        _guard_queries(cls)

    def __init__(self, source: Any):
        self.zs, self.name, self.format_version = open_archive(source)
        self.records_format = records_format(self.zs, self.format_version)
        """The format version the records follow (of a chain: that of its view)."""

    @property
    def keeps_virtual_data(self) -> bool:
        """Whether the archive may keep the bytes of virtual chunk refs (format 7 on)."""
        return keeps_virtual_data(self.records_format)

    def close(self) -> None:
        """Release the underlying reader."""
        self.zs.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _records(self, family: bytes, key: tuple = ()) -> Iterator[tuple[tuple, tuple]]:
        return records_under(self.zs, family, key)

    def _range(self, family: bytes, start: tuple, stop: tuple | None) -> Iterator[tuple[tuple, tuple]]:
        stop_key = schema.key_prefix(family, stop) if stop is not None else bytes((family[0] + 1,))
        for rec in self.zs.search(start=schema.key_prefix(family, start), stop=stop_key):
            _, k, v = schema.split(rec)
            yield k, v

    def _one(self, family: bytes, key: tuple) -> tuple | None:
        """The value of the record of ``key``, None if there is none; ZSCorrupt if there are two (which
        one holds is never a question a reader answers)."""
        found = None
        for k, v in self._records(family, key):
            if k == key:
                if found is not None:
                    raise duplicate(family, key)
                found = v
            elif found is not None:
                break
        return found

    def header(self) -> dict:
        """The archive header record: format version, source spec version, export time, counts (of a
        fragment: of its chain's view, as a full export's)."""
        summary = header_summary(self.zs)
        assert summary is not None  # checked in __init__
        return summary

    def chain(self) -> list[dict]:
        """The archives read as this one, newest first: one for a full archive, a fragment and its
        bases for a fragment (location, format version, export time, SHA-256, time range covered)."""
        members = self.zs.members if isinstance(self.zs, Chain) else [Member(self.zs, zs_name(self.zs), None, None)]
        out = []
        for member in members:
            header = header_summary(member.zs) or {}
            entry = {
                "location": member.location,
                "format_version": header.get("format_version"),
                "export_time": header.get("export_time"),
                "sha256": member.zs.data_sha256.hex(),
            }
            if member.info is not None:
                entry["covers"] = [format_time(t) for t in member.info.covers]
                entry["records"] = {
                    schema.FAMILY_NAMES[tag]: h.records for tag, h in sorted(member.info.holdings.items())
                }
                entry["tombstones"] = sum(h.tombstones for h in member.info.holdings.values())
            out.append(entry)
        return out

    def repo_facts(self) -> dict[str, Any]:
        """Repository-level facts: spec_version, metadata, config, status, feature_flags."""
        facts = ((RepoFactKey.decode(k).name, v) for k, v in self._records(schema.REPO))
        return {
            name: load_json(RepoFactValue.decode(v).json, f"{self.name}: archive repo record {name!r}")
            for name, v in facts
        }

    def holds(self, family: bytes) -> bool:
        """Whether the archive holds any record of ``family`` (its header's counts say, no lookup)."""
        return bool(self.header()["counts"].get(schema.FAMILY_NAMES[family]))


_guard_queries(ArchiveReader)
