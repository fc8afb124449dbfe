"""Bad input at the HTTP layer: 413, 431, malformed request lines, unknown routes, admin token (SPEC §5, §7)."""

from __future__ import annotations

import json
import socket
import time

import pytest
from conftest import API_KEY, APP_ID, algolia_config
from harness import raw_exchange, request, status_of

HEADERS = {"X-Algolia-Application-Id": APP_ID, "X-Algolia-API-Key": API_KEY, "Content-Type": "application/json"}


@pytest.fixture
def small_body_gateway(gateway_factory, fake_algolia):
    return gateway_factory(deep(algolia_config(fake_algolia.url), {"server": {"maxBodySize": "1KiB"}}))


def deep(a, b):
    from harness import deep_merge

    return deep_merge(a, b)


def healthy(gw) -> bool:
    st, _, _ = request("GET", gw.url("/_mirrorgate/health"), headers=gw.admin_headers(), timeout=5)
    return st == 200


def test_413_on_content_length(small_body_gateway, fake_algolia):
    gw = small_body_gateway
    body = b'{"query":"' + b"a" * 2048 + b'"}'
    st, _, data = request("POST", gw.url("/1/indexes/i/query"), body=body, headers=HEADERS)
    assert st == 413, data[:200]
    assert fake_algolia.requests("/1/indexes/i/query") == [], "an oversized body must not be forwarded"
    # a body just under the limit passes
    ok = b'{"query":"' + b"a" * 900 + b'"}'
    st, _, _ = request("POST", gw.url("/1/indexes/i/query"), body=ok, headers=HEADERS)
    assert st == 200
    assert healthy(gw)


def test_413_on_content_length_before_body_is_sent(small_body_gateway):
    """The 413 comes from the header alone: send headers announcing 1 MiB and no body at all."""
    gw = small_body_gateway
    head = (
        "POST /1/indexes/i/query HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        "Content-Length: 1048576\r\n\r\n"
    ).encode()
    raw = raw_exchange(gw.port, head, timeout=5)
    assert status_of(raw) == 413, raw[:300]


def test_413_on_chunked_upload(small_body_gateway, fake_algolia):
    """Chunks past the limit get 413 as soon as it is exceeded; the client watches for the early answer
    while it sends (as curl does), since the server may close before the upload ends."""
    import select

    gw = small_body_gateway
    s = socket.create_connection(("127.0.0.1", gw.port), timeout=5)
    got = b""
    sent = 0
    try:
        s.sendall(
            b"POST /1/indexes/i/query HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n"
        )
        chunk = b"x" * 512
        deadline = time.monotonic() + 5
        for _ in range(64):  # up to 32 KiB, far beyond the 1 KiB limit
            if time.monotonic() > deadline or b"\r\n\r\n" in got:
                break
            try:
                s.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                sent += len(chunk)
            except OSError:
                break
            r, _, _ = select.select([s], [], [], 0.02)
            if r:
                try:
                    c = s.recv(65536)
                except OSError:
                    break
                if not c:
                    break
                got += c
        if b"\r\n\r\n" not in got:
            try:
                s.sendall(b"0\r\n\r\n")
            except OSError:
                pass
            s.settimeout(5)
            for _ in range(100):
                try:
                    c = s.recv(65536)
                except (socket.timeout, OSError):
                    break
                if not c:
                    break
                got += c
                if b"\r\n\r\n" in got:
                    break
    finally:
        s.close()
    assert status_of(got) == 413, f"after {sent} body bytes: {got[:300]!r}"
    assert all(len(r.body) <= 1024 for r in fake_algolia.requests()), "no oversized body may reach the upstream"
    assert healthy(gw)


def test_431_on_huge_header(algolia_gateway):
    gw = algolia_gateway
    st, _, _ = request("GET", gw.url("/_mirrorgate/health"), headers={"X-Huge": "h" * 70_000}, timeout=10)
    assert st == 431
    assert healthy(gw)


def test_431_on_many_headers(algolia_gateway):
    gw = algolia_gateway
    hdrs = {f"X-H{i}": "v" * 100 for i in range(1000)}
    st, _, _ = request("GET", gw.url("/_mirrorgate/health"), headers=hdrs, timeout=10)
    assert st == 431
    assert healthy(gw)


@pytest.mark.parametrize(
    "line",
    [
        b"GET /a b c HTTP/1.1 extra\r\nHost: x\r\n\r\n",
        b"GET / HTTP/1.1\r\nNo colon header line\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n",
    ],
)
def test_malformed_request_gets_400_and_server_stays_up(algolia_gateway, line):
    gw = algolia_gateway
    raw = raw_exchange(gw.port, line, timeout=5)
    st = status_of(raw)
    assert st == 400, f"{line!r} -> {raw[:200]!r}"
    assert healthy(gw)


@pytest.mark.parametrize(
    "line",
    [b"GARBAGE\r\n\r\n", b"GET\r\n\r\n", b"\x00\x01\x02\x03\r\n\r\n", b"\r\n" * 50 + b"\xff\xfe\r\n\r\n"],
)
def test_unparseable_request_line_is_refused_and_server_stays_up(gateway_factory, fake_algolia, line):
    """A request line without a URI: libmicrohttpd 0.9.75 closes such connections without an answer
    (it cannot tell what protocol the peer speaks), or keeps them until `requestTimeout`; a 400 is also
    fine. Never a hang beyond requestTimeout, never a crash."""
    gw = gateway_factory(deep(algolia_config(fake_algolia.url), {"server": {"requestTimeout": "2s"}}))
    t0 = time.monotonic()
    raw = raw_exchange(gw.port, line, timeout=6)
    assert time.monotonic() - t0 < 2 + 2, "the connection must not outlive requestTimeout"
    assert raw == b"" or status_of(raw) == 400, f"{line!r} -> {raw[:200]!r}"
    assert healthy(gw)


def test_bad_http_version_is_rejected(algolia_gateway):
    gw = algolia_gateway
    raw = raw_exchange(gw.port, b"GET / HTTP/9.9\r\nHost: x\r\n\r\n", timeout=5)
    assert status_of(raw) in (400, 505), raw[:200]
    assert healthy(gw)


def test_client_that_vanishes_midway_does_not_hurt(algolia_gateway, fake_algolia):
    gw = algolia_gateway
    for _ in range(20):
        s = socket.create_connection(("127.0.0.1", gw.port), timeout=2)
        s.sendall(b"POST /1/indexes/i/query HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"qu")
        s.close()
    assert healthy(gw)
    st, _, _ = request("POST", gw.url("/1/indexes/i/query"), body=b"{}", headers=HEADERS)
    assert st == 200


@pytest.mark.parametrize("path", ["/nope", "/_mirrorgate/nope", "/2/indexes/x"])
def test_unknown_route_is_json_404(algolia_gateway, fake_algolia, path):
    st, hdrs, body = request("GET", algolia_gateway.url(path))
    assert st == 404
    assert "json" in hdrs.get("content-type", ""), hdrs
    doc = json.loads(body)
    assert isinstance(doc, dict) and ("message" in doc or "error" in doc), doc
    assert not [r for r in fake_algolia.requests() if r.path == path], "unknown routes are not forwarded"


def test_unknown_algolia_path_is_forwarded(algolia_gateway, fake_algolia):
    """Everything under /1/ that the gateway does not answer itself goes to the upstream."""
    st, _, body = request("GET", algolia_gateway.url("/1/keys"), headers=HEADERS)
    assert st == 404
    assert json.loads(body)["_upstream"] == fake_algolia.name


@pytest.fixture
def token_gateway(gateway_factory, fake_algolia):
    return gateway_factory(deep(algolia_config(fake_algolia.url), {"admin": {"token": "s3cret-token"}}))


@pytest.mark.parametrize("path", ["/_mirrorgate/status", "/_mirrorgate/health"])
def test_admin_token_enforced(token_gateway, path):
    gw = token_gateway
    st, _, body = request("GET", gw.url(path))
    assert st == 401, body[:200]
    st, _, _ = request("GET", gw.url(path), headers={"Authorization": "Bearer wrong"})
    assert st == 401
    st, _, _ = request("GET", gw.url(path), headers={"Authorization": "s3cret-token"})
    assert st == 401, "the scheme must be Bearer"
    st, _, body = request("GET", gw.url(path), headers={"Authorization": "Bearer s3cret-token"})
    assert st == 200, body[:200]


def test_admin_token_does_not_leak_into_logs(token_gateway):
    gw = token_gateway
    request("GET", gw.url("/_mirrorgate/status"), headers={"Authorization": "Bearer s3cret-token"})
    request("GET", gw.url("/_mirrorgate/status"), headers={"Authorization": "Bearer wrong-guess"})
    time.sleep(0.2)
    log = gw.stderr() + gw.stdout_path.read_text(errors="replace")
    assert "s3cret-token" not in log
    assert "wrong-guess" not in log


def test_api_key_does_not_leak_into_logs(algolia_gateway):
    gw = algolia_gateway
    request("POST", gw.url("/1/indexes/i/query"), body=b"{}", headers=HEADERS)
    request("GET", gw.url(f"/1/indexes/i/settings?x-algolia-api-key={API_KEY}&x-algolia-application-id={APP_ID}"))
    time.sleep(0.2)
    log = gw.stderr() + gw.stdout_path.read_text(errors="replace")
    assert API_KEY not in log
    assert "/1/indexes/i/query" in log, "there must be an access-log line per request"


def test_slow_headers_are_cut_at_request_timeout(gateway_factory, fake_algolia):
    """A client that never finishes its headers is disconnected after requestTimeout (slowloris)."""
    gw = gateway_factory(deep(algolia_config(fake_algolia.url), {"server": {"requestTimeout": "2s"}}))
    t0 = time.monotonic()
    raw = raw_exchange(gw.port, b"GET /_mirrorgate/health HTTP/1.1\r\nHost: x\r\nX-Slow: 1\r\n", timeout=8)
    secs = time.monotonic() - t0
    assert secs < 2 + 2, f"connection still open after {secs:.1f}s"
    assert raw == b"" or status_of(raw) in (400, 408), raw[:200]
    assert healthy(gw)


def test_max_connections(gateway_factory, fake_algolia):
    """Beyond server.maxConnections new connections are not served (refused, 503, or left in the
    listen backlog); the gateway serves again once the connections go."""
    gw = gateway_factory(deep(algolia_config(fake_algolia.url), {"server": {"maxConnections": 4}}))
    held = []
    try:
        for _ in range(8):
            s = socket.create_connection(("127.0.0.1", gw.port), timeout=2)
            s.sendall(b"GET /_mirrorgate/health HTTP/1.1\r\nHost: x\r\n")  # headers never finished
            held.append(s)
        time.sleep(0.3)
        refused = 0
        for _ in range(3):
            try:
                st, _, _ = request("GET", gw.url("/_mirrorgate/health"), timeout=1)
                if st == 503:
                    refused += 1
            except OSError:
                refused += 1
        assert refused == 3, "with every slot taken, a new connection must not be served"
    finally:
        for s in held:
            s.close()
    deadline = time.monotonic() + 5
    ok = False
    for _ in range(50):
        try:
            ok = healthy(gw)
        except OSError:
            ok = False
        if ok or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert ok, "the gateway must serve again once the connections are gone"
