"""Object stores (S3, Google Cloud Storage, Azure, HTTP) through obstore, and their errors as one line.

Credentials and endpoints come from the standard environment variables, which obstore reads itself
(``AWS_*``, ``GOOGLE_*``, ``AZURE_*``), plus a location's storage options; an ``http://`` endpoint
turns on plain HTTP, as it does for boto3 and the AWS CLI.
"""

from __future__ import annotations

import functools
import os
import re
import urllib.parse
from datetime import timedelta
from typing import Any

from zsarchive.errors import ZSCorrupt, ZSError
from zsarchive.io.base import ObjectMissing
from zsarchive.io.location import Location

CLIENT_KEYS = {
    "allow_http",
    "allow_invalid_certificates",
    "connect_timeout",
    "default_content_type",
    "default_headers",
    "http1_only",
    "http2_only",
    "pool_idle_timeout",
    "pool_max_idle_per_host",
    "proxy_url",
    "proxy_ca_certificate",
    "proxy_excludes",
    "root_certificate",
    "randomize_addresses",
    "read_timeout",
    "timeout",
    "user_agent",
}
"""Storage options that configure the HTTP client rather than the store."""

TIMEOUTS = {"connect_timeout": "10s", "timeout": "120s"}
RETRY = {
    "max_retries": 5,
    "retry_timeout": timedelta(seconds=60),
    "backoff": {"init_backoff": timedelta(milliseconds=100), "max_backoff": timedelta(seconds=5), "base": 2},
}
"""Transient faults (503s, dropped connections) are retried with backoff for at most a minute in all."""

_ENDPOINT_KEYS = ("endpoint", "endpoint_url", "aws_endpoint", "aws_endpoint_url", "base_url", "google_base_url")

_STORES: dict[tuple, Any] = {}
_SETTINGS = ("AWS_", "AZURE_", "GOOGLE_")
"""The environment variables a store is configured from (obstore's, and the connection string read here)."""


def object_store(location: Location):
    """The obstore store for a remote location's bucket and prefix: one per location and process, made again
    when the environment that configures it (endpoint, credentials) has changed since."""
    key = (location, tuple(sorted((k, v) for k, v in os.environ.items() if k.startswith(_SETTINGS))))
    store = _STORES.get(key)
    if store is None:
        store = _STORES[key] = _build(location)
    return store


def _build(location: Location):
    from obstore.store import AzureStore, GCSStore, HTTPStore, S3Store

    url = urllib.parse.urlparse(location.url)
    config: dict[str, Any] = {}
    client: dict[str, Any] = dict(TIMEOUTS)
    for key, value in location.options:
        (client if key in CLIENT_KEYS else config)[key] = _typed(value)
    endpoint = next((str(config[k]) for k in _ENDPOINT_KEYS if k in config), None)
    if location.kind == "s3":
        endpoint = endpoint or os.environ.get("AWS_ENDPOINT_URL") or os.environ.get("AWS_ENDPOINT")
    if (endpoint or "").lower().startswith("http://") or url.scheme == "http":
        client.setdefault("allow_http", True)
    if location.anon and location.kind != "http":
        config["skip_signature"] = True
    prefix = urllib.parse.unquote(url.path).strip("/") or None
    try:
        if location.kind == "s3":
            return S3Store(url.netloc, prefix=prefix, config=config, client_options=client, retry_config=RETRY)
        if location.kind == "gs":
            return GCSStore(url.netloc, prefix=prefix, config=config, client_options=client, retry_config=RETRY)
        if location.kind == "az":
            container, _, host = url.netloc.partition("@")
            if host and "account_name" not in config:
                config["account_name"] = host.split(".")[0]
            for key, value in _azure_connection_string().items():
                config.setdefault(key, value)
            return AzureStore(container, prefix=prefix, config=config, client_options=client, retry_config=RETRY)
        if location.kind == "http":
            if config:
                raise ZSError(f"{location.url}: storage options {', '.join(sorted(config))} do not apply to HTTP")
            return HTTPStore(location.url, client_options=client, retry_config=RETRY)
    except ZSError:
        raise
    except Exception as exc:  # obstore's configuration errors: unknown key, bad value
        raise describe(exc, location.url) from None
    raise ZSError(f"{location.url}: not an object-store location")


def _typed(value: str) -> Any:
    return {"true": True, "false": False}.get(value.lower(), value) if isinstance(value, str) else value


def _azure_connection_string() -> dict[str, str]:
    """Account, key and endpoint from ``AZURE_STORAGE_CONNECTION_STRING`` (which obstore does not read)."""
    text = os.environ.get("AZURE_STORAGE_CONNECTION_STRING", "")
    fields = dict(part.split("=", 1) for part in text.split(";") if "=" in part)
    names = {
        "AccountName": "account_name",
        "AccountKey": "account_key",
        "BlobEndpoint": "endpoint",
        "SharedAccessSignature": "sas_key",
    }
    out = {names[k]: v for k, v in fields.items() if k in names}
    if out.get("endpoint", "").startswith("http://"):
        out["allow_http"] = "true"
    return out


NO_BUCKET = "no such bucket or container"
NO_OBJECT = "no such object"
UNSATISFIABLE = "range not satisfiable"
CONFIGURATION = "bad storage configuration"


class ObjectStoreError(ZSError):
    """An object store's failure in one line naming the URL; ``cause`` is what failed (``NO_OBJECT``,
    ``UNSATISFIABLE``, ...), or None when the store said nothing this module knows."""

    def __init__(self, message: str, cause: str | None) -> None:
        super().__init__(message)
        self.cause = cause


@functools.cache
def _by_class() -> tuple[tuple[tuple[type[BaseException], ...], str], ...]:
    """obstore's exception classes -> causes (imported on first use: reading a local archive never
    needs obstore). obstore raises Python's own FileNotFoundError and PermissionError where they fit."""
    from obstore import exceptions as oe

    return (
        ((FileNotFoundError, oe.NotFoundError), NO_OBJECT),
        ((PermissionError, oe.PermissionDeniedError), "access denied"),
        ((oe.UnauthenticatedError,), "not authenticated (no or wrong credentials)"),
        ((oe.UnknownConfigurationKeyError,), CONFIGURATION),
    )


_SERVER_CODES = (  # what a store's own error code adds to a class (obstore passes it on in the message only)
    (r"NoSuchBucket|ContainerNotFound|bucket does not exist", NO_BUCKET),
    (r"InvalidAccessKeyId|unknown access key", "access denied: the access key is not known"),
    (
        r"SignatureDoesNotMatch|AuthenticationFailed|InvalidSignature",
        "access denied: bad signature (wrong secret key?)",
    ),
    (r"ExpiredToken|token.*expired", "access denied: the credentials have expired"),
)
_UNCLASSED = (  # failures obstore raises as a GenericError: the HTTP status or transport it reports
    (r"AccessDenied|status code: 403|Forbidden", "access denied"),
    (r"status code: 401|Unauthorized", "not authenticated (no or wrong credentials)"),
    (r"status code: 404|NoSuchKey|BlobNotFound", NO_OBJECT),
    (r"status code: 416|InvalidRange|non-partial response", UNSATISFIABLE),
    (r"timed out|TimedOut", "timed out"),
    (r"error sending request|Connect|connection refused|dns error", "cannot connect"),
    (r"status code: (5\d\d)", "the server kept failing"),
    (r"builder error|Configuration key|must be specified", CONFIGURATION),
)


def _matched(patterns: tuple[tuple[str, str], ...], text: str) -> str | None:
    return next((cause for pattern, cause in patterns if re.search(pattern, text, re.I)), None)


def describe(exc: BaseException, url: str) -> ObjectStoreError:
    """One line naming ``url`` and the cause, for an obstore error (which spans many lines): the cause by
    the exception's class, made precise by the store's error code; for a generic error, the status or
    transport failure it reports."""
    text = str(exc).split("Debug source:")[0]  # the dump after it names every setting, timeouts included
    first = text.strip().splitlines()[0][:200] if text.strip() else type(exc).__name__
    classed = next((cause for classes, cause in _by_class() if isinstance(exc, classes)), None)
    cause = _matched(_SERVER_CODES, text) or classed or _matched(_UNCLASSED, text)
    if cause is None:
        return ObjectStoreError(f"{url}: {first}", None)
    return ObjectStoreError(f"{url}: {cause}: {first}" if cause == CONFIGURATION else f"{url}: {cause}", cause)


def is_missing(exc: BaseException) -> bool:
    """True when ``exc`` is obstore's "not found" and says the object is absent (not the bucket)."""
    missing_classes = _by_class()[0][0]
    return isinstance(exc, missing_classes) and describe(exc, "").cause == NO_OBJECT


_PIECE = 1 << 20  # bytes a body streams in


def get_bounded(store, key: str, options: dict[str, Any], want: int, url: str) -> tuple[dict, tuple[int, int], bytes]:
    """One GET of ``key``: (object meta, byte range sent, body). A body longer than ``want`` bytes is
    refused as it streams in; a failed precondition (``if_match``, ``if_unmodified_since``) raises
    :class:`ObjectChanged`, a missing object :class:`ObjectMissing`, any other failure a one-line ZSError
    naming ``url``."""
    import obstore

    try:
        result = obstore.get(store, key, options=options)
        meta, sent = result.meta, result.range
        parts, received = [], 0
        for piece in result.stream(min_chunk_size=_PIECE):
            received += len(piece)
            if received > want:
                raise ZSError(f"{url}: the server sent more than the {want} bytes asked for")
            parts.append(bytes(piece))
    except ZSError:
        raise
    except Exception as exc:
        from obstore import exceptions as oe

        if isinstance(exc, (oe.PreconditionError, oe.NotModifiedError)):
            raise ObjectChanged(f"{url}: changed (a precondition failed)") from None
        if is_missing(exc):
            raise ObjectMissing(f"{url}: no such object") from None
        raise describe(exc, url) from None
    return meta, (int(sent[0]), int(sent[1])), b"".join(parts)


class ObjectChanged(ZSCorrupt):
    """An object is no longer the version a read insisted on (its ETag or modification time)."""
