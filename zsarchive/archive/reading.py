"""Opening a repo archive and reading its records: what every query of :class:`RepoArchive
<zsarchive.archive.query.RepoArchive>` stands on.

Every answer is a handful of ``ZS.search(prefix=...)`` lookups or one range scan, so a cold
lookup reads only the index path and the data block of each record family it touches, locally
or over HTTP through the same reader.
"""

from __future__ import annotations

import functools
import os
from typing import Any, Iterator, Self

from zsarchive.archive import schema as S
from zsarchive.archive.chunkdata import is_url
from zsarchive.archive.fragments import Chain, Member, open_chain
from zsarchive.errors import ZSCorrupt, ZSError
from zsarchive.icechunk.model import format_time
from zsarchive.io.kinds import REPOSITORY, local_kind, repository_not_archive
from zsarchive.limits import load_json
from zsarchive.zs.reader import ZS


_MALFORMED = (ValueError, TypeError, IndexError, KeyError, AttributeError, OverflowError, RecursionError)
"""What decoding a record of the wrong shape raises before any check of ours names it."""


def checked_record(family: bytes):
    """Turn a record value of the wrong shape (from a damaged or hostile archive) into ZSCorrupt."""
    def wrap(build):
        @functools.wraps(build)
        def checked(*args):
            try:
                return build(*args)
            except _MALFORMED as exc:
                raise ZSCorrupt(f"archive {S.FAMILY_NAMES[family]} record {args[:-1]!r} has a malformed "
                                f"value: {exc}") from None
        return checked
    return wrap


def guarded(method):
    """A query whose every failure is a ZSError: a record of the wrong shape (from a damaged or hostile
    archive) becomes ZSCorrupt naming the archive, also while a streamed answer is being read."""
    @functools.wraps(method)
    def run(self, *args, **kwargs):
        try:
            result = method(self, *args, **kwargs)
        except ZSError:
            raise
        except _MALFORMED as exc:
            raise _malformed(self, exc) from None
        return _guarded_stream(self, result) if isinstance(result, Iterator) else result
    return run


def _guarded_stream(archive: "ArchiveReader", items: Iterator) -> Iterator:
    try:
        yield from items
    except ZSError:
        raise
    except _MALFORMED as exc:
        raise _malformed(archive, exc) from None


def _malformed(archive: "ArchiveReader", exc: BaseException) -> ZSCorrupt:
    return ZSCorrupt(f"{archive.name}: a record of the wrong shape ({type(exc).__name__}: {exc})")


class NotFound(ZSError, LookupError):
    """A ref, path, chunk or snapshot that the archive does not have."""


def archive_metadata(zs: ZS | Chain) -> dict | None:
    """The archive marker in a ZS file's header metadata, or None when it is not a repo archive."""
    marker = zs.metadata.get(S.METADATA_KEY) if isinstance(zs.metadata, dict) else None
    return marker if isinstance(marker, dict) else None


def header_summary(zs: ZS) -> dict | None:
    """The archive header record of ``zs`` as a JSON-ready dict, or None if ``zs`` is no archive."""
    if archive_metadata(zs) is None:
        return None
    for rec in zs.search(prefix=S.key_prefix(S.HEADER)):
        _, _, value = S.split(rec)
        try:
            format_version, spec_version, export_time, exporter, counts = value[:5]
            return {"format_version": format_version, "source_spec_version": spec_version,
                    "export_time": format_time(export_time), "exporter": exporter,
                    "counts": {name: count for name, count in counts}}
        except (ValueError, TypeError) as exc:
            raise ZSCorrupt(f"{zs_name(zs)}: malformed archive header record: {exc}") from None
    raise ZSCorrupt(f"{zs_name(zs)}: archive has no header record")


def zs_name(zs: ZS) -> str:
    """The file name or URL a ZS reads (for messages)."""
    return str(getattr(zs, "name", None) or getattr(getattr(zs, "transport", None), "name", "archive"))


def open_archive(source: Any) -> tuple[ZS | Chain, str, int]:
    """The reader of a repo archive (a ZS, a path or a URL; a fragment read with the archives it builds
    on), the name it goes by and its format version; a one-line error for a file that is no archive,
    or of a format newer than this zsarchive reads."""
    if isinstance(source, ZS):
        zs = source
    elif is_url(source):
        zs = ZS(url=source)
    else:
        path = os.fspath(source)
        if local_kind(path) == REPOSITORY:
            raise repository_not_archive(path)
        zs = ZS(path[len("file://"):] if path.startswith("file://") else path)
    name = zs_name(zs) if isinstance(source, ZS) else str(source)
    try:
        marker = archive_metadata(zs)
        if marker is None:
            raise ZSError(f"{name}: a ZS file but not a repo archive (no {S.METADATA_KEY!r} "
                          "object in its metadata); make one with `zs export`")
        version = marker.get("format_version")
        if not isinstance(version, int) or version > S.FORMAT_VERSION:
            raise ZSError(f"{name}: archive format version {version!r} is newer than this "
                          f"zsarchive reads ({S.FORMAT_VERSION}): upgrade zsarchive")
        return (open_chain(zs, name) if marker.get("fragment") is not None else zs), name, version
    except BaseException:
        zs.close()
        raise


def records_under(zs: ZS | Chain, family: bytes, key: tuple = ()) -> Iterator[tuple[tuple, tuple]]:
    """(key, value) of every record of ``family`` whose key starts with the elements ``key``."""
    n = len(key)
    for rec in zs.search(prefix=S.key_prefix(family, key)):
        _, k, v = S.split(rec)
        # the bytes of text "a" are a prefix of those of "a\0b" (NUL is escaped as 00 FF): compare
        if k[:n] == key:
            yield k, v


class ArchiveReader:
    """An open repo archive (a ZS, a path or a URL; a fragment with its chain): its records by family
    and key, its header, chain and repository facts."""

    def __init__(self, source: Any):
        self.zs, self.name, self.format_version = open_archive(source)

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
        stop_key = S.key_prefix(family, stop) if stop is not None else bytes((family[0] + 1,))
        for rec in self.zs.search(start=S.key_prefix(family, start), stop=stop_key):
            _, k, v = S.split(rec)
            yield k, v

    def _one(self, family: bytes, key: tuple) -> tuple | None:
        for k, v in self._records(family, key):
            if len(k) == len(key):
                return v
        return None

    def header(self) -> dict:
        """The archive header record: format version, source spec version, export time, counts (of a
        fragment: of its chain's view, as a full export's)."""
        summary = header_summary(self.zs)
        assert summary is not None  # checked in __init__
        return summary

    def chain(self) -> list[dict]:
        """The archives read as this one, newest first: one for a full archive, a fragment and its
        bases for a fragment (location, format version, export time, SHA-256, time range covered)."""
        members = self.zs.members if isinstance(self.zs, Chain) else [Member(self.zs, self.name, None, ())]
        out = []
        for member in members:
            header = header_summary(member.zs) or {}
            entry = {"location": member.location, "format_version": header.get("format_version"),
                     "export_time": header.get("export_time"), "sha256": member.zs.data_sha256.hex()}
            if member.info is not None:
                entry["covers"] = [format_time(t) for t in member.info.covers]
                entry["records"] = {S.FAMILY_NAMES[tag]: h.records for tag, h in sorted(member.info.holdings.items())}
                entry["tombstones"] = sum(h.tombstones for h in member.info.holdings.values())
            out.append(entry)
        return out

    def repo_facts(self) -> dict[str, Any]:
        """Repository-level facts: spec_version, metadata, config, status, feature_flags."""
        return {k[0]: load_json(v[0], f"{self.name}: archive repo record {k[0]!r}") for k, v in self._records(S.REPO)}

    def _counted(self, family: bytes) -> bool:
        """Whether the archive holds any record of ``family`` (its header's counts say, no lookup)."""
        return bool(self.header()["counts"].get(S.FAMILY_NAMES[family]))
