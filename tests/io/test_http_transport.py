"""HTTPTransport against a real nginx (ranges, pinning, keep-alive) and a misbehaving server (faults)."""

from __future__ import annotations

import os
import ssl
import threading
import time

import pytest

from toolkit.servers import faulty_server, free_port, nginx_server  # noqa: F401
from zsarchive.errors import ZSCorrupt, ZSError
from zsarchive.io import ConnectionPool, HTTPTransport, ObjectTransport, open_transport
from zsarchive.io.location import parse_location
from zsarchive.io.remote import coalesce
from zsarchive.io.pinning import mismatch

DATA = os.urandom(300_000)


@pytest.fixture(scope="module")
def served(nginx_server):
    """nginx with a 300 kB random file ``data.bin`` and an empty file ``empty.bin``."""
    (nginx_server.root / "data.bin").write_bytes(DATA)
    (nginx_server.root / "empty.bin").write_bytes(b"")
    (nginx_server.root / "forbidden" / "secret.bin").write_bytes(b"x")
    return nginx_server


def test_open_transport_picks_http(served):
    transport = open_transport(served.url("data.bin"))
    assert isinstance(transport, HTTPTransport)
    transport.close()


def test_a_shared_pool_carries_keep_alive_connections_from_one_transport_to_the_next(served):
    pool = ConnectionPool(served.url("data.bin"))
    mark = served.mark()
    for name, want in (("data.bin", DATA[:100]), ("empty.bin", b""), ("data.bin", DATA[:100])):
        transport = HTTPTransport(served.url(name), pool=pool)
        assert transport.read_head_tail(100, 0)[0] == want
        transport.close()  # leaves the pool's connections open
    logged = served.requests_since(mark)
    assert len(logged) == 3 and len({line.connection for line in logged}) == 1
    assert transport.stats.connections == 0  # the last one found an idle connection
    pool.close()
    with pytest.raises(ZSError, match="connection pool given is for another host"):
        HTTPTransport(f"http://127.0.0.1:{free_port()}/data.bin", pool=pool)


def test_read_once_is_one_request_without_opening_first(served):
    transport = HTTPTransport(served.url("data.bin"))
    mark = served.mark()
    assert transport.read_once(250_000, 1000) == DATA[250_000:251_000]
    assert transport.read_once(len(DATA) - 10, 1000) == DATA[-10:]  # the object ends sooner
    assert transport.read_once(len(DATA) + 5, 1000) == b""  # ... or before the range (416)
    assert transport.read_once(7, 0) == b""
    logged = served.requests_since(mark)
    assert [(line.range, line.status) for line in logged] == [
        ("bytes=250000-250999", 206),
        (f"bytes={len(DATA) - 10}-{len(DATA) + 989}", 206),
        (f"bytes={len(DATA) + 5}-{len(DATA) + 1004}", 416),
    ]
    transport.close()


def test_head_tail_are_two_concurrent_requests_and_learn_the_size(served):
    mark = served.mark()
    with_transport = HTTPTransport(served.url("data.bin"))
    head, tail = with_transport.read_head_tail(1000, 5000)
    assert head == DATA[:1000] and tail == DATA[-5000:]
    assert with_transport.size == len(DATA)
    logged = served.requests_since(mark)
    assert sorted(line.range for line in logged) == ["bytes=-5000", "bytes=0-999"]
    assert all(line.status == 206 for line in logged)
    # the two went out together, so they used two connections of the pool
    assert len({line.connection for line in logged}) == 2
    assert with_transport.stats.requests == 2 and with_transport.stats.bytes == 6000
    with_transport.close()


def test_each_read_is_exactly_one_request_of_exactly_that_range(served):
    transport = HTTPTransport(served.url("data.bin"))
    transport.read_head_tail(100, 100)
    mark = served.mark()
    assert transport.read(12345, 678) == DATA[12345 : 12345 + 678]
    assert transport.read(250_000, 49_900) == DATA[250_000:299_900]
    assert transport.read(10, 20) == DATA[10:30]  # inside the head already held: no request
    assert transport.read(len(DATA) - 50, 50) == DATA[-50:]  # inside the tail
    logged = served.requests_since(mark)
    assert [line.range for line in logged] == ["bytes=12345-13022", "bytes=250000-299899"]
    assert [line.bytes_sent for line in logged] == [678, 49_900]
    assert transport.stats.requests == 4
    transport.close()


def test_keep_alive_reuses_one_connection_and_pins_with_if_match(served):
    transport = HTTPTransport(served.url("data.bin"))
    transport.read_head_tail(0, 0)
    mark = served.mark()
    for i in range(20):
        assert transport.read(i * 1000 + 500, 700) == DATA[i * 1000 + 500 : i * 1000 + 1200]
    logged = served.requests_since(mark)
    assert len(logged) == 20
    assert len({line.connection for line in logged}) == 1
    etag = logged[0].if_match
    assert etag.startswith('"') and all(line.if_match == etag for line in logged)
    transport.close()


def test_size_alone_costs_one_small_request(served):
    transport = HTTPTransport(served.url("data.bin"))
    mark = served.mark()
    assert transport.size == len(DATA)
    assert [line.range for line in served.requests_since(mark)] == ["bytes=0-0"]
    transport.close()


def test_read_past_the_end_is_corrupt_without_a_request(served):
    transport = HTTPTransport(served.url("data.bin"))
    transport.read_head_tail(10, 10)
    mark = served.mark()
    with pytest.raises(ZSCorrupt, match="runs past the end"):
        transport.read(len(DATA) - 10, 11)
    assert served.requests_since(mark) == []
    transport.close()


def test_read_ranges_coalesces_near_ranges_into_one_request(served):
    transport = HTTPTransport(served.url("data.bin"))
    transport.read_head_tail(0, 0)
    ranges = [(20_000 + i * 1000, 900) for i in range(30)] + [(250_000, 10), (150_000, 10)]
    mark = served.mark()
    assert transport.read_ranges(ranges) == [DATA[o : o + n] for o, n in ranges]
    logged = served.requests_since(mark)
    assert sorted(line.range for line in logged) == ["bytes=150000-150009", "bytes=20000-49899", "bytes=250000-250009"]
    transport.close()


def test_coalesce_respects_gap_and_limit():
    runs = coalesce([(0, 10), (15, 5), (100, 10), (112, 50)], gap=5, limit=40)
    assert [(run.start, run.length, run.members) for run in runs] == [(0, 20, (0, 1)), (100, 10, (2,)), (112, 50, (3,))]


def test_many_threads_share_one_transport(served):
    transport = HTTPTransport(served.url("data.bin"), max_connections=4)
    transport.read_head_tail(0, 0)
    errors = []

    def work(seed: int) -> None:
        for i in range(25):
            offset = (seed * 7919 + i * 104_729) % (len(DATA) - 5000)
            if transport.read(offset, 5000) != DATA[offset : offset + 5000]:
                errors.append((seed, i))

    threads = [threading.Thread(target=work, args=(seed,)) for seed in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert transport.stats.requests == 1 + 6 * 25
    transport.close()


def test_https_with_the_servers_certificate(served):
    context = ssl.create_default_context(cafile=str(served.certificate))
    transport = HTTPTransport(served.https_url("data.bin"), ssl_context=context)
    head, tail = transport.read_head_tail(100, 100)
    assert head == DATA[:100] and tail == DATA[-100:]
    assert transport.read_ranges([(1000, 10), (200_000, 5)]) == [DATA[1000:1010], DATA[200_000:200_005]]
    transport.close()


def test_https_with_an_untrusted_certificate_is_a_clear_error(served):
    url = served.https_url("data.bin")
    transport = HTTPTransport(url, backoff=0.01)
    with pytest.raises(ZSError) as caught:
        transport.read_head_tail(100, 100)
    assert str(caught.value) == (f"{url}: cannot connect: TLS certificate not trusted (self-signed certificate)")
    assert transport.stats.retries == 0


def test_forbidden_file_is_one_line_naming_url_and_status(served):
    url = served.url("forbidden/secret.bin")
    with pytest.raises(ZSError) as caught:
        HTTPTransport(url).read_head_tail(10, 10)
    assert str(caught.value) == f"{url}: HTTP 403 Forbidden"


def test_a_replaced_file_is_refused_by_nginx_with_412(served):
    """The transport pins the ETag with If-Match; nginx answers a changed file with 412."""
    path = served.root / "changing.bin"
    path.write_bytes(DATA)
    transport = HTTPTransport(served.url("changing.bin"))
    transport.read_head_tail(100, 100)
    mark = served.mark()
    assert transport.read(1000, 10) == DATA[1000:1010]
    [read] = served.requests_since(mark)
    pinned = read.if_match
    assert (read.status, pinned.startswith('"')) == (206, True)
    # same length, new content: only the ETag (mtime-based in nginx) tells; nginx refuses If-Match
    path.write_bytes(DATA[::-1])
    later = time.time() + 5
    os.utime(path, (later, later))
    mark = served.mark()
    with pytest.raises(ZSCorrupt, match=r"changing\.bin: file changed while reading \(HTTP 412"):
        transport.read(2000, 10)
    refused = served.requests_since(mark)
    assert [(line.range, line.status, line.if_match) for line in refused] == [("bytes=2000-2009", 412, pinned)]
    transport.close()


def test_nothing_listening_is_a_clear_error():
    url = f"http://127.0.0.1:{free_port()}/x.zs"
    with pytest.raises(ZSError, match=r"cannot connect: .*gave up after 2 attempts"):
        HTTPTransport(url, retries=1, backoff=0.01).read_head_tail(10, 10)


def test_not_an_http_url():
    with pytest.raises(ZSError, match="not an http"):
        HTTPTransport("ftp://example/x")


# --- faults: our own misbehaving server ----------------------------------------------------------


def _transport(server, name="f.zs", **options):
    options.setdefault("backoff", 0.01)
    return HTTPTransport(server.url(name), **options)


def test_connection_dropped_mid_body_is_retried(faulty_server):
    faulty_server.files["f.zs"] = DATA
    transport = _transport(faulty_server)
    transport.read_head_tail(0, 0)
    faulty_server.faults.extend(["drop", "drop"])
    assert transport.read(1000, 100_000) == DATA[1000:101_000]
    assert transport.stats.retries == 2
    assert [seen.range for seen in faulty_server.seen[-3:]] == ["bytes=1000-100999"] * 3
    transport.close()


def test_short_body_is_retried(faulty_server):
    faulty_server.files["f.zs"] = DATA
    transport = _transport(faulty_server)
    faulty_server.faults.extend(["short"])
    head, tail = transport.read_head_tail(50_000, 0)
    assert head == DATA[:50_000]
    assert transport.stats.retries == 1
    transport.close()


def test_server_closing_an_idle_connection_costs_a_reconnect_not_a_retry(faulty_server):
    faulty_server.files["f.zs"] = DATA
    transport = _transport(faulty_server)
    transport.read_head_tail(0, 0)
    faulty_server.faults.extend(["close-after", "close-after"])
    assert transport.read(10, 10) == DATA[10:20]
    assert transport.read_ranges([(100, 10), (200_000, 10)]) == [DATA[100:110], DATA[200_000:200_010]]
    assert transport.read(30, 10) == DATA[30:40]
    assert transport.stats.retries == 0
    assert transport.stats.connections >= 2
    transport.close()


def test_an_error_inside_a_batch_leaves_the_pool_usable(faulty_server):
    faulty_server.files["f.zs"] = DATA
    transport = _transport(faulty_server, retries=0)
    transport.read_head_tail(0, 0)
    faulty_server.faults.extend([None, "503"])
    with pytest.raises(ZSError, match="HTTP 503"):
        transport.read_ranges([(100, 10), (200_000, 10), (100_000, 10)])
    assert transport.read_ranges([(100, 10), (200_000, 10)]) == [DATA[100:110], DATA[200_000:200_010]]
    transport.close()


def test_503_then_success(faulty_server):
    faulty_server.files["f.zs"] = DATA
    transport = _transport(faulty_server)
    transport.read_head_tail(0, 0)
    faulty_server.faults.extend(["503", "503"])
    assert transport.read(7, 70) == DATA[7:77]
    assert [seen.status for seen in faulty_server.seen[-3:]] == [503, 503, 206]
    transport.close()


def test_persistent_503_gives_up_with_the_status(faulty_server):
    faulty_server.files["f.zs"] = DATA
    transport = _transport(faulty_server, retries=2)
    transport.read_head_tail(0, 0)
    faulty_server.faults.extend(["503"] * 3)
    with pytest.raises(ZSError, match=r"f\.zs: HTTP 503 Service Unavailable \(gave up after 3 attempts\)"):
        transport.read(7, 70)
    transport.close()


@pytest.mark.parametrize("through", ["http", "s3"])
def test_file_replaced_is_caught_by_etag_even_if_the_server_ignores_if_match(faulty_server, through):
    """Also as an S3 endpoint (the same server, path = bucket/key) read through obstore: the answer's
    own ETag gives the new version away."""
    name = "bucket/f.zs"
    faulty_server.files[name] = DATA
    faulty_server.modified[name] = "Wed, 01 Jan 2025 00:00:00 GMT"  # obstore needs one
    faulty_server.honor_if_match = False
    if through == "http":
        transport = _transport(faulty_server, name)
    else:
        endpoint = f"http://127.0.0.1:{faulty_server.server_address[1]}"
        transport = ObjectTransport(
            parse_location("s3://" + name, {"endpoint": endpoint, "region": "us-east-1"}, anon=True)
        )
    transport.read_head_tail(10, 10)
    old = faulty_server.etag(name)
    faulty_server.files[name] = DATA[::-1]
    with pytest.raises(ZSCorrupt, match=f"file changed while reading \\(ETag was {old}, now"):
        transport.read(100, 10)
    transport.close()


def test_server_ignoring_range_small_file_is_read_once_and_sliced(faulty_server):
    faulty_server.files["f.zs"] = DATA
    faulty_server.always_ignore_range = True
    transport = _transport(faulty_server)
    head, tail = transport.read_head_tail(100, 200)
    assert head == DATA[:100] and tail == DATA[-200:] and transport.size == len(DATA)
    requests = len(faulty_server.seen)
    assert transport.read(5000, 123) == DATA[5000:5123]
    assert transport.read_ranges([(1, 2), (100_000, 3)]) == [DATA[1:3], DATA[100_000:100_003]]
    assert len(faulty_server.seen) == requests  # the whole body is held: no more requests
    transport.close()


def test_server_ignoring_range_for_a_large_file_is_refused(faulty_server):
    faulty_server.files["f.zs"] = DATA
    faulty_server.always_ignore_range = True
    transport = _transport(faulty_server, max_unranged=100_000)
    with pytest.raises(
        ZSError,
        match=r"f\.zs: the server ignores Range requests \(HTTP 200 with the "
        r"whole 300000 body\); refusing",
    ):
        transport.read_head_tail(100, 100)
    transport.close()


def test_slow_server_times_out_clearly_without_hanging(faulty_server):
    faulty_server.files["f.zs"] = DATA
    transport = _transport(faulty_server, read_timeout=0.3, retries=1)
    transport.read_head_tail(0, 0)
    faulty_server.faults.extend(["slow", "slow"])
    answered = len(faulty_server.seen)
    with pytest.raises(ZSError, match=r"f\.zs: no answer within 0\.3 s \(gave up after 2 attempts\)"):
        transport.read(0, 10_000)
    # the server logs a request only once it answers: the client gave up before either answer
    assert len(faulty_server.seen) == answered
    transport.close()


def test_one_slow_answer_is_retried(faulty_server):
    faulty_server.files["f.zs"] = DATA
    transport = _transport(faulty_server, read_timeout=0.3)
    transport.read_head_tail(0, 0)
    faulty_server.faults.extend(["slow"])
    assert transport.read(10, 10_000) == DATA[10:10_010]
    assert transport.stats.retries == 1
    transport.close()


def test_a_body_dripping_in_slower_than_min_rate_is_abandoned(faulty_server):
    faulty_server.files["f.zs"] = DATA
    transport = _transport(faulty_server, read_timeout=0.3, min_rate=100, retries=1)
    transport.read_head_tail(0, 0)
    faulty_server.faults.extend(["drip", "drip"])
    with pytest.raises(
        ZSError,
        match=r"f\.zs: the body came too slowly \((\d|[1-4]\d) of 50 bytes "
        r"after 0\.8 s\) \(gave up after 2 attempts\)",
    ):
        transport.read(0, 50)  # each byte beats the 0.3 s timeout, the whole needs 2.5 s
    transport.close()


@pytest.mark.parametrize(
    "fault, message",
    [
        ("huge-length", "announces a body of 419430400 bytes where at most 100 can be right"),
        ("wide-range", "asked for 100 bytes, the server answers with bytes 1000-419431399"),
        ("negative-length", "sent more than the 100 bytes that can be right"),
    ],
)
def test_a_body_larger_than_the_range_asked_for_is_refused_unread(faulty_server, fault, message):
    faulty_server.files["f.zs"] = DATA
    transport = _transport(faulty_server)
    transport.read_head_tail(0, 0)
    faulty_server.faults.append(fault)
    started = time.monotonic()
    with pytest.raises(ZSError, match=message):
        transport.read(1000, 100)
    assert time.monotonic() - started < 10
    assert transport.stats.bytes < 2 << 20  # at most the first pieces were read, never 400 MiB
    transport.close()


@pytest.mark.parametrize(
    "pinned_etag, pinned_time, etag, modified, wanted",
    [
        ('"a"', None, '"a"', None, None),
        ("a", None, 'W/"a"', None, None),
        ('W/"a"', None, "a", None, None),
        ("*", None, None, None, None),
        ('"a"', None, '"b"', None, "the answer's is \"b\""),
        ('"a"', None, None, 5, "carries none"),
        (None, 100, None, 100, None),
        (None, 100, None, 99, None),
        (None, 100, None, 101, "after the ref's checksum time"),
        (None, 100, '"x"', None, "no Last-Modified"),
        ('"a"', 100, '"a"', 101, "after the ref's checksum time"),
        ('"a"', 100, '"b"', 100, "the answer's is"),
        ('"a"', 100, '"a"', 100, None),
        (None, 2**62, None, 5, None),
    ],
)
def test_an_answer_is_the_pinned_version_only_if_it_says_so(pinned_etag, pinned_time, etag, modified, wanted):
    """ETag compared by opaque tag (a ref may pin it quoted, unquoted or weak), Last-Modified in seconds
    at or before the ref's time; a ref may pin either or both, and what it pins the answer must carry."""
    found = mismatch(pinned_etag, pinned_time, etag, modified)
    assert (found is None) if wanted is None else (wanted in found), found
