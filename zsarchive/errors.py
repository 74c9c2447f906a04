"""The two exception families every zsarchive error belongs to."""


class ZSError(Exception):
    """A usage error or an unsupported request (bad argument, unknown codec, ...)."""


class ZSCorrupt(ZSError):
    """The bytes are wrong: the message names the file, the offset and what was expected."""


class ObjectMissing(ZSError):
    """The object a read names does not exist (HTTP 404 or 410, no such key or file)."""
