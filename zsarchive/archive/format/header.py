"""The archive's identity: the header record (format version, source spec version, export time,
exporter, record counts and, in a fragment, what it holds) and the marker object in the ZS header
metadata (docs/archive-format.rst). Both are built and read here only."""

from __future__ import annotations

from typing import Any

from zsarchive.archive.format import schema
from zsarchive.archive.format.fragments import FragmentInfo
from zsarchive.errors import ZSCorrupt
from zsarchive.typedtuple import TypedTuple
from zsarchive.zs.reader import ZS


class ArchiveHeader(TypedTuple):
    """An archive's header record. ``counts``: records per family name (of a fragment: of its chain's
    view, as a full export made at its time would hold); ``fragment``: what a fragment holds."""

    format_version: int
    spec_version: int
    export_time: int
    exporter: str
    counts: dict[str, int]
    fragment: FragmentInfo | None = None

    def record(self) -> bytes:
        """The header record's bytes."""
        values = (
            self.format_version,
            self.spec_version,
            self.export_time,
            self.exporter,
            tuple(sorted(self.counts.items())),
        )
        return schema.record(schema.HEADER, (), values if self.fragment is None else values + (self.fragment.encode(),))

    @classmethod
    def decode(cls, value: tuple[Any, ...], where: str) -> ArchiveHeader:
        """The header from the header record's value elements; ZSCorrupt naming ``where`` when malformed.
        A fragment's description is read only from a fragment (format :data:`schema.FRAGMENT_FORMAT`)."""
        try:
            format_version, spec_version, export_time, exporter, counts = value[:5]
            counted = {name: count for name, count in counts}
        except (ValueError, TypeError) as exc:
            raise ZSCorrupt(f"{where}: malformed archive header record: {exc}") from None
        fragment = None
        if format_version == schema.FRAGMENT_FORMAT and len(value) > 5:
            fragment = FragmentInfo.decode(value[5], where)
        return cls(format_version, spec_version, export_time, exporter, counted, fragment)

    @classmethod
    def read(cls, zs: Any, where: str) -> ArchiveHeader:
        """The header record of an archive (a ZS, or a chain: its newest archive's record)."""
        for rec in zs.search(prefix=schema.key_prefix(schema.HEADER)):
            return cls.decode(schema.split(rec)[2], where)
        raise ZSCorrupt(f"{where}: archive has no header record")


def archive_metadata(zs: ZS | Any) -> dict[str, Any] | None:
    """The archive marker in a ZS file's header metadata, or None when it is not a repo archive."""
    marker = zs.metadata.get(schema.METADATA_KEY) if isinstance(zs.metadata, dict) else None
    return marker if isinstance(marker, dict) else None


def marker_metadata(format_version: int, spec_version: int, fragment: dict[str, Any] | None = None) -> dict[str, Any]:
    """The ZS header metadata of an archive: the marker with its format version, the source repository's
    spec version and, for a fragment, its base (``{"base": link, "base_sha256": hex}``)."""
    marker: dict[str, Any] = {"format_version": format_version, "source_spec_version": spec_version}
    if fragment is not None:
        marker["fragment"] = fragment
    return {schema.METADATA_KEY: marker}


def refs_by_manifest(format_version: int) -> bool:
    """Whether an archive keeps chunk refs per manifest (format 1), not as a per-chunk timeline."""
    return format_version < 2


def has_chunk_pieces(format_version: int) -> bool:
    """Whether an archive keeps chunk bytes in pieces and shard indexes (format 3 on), not whole."""
    return format_version >= 3


def history_from_timeline(format_version: int) -> bool:
    """Whether an archive's per-chunk history is its chunk ref timeline corrected by ``H`` exceptions
    (format 5 on), not one ``H`` record per logged chunk change."""
    return format_version >= 5


def keeps_file_forms(format_version: int) -> bool:
    """Whether an archive keeps each metadata file's header and manifest location compression (``Y``),
    a V1 deleted tag's snapshot and the ops log's files (format 6 on)."""
    return format_version >= 6


def keeps_virtual_data(format_version: int) -> bool:
    """Whether an archive may keep the bytes of virtual chunk refs (``E``, format 7 on)."""
    return format_version >= 7


def full_format(include_virtual: bool) -> int:
    """The format version of a full export: 7 when it keeps virtual chunk bytes, else 6."""
    return schema.VIRTUAL_FORMAT if include_virtual else schema.FULL_FORMAT
