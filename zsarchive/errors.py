"""The two exception families every zsarchive error belongs to."""


class ZSError(Exception):
    """A usage error or an unsupported request (bad argument, unknown codec, ...)."""


class ZSCorrupt(ZSError):
    """The bytes are wrong: the message names the file, the offset and what was expected."""


class RecordFault(ZSCorrupt):
    """An archive's records are wrong (their encoding, their shape, or an invariant between them): the
    message names the records; a query of the archive puts the archive's name in front (:meth:`named`)."""

    archive: str | None = None

    def named(self, archive: str) -> "RecordFault":
        """The same fault, the archive's name in front (once)."""
        if self.archive is not None:
            return self
        named = RecordFault(f"{archive}: {self}")
        named.archive = archive
        return named


class ObjectMissing(ZSError):
    """The object a read names does not exist (HTTP 404 or 410, no such key or file)."""


MALFORMED = (ValueError, TypeError, IndexError, KeyError, AttributeError, OverflowError, RecursionError)
"""What decoding a record of the wrong shape raises before any check of ours names it."""
