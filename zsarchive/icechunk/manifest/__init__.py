"""Manifest files (``manifests/<id>``): decoded a batch of refs at a time (:mod:`.decode`), encoded as
icechunk lays them out (:mod:`.encode`), the refs of one array as columns between them (:mod:`.refs`)."""

from zsarchive.lazy import lazy_exports

# a lookup decodes one manifest and never encodes: the encoder loads on first use
__getattr__ = lazy_exports(
    __name__,
    {
        **dict.fromkeys(
            ("ManifestBuffer", "RefColumns", "RefIdentities", "decode_manifest", "iter_chunk_refs"),
            "zsarchive.icechunk.manifest.decode",
        ),
        "encode_manifest": "zsarchive.icechunk.manifest.encode",
        **dict.fromkeys(("RefBatch", "RefTable"), "zsarchive.icechunk.manifest.refs"),
    },
)

__all__ = [
    "ManifestBuffer",
    "RefBatch",
    "RefColumns",
    "RefIdentities",
    "RefTable",
    "decode_manifest",
    "encode_manifest",
    "iter_chunk_refs",
]
