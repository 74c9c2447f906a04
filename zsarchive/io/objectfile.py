"""One object in S3, Google Cloud Storage or Azure, read by byte ranges through obstore.

Opening costs one round trip (the head and the tail are asked for at once); every later range is
asked for with the ETag seen at open (``If-Match``), so an object replaced while it is read fails
instead of mixing two versions. A body longer than the range asked for is refused as it streams in.
"""

from __future__ import annotations

import urllib.parse
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from zsarchive.errors import ZSCorrupt, ZSError
from zsarchive.io.location import Location, parse_location
from zsarchive.io.objects import UNSATISFIABLE, ObjectChanged, ObjectStoreError, describe, get_bounded, object_store
from zsarchive.io.remote import RemoteTransport


class ObjectTransport(RemoteTransport):
    """Random access to the object at an ``s3://``, ``gs://`` or ``az://`` URL (or a :class:`Location`)."""

    def __init__(self, source: str | Location, *, max_workers: int = 8) -> None:
        location = parse_location(source)
        super().__init__(location.url, max_workers=max_workers)
        parts = urllib.parse.urlparse(location.url)
        key = urllib.parse.unquote(parts.path).strip("/")
        if not key:
            raise ZSError(f"{location.url}: names a bucket, not an object in it")
        # the store is rooted at the bucket: the whole path is the key
        bucket = Location(f"{parts.scheme}://{parts.netloc}", location.kind, location.options, location.anon)
        self._store = object_store(bucket)
        self._kind = location.kind
        self._key = key
        self._pin: dict[str, Any] = {}

    def _get(self, options: dict[str, Any], want: int) -> tuple[dict, tuple[int, int], bytes]:
        """One GET of a range: (object meta, byte range sent, body)."""
        try:
            meta, sent, body = get_bounded(self._store, self._key, {**options, **self._pin}, want, self.name)
        except ObjectChanged:
            raise ZSCorrupt(f"{self.name}: file changed while reading (ETag was {self._pin.get('if_match')})") from None
        except ObjectStoreError as exc:
            if exc.cause == UNSATISFIABLE and self._is_empty():
                return {"size": 0, "e_tag": None}, (0, 0), b""  # an empty object has no range to give
            raise
        pinned = self._pin.get("if_match")
        if pinned and meta.get("e_tag") != pinned:  # a store or proxy that ignored the precondition
            raise ZSCorrupt(f"{self.name}: file changed while reading (ETag was {pinned}, now {meta.get('e_tag')})")
        self.stats.add(requests=1, bytes=len(body))
        return meta, sent, body

    def _is_empty(self) -> bool:
        import obstore

        try:
            return int(obstore.head(self._store, self._key)["size"]) == 0
        except Exception as exc:
            raise describe(exc, self.name) from None

    def _open(self, head: int, tail: int) -> tuple[int, bytes, bytes]:
        asks: list[tuple[dict[str, Any], int]] = [({"range": (0, max(head, 1))}, max(head, 1))]
        if tail and self._kind == "az":  # Azure serves no suffix range: the head's answer gives the length first
            answers = [self._get(*asks[0])]
            size = int(answers[0][0]["size"])
            answers.append(
                self._get({"range": (size - min(tail, size), size)}, min(tail, size)) if size else answers[0]
            )
        else:
            if tail:
                asks.append(({"range": {"suffix": tail}}, tail))
            with ThreadPoolExecutor(len(asks)) as both:  # both requests go out together: one round trip
                answers = list(both.map(lambda ask: self._get(*ask), asks))
        sizes = {int(meta["size"]) for meta, _, _ in answers}
        tags = {meta.get("e_tag") for meta, _, _ in answers}
        if len(sizes) != 1 or len(tags) != 1:
            raise ZSCorrupt(f"{self.name}: file changed while reading (answers give lengths {sorted(sizes)})")
        size, etag = sizes.pop(), tags.pop()
        if etag:
            self._pin = {"if_match": etag}
        head_bytes = answers[0][2][:head] if head else b""
        tail_bytes = answers[1][2] if tail else b""
        expected = [(0, min(max(head, 1), size))] + ([(size - min(tail, size), min(tail, size))] if tail else [])
        for (_, (start, end), body), (want, length) in zip(answers, expected):
            if (start, len(body)) != (want, length) or end - start != length:
                raise ZSError(
                    f"{self.name}: asked for {length} bytes at offset {want}, the store sent "
                    f"{len(body)} at offset {start}"
                )
        return size, head_bytes, tail_bytes

    def _fetch(self, offset: int, length: int) -> bytes:
        meta, (start, end), body = self._get({"range": (offset, offset + length)}, length)
        if int(meta["size"]) != self._size:
            raise ZSCorrupt(f"{self.name}: file changed while reading (length was {self._size}, now {meta['size']})")
        if (start, end, len(body)) != (offset, offset + length, length):
            raise ZSError(
                f"{self.name}: asked for bytes {offset}-{offset + length - 1}, the store sent "
                f"{len(body)} bytes at {start}"
            )
        return body
