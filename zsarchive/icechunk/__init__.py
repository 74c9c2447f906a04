"""Reader of Icechunk repositories (spec V1 and V2), without the icechunk library, into a typed model."""

from zsarchive.lazy import lazy_exports

_MODEL = (
    "ArrayManifestInfo",
    "ChunkRef",
    "DimensionShape",
    "FileHeader",
    "FileType",
    "Manifest",
    "ManifestFileInfo",
    "ManifestRef",
    "MoveOperation",
    "Node",
    "NodeType",
    "RefKind",
    "RepoInfo",
    "RepoStatus",
    "Snapshot",
    "SnapshotInfo",
    "TransactionLog",
    "Update",
    "format_time",
)

# the decoders import flatbuffers (and with it numpy), and the model its dataclasses: a module of this
# package that needs neither (what a local path holds, say) must not pay for them
__getattr__ = lazy_exports(
    __name__, {**dict.fromkeys(_MODEL, "zsarchive.icechunk.model"), "Repository": "zsarchive.icechunk.repository"}
)

__all__ = [*_MODEL, "Repository"]
