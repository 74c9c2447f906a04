"""Reader of Icechunk repositories (spec V1 and V2), without the icechunk library, into a typed model."""

from zsarchive.icechunk.model import (
    ArrayManifestInfo, ChunkRef, DimensionShape, FileHeader, FileType, Manifest, ManifestFileInfo,
    ManifestRef, MoveOperation, Node, NodeType, RefKind, RepoInfo, RepoStatus, Snapshot, SnapshotInfo,
    TransactionLog, Update, format_time,
)
from zsarchive.lazy import lazy_exports

# the decoders import flatbuffers (and with it numpy): archive queries need only the model
__getattr__ = lazy_exports(__name__, {"Repository": "zsarchive.icechunk.repository"})

__all__ = [
    "ArrayManifestInfo", "ChunkRef", "DimensionShape", "FileHeader", "FileType", "Manifest",
    "ManifestFileInfo", "ManifestRef", "MoveOperation", "Node", "NodeType", "RefKind", "RepoInfo",
    "RepoStatus", "Repository", "Snapshot", "SnapshotInfo", "TransactionLog", "Update", "format_time",
]
