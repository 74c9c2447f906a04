"""A backup set: the directory or object-store prefix ``zs backup`` keeps (docs/backup.rst, "The backup
set"). Its archives are named by the time they were made and what they are, and one small JSON file
remembers the options they were made with; nothing else in it is read.

* ``2026-11-28T061230Z-full.zs``, ``2026-11-28T061730Z-fragment.zs``: archive names, UTC to the second,
  each later than every name before it (so they sort in the order they were made);
* ``zsbackup.json``: the settings (version :data:`SETTINGS_VERSION`);
* ``zsbackup.lock``: present while a run works on the set (:mod:`zsarchive.io.lock`).
"""

from __future__ import annotations

import datetime as _dt
import json
import re
from dataclasses import asdict, dataclass, field
from typing import Any

from zsarchive.errors import ZSCorrupt, ZSError
from zsarchive.typedtuple import TypedTuple

SETTINGS = "zsbackup.json"
"""The file that remembers the options of the set's archives."""
LOCK = "zsbackup.lock"
"""The lock a run holds while it works on the set."""
SETTINGS_VERSION = 1
"""The version of the settings' JSON (its ``zsbackup`` field)."""
FULL, FRAGMENT = "full", "fragment"
"""What an archive of the set is: standalone, or built on the one before it."""
MAX_SETTINGS = 1 << 20
"""Bytes a settings file may hold."""
_NAME = re.compile(r"(\d{4}-\d{2}-\d{2})T(\d{2})(\d{2})(\d{2})Z-(full|fragment)\.zs")


class ArchiveName(TypedTuple):
    """An archive of a set: its name, the second it names (since 1970, UTC) and its kind."""

    name: str
    second: int
    kind: str


def archive_name(second: int, kind: str) -> str:
    """The name of an archive of ``kind`` made at ``second`` (since 1970, UTC)."""
    moment = _dt.datetime.fromtimestamp(second, _dt.timezone.utc)
    return moment.strftime("%Y-%m-%dT%H%M%SZ") + f"-{kind}.zs"


def parse_name(name: str) -> ArchiveName | None:
    """What an object name says, if it names an archive of a set (anything else is not read)."""
    found = _NAME.fullmatch(name)
    if found is None:
        return None
    day, hour, minute, second, kind = found.groups()
    try:
        moment = _dt.datetime.fromisoformat(f"{day}T{hour}:{minute}:{second}+00:00")
    except ValueError:
        return None
    return ArchiveName(name, int(moment.timestamp()), kind)


def archives(names: list[str]) -> list[ArchiveName]:
    """The archives among object names, oldest first."""
    return sorted((a for a in map(parse_name, names) if a is not None), key=lambda a: (a.second, a.name))


def next_name(names: list[ArchiveName], now_second: int, kind: str) -> str:
    """The name of a new archive of ``kind``: of the current second, or the second after the newest
    name if that is not later (a clock behind another machine's, or two runs in one second)."""
    newest = max((a.second for a in names), default=now_second - 1)
    return archive_name(max(now_second, newest + 1), kind)


@dataclass
class Settings:
    """What a set's archives are made with, remembered in :data:`SETTINGS` for later runs."""

    repository: str
    """The repository backed up, as first given (for messages: a later run names it again)."""
    include_chunks: bool = False
    codec: str = "deflate"
    compress_level: int | str | None = None
    chunk_codec: str = "none"
    authorize: dict[str, dict[str, str]] = field(default_factory=dict)
    """Prefixes (with their storage options) under which virtual shards' indexes are kept."""
    max_chain: int = 16
    """Fragments a chain may have before a run consolidates it."""
    max_fragments_size: float = 1.0
    """The fragments' bytes, as a share of their full archive's, beyond which a run consolidates."""

    RECORDS = ("include_chunks", "authorize")
    """The settings that decide which records an archive holds: a fragment must have its base's."""

    def encode(self) -> bytes:
        """The settings file's bytes."""
        return (json.dumps({"zsbackup": SETTINGS_VERSION, **asdict(self)}, indent=2, sort_keys=True) + "\n").encode()

    @classmethod
    def decode(cls, raw: bytes, where: str) -> Settings:
        """Read a settings file; ZSCorrupt naming ``where`` when it is not one, ZSError when it is newer."""
        try:
            doc = json.loads(raw)
        except ValueError as exc:
            raise ZSCorrupt(f"{where}: not JSON ({exc})") from None
        if not isinstance(doc, dict) or not isinstance(doc.get("zsbackup"), int):
            raise ZSCorrupt(f"{where}: not the settings of a backup set (no \"zsbackup\" version)")
        if doc["zsbackup"] > SETTINGS_VERSION:
            raise ZSError(
                f"{where}: settings version {doc['zsbackup']} is newer than this zsarchive reads "
                f"({SETTINGS_VERSION}): upgrade zsarchive"
            )
        known = {k: v for k, v in doc.items() if k in cls.__dataclass_fields__}
        try:
            settings = cls(**known)
            settings.check()
        except (TypeError, ZSError) as exc:
            raise ZSCorrupt(f"{where}: malformed settings ({exc})") from None
        return settings

    def check(self) -> None:
        """ZSError naming the first setting out of range."""
        kinds: dict[str, Any] = {
            "repository": str,
            "include_chunks": bool,
            "codec": str,
            "chunk_codec": str,
            "authorize": dict,
            "max_chain": int,
            "max_fragments_size": (int, float),
        }
        for name, kind in kinds.items():
            value = getattr(self, name)
            if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
                raise ZSError(f"{name} {value!r} is not a {getattr(kind, '__name__', 'number')}")
        if not all(isinstance(k, str) and isinstance(v, dict) for k, v in self.authorize.items()):
            raise ZSError(f"authorize {self.authorize!r:.200} is not prefix -> storage options")
        if not 1 <= self.max_chain <= MAX_FRAGMENTS:
            raise ZSError(f"max_chain {self.max_chain} is not between 1 and {MAX_FRAGMENTS}")
        if not self.max_fragments_size > 0:
            raise ZSError(f"max_fragments_size {self.max_fragments_size} is not above 0")


MAX_FRAGMENTS = 62
"""The deepest chain a set keeps: a reader opens chains of at most 64 archives, and a run adds one
fragment before it consolidates."""
