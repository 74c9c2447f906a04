"""The two enumerations of icechunk's model that the archive's record contract maps to codes: a
node's type and a chunk ref's kind. Kept apart from ``model.py`` so that reading an archive's records
imports neither dataclasses nor the rest of the model."""

from __future__ import annotations

import enum


class NodeType(enum.Enum):
    """Whether a node is a group or an array (values as icechunk's inspect output spells them)."""

    GROUP = "group"
    ARRAY = "array"


class RefKind(enum.Enum):
    """The three kinds of chunk reference a manifest holds."""

    INLINE = "inline"
    NATIVE = "native"
    VIRTUAL = "virtual"
