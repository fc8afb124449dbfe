"""Strict HTTP/1.1 framing (RFC 9112) and slow clients, with raw sockets (issue 19, D6 and D9).

Framing: a request with both Content-Length and Transfer-Encoding, two different Content-Lengths, a NUL
or a bare CR in a header, obs-fold, whitespace before a colon, a control character in the target, two
Host headers or none (HTTP/1.1) gets 400 and the connection is closed (a pipelined request behind it is
never served); `chunked` not the final transfer coding gets 400 and an unknown coding before it 501, at
once; a chunked body is cut with 413 as soon as it passes `maxBodySize`, not after its last chunk; a TLS
ClientHello on the plain port is closed at once.

Slow clients: the head must arrive within `requestTimeout` however steadily it trickles, the body within
`requestTimeout` of the request line (408), and a slowloris of maxConnections + 100 connections from one
address does not keep a client at another address from being answered. Every test ends with the gateway
answering its health check.
"""

from __future__ import annotations

import json
import os
import re
import select
import socket
import ssl
import threading
import time

import pytest
from conftest import API_KEY, APP_ID, algolia_config
from harness import deep_merge, request, status_of

HEALTH = b"GET /_mirrorgate/health HTTP/1.1\r\nHost: x\r\n\r\n"
ALGOLIA = f"X-Algolia-Application-Id: {APP_ID}\r\nX-Algolia-API-Key: {API_KEY}\r\n".encode()


def healthy(gw) -> bool:
    st, _, _ = request("GET", gw.url("/_mirrorgate/health"), timeout=5)
    return st == 200


def converse(port: int, payload: bytes, wait: float = 5.0, src: str | None = None) -> tuple[bytes, bool, float]:
    """Sends `payload` and reads until the gateway closes the connection or `wait` passes.
    Returns (bytes read, whether the gateway closed, seconds until then)."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if src:
        s.bind((src, 0))
    s.settimeout(wait)
    t0 = time.monotonic()
    s.connect(("127.0.0.1", port))
    got = b""
    closed = False
    try:
        try:
            s.sendall(payload)
        except OSError:
            pass
        for _ in range(10_000):
            left = t0 + wait - time.monotonic()
            if left <= 0:
                break
            s.settimeout(left)
            try:
                chunk = s.recv(65536)
            except socket.timeout:
                break
            except OSError:  # a reset is a close too
                closed = True
                break
            if not chunk:
                closed = True
                break
            got += chunk
    finally:
        s.close()
    return got, closed, time.monotonic() - t0


def body_of(raw: bytes) -> bytes:
    return raw.partition(b"\r\n\r\n")[2]


def status_lines(raw: bytes) -> int:
    """How many responses `raw` holds (their status lines; no body here contains one)."""
    return len(re.findall(rb"HTTP/1\.[01] \d{3} ", raw))


@pytest.fixture
def gw(gateway_factory, fake_algolia):
    return gateway_factory(
        deep_merge(algolia_config(fake_algolia.url), {"server": {"maxBodySize": "1KiB", "requestTimeout": "3s"}})
    )


def assert_refused(gw, payload: bytes, status: int) -> bytes:
    raw, closed, secs = converse(gw.port, payload, wait=5)
    assert status_of(raw) == status, f"{payload!r} -> {raw[:300]!r}"
    assert closed and secs < 3, f"the connection must be closed after the {status} (closed={closed}, {secs:.1f}s)"
    assert status_lines(raw) == 1, f"a request behind the refused one was served: {raw!r}"
    assert healthy(gw)
    return raw


# -- D9: framing -------------------------------------------------------------------------------------


def test_content_length_and_transfer_encoding_get_400_and_close(gw, fake_algolia):
    """Both headers: 400, and the pipelined request behind the body is never served (RFC 9112 §6.3)."""
    payload = (
        b"POST /1/indexes/i/query HTTP/1.1\r\nHost: x\r\n" + ALGOLIA + b"Content-Length: 5\r\n"
        b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n" + HEALTH
    )
    raw = assert_refused(gw, payload, 400)
    doc = json.loads(body_of(raw))
    assert doc["status"] == 400 and "Transfer-Encoding" in doc["message"], doc  # Algolia's error format
    assert fake_algolia.requests("/1/indexes/i/query") == [], "an ambiguously framed request must not be forwarded"


def test_two_different_content_lengths_get_400(gw, fake_algolia):
    payload = (
        b"POST /1/indexes/i/query HTTP/1.1\r\nHost: x\r\n" + ALGOLIA + b"Content-Length: 2\r\n"
        b"Content-Length: 7\r\n\r\n{}" + HEALTH
    )
    assert_refused(gw, payload, 400)
    assert fake_algolia.requests("/1/indexes/i/query") == []


def test_repeated_equal_content_length_is_one_length(gw, fake_algolia):
    """The same value twice frames the body unambiguously (RFC 9110 §8.6 allows taking it as one)."""
    payload = (
        b"POST /1/indexes/i/query HTTP/1.1\r\nHost: x\r\n" + ALGOLIA + b"Content-Length: 2\r\n"
        b"Content-Length: 2\r\nConnection: close\r\n\r\n{}"
    )
    raw, _, _ = converse(gw.port, payload)
    assert status_of(raw) == 200, raw[:300]


@pytest.mark.parametrize(
    "field",
    [
        pytest.param(b"X-Note: a\x00b", id="nul-in-value"),
        pytest.param(b"X-Note: a\rb", id="bare-cr-in-value"),
        pytest.param(b"X-Note: a\rX-Other: b", id="bare-cr-splitting-a-field"),
        pytest.param(b"X-Note: a\r\r\nX-Other: b", id="bare-cr-before-crlf"),
        pytest.param(b"X-Note: a\r\n folded", id="obs-fold"),
        pytest.param(b"X-Note : a", id="space-before-colon"),
    ],
)
def test_malformed_header_field_gets_400(gw, field):
    payload = b"GET /_mirrorgate/health HTTP/1.1\r\nHost: x\r\n" + field + b"\r\nX-Last: 1\r\n\r\n" + HEALTH
    assert_refused(gw, payload, 400)


def test_nul_in_last_header_field_gets_400(gw):
    assert_refused(gw, b"GET /_mirrorgate/health HTTP/1.1\r\nHost: x\r\nX-Note: a\x00b\r\n\r\n", 400)


def test_control_character_in_target_gets_400(gw):
    assert_refused(gw, b"GET /_mirrorgate/health\x01x HTTP/1.1\r\nHost: x\r\n\r\n", 400)
    assert_refused(gw, b"GET /_mirrorgate/he alth HTTP/1.1\r\nHost: x\r\n\r\n", 400)


def test_two_host_headers_get_400(gw):
    assert_refused(gw, b"GET /_mirrorgate/health HTTP/1.1\r\nHost: x\r\nHost: y\r\n\r\n" + HEALTH, 400)


def test_http11_without_host_gets_400(gw):
    raw = assert_refused(gw, b"GET /_mirrorgate/health HTTP/1.1\r\nAccept: */*\r\n\r\n" + HEALTH, 400)
    assert b"Host" in body_of(raw)


def test_http10_without_host_is_served(gw):
    raw, _, _ = converse(gw.port, b"GET /_mirrorgate/health HTTP/1.0\r\n\r\n")
    assert status_of(raw) == 200, raw[:300]


def test_wellformed_requests_on_one_connection_are_all_served(gw, fake_algolia):
    """The checks refuse only what RFC 9112 refuses: three well-formed pipelined requests on one
    connection are all answered."""
    body = b'{"query":"a"}'
    payload = (
        HEALTH
        + b"POST /1/indexes/i/query HTTP/1.1\r\nHost: x\r\n" + ALGOLIA
        + b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)
        + b"GET /_mirrorgate/health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    raw, closed, _ = converse(gw.port, payload)
    assert status_lines(raw) == 3 and raw.count(b" 200 ") == 3, raw[:600]
    assert closed


@pytest.mark.parametrize(
    "coding,status",
    [(b"gzip, chunked", 501), (b"foo, chunked", 501), (b"gzip", 400), (b"foo", 400), (b"identity", 400)],
)
def test_unknown_transfer_coding_gets_501_and_chunked_not_final_400_at_once(gw, coding, status):
    """RFC 9112 §6.3: without a final chunked the length cannot be known (400); an unknown coding before
    a final chunked is one the server does not implement (501, §6.1)."""
    payload = b"POST /_mirrorgate/algolia/indices/i/sync HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: " + coding + b"\r\n\r\n"
    raw, closed, secs = converse(gw.port, payload, wait=5)
    assert status_of(raw) == status, f"{coding!r} -> {raw[:300]!r}"
    assert closed and secs < 2, f"closed={closed} after {secs:.1f}s"
    assert healthy(gw)


def test_unknown_transfer_coding_under_algolia_gets_its_unavailable_status(gw, fake_algolia):
    """Under /1/ the gateway never answers 5xx (SPEC: `unavailableStatus`, 424 by default), so the 501
    arrives as Algolia's error with that status, at once."""
    payload = b"POST /1/indexes/i/query HTTP/1.1\r\nHost: x\r\n" + ALGOLIA + b"Transfer-Encoding: gzip, chunked\r\n\r\n"
    raw, closed, secs = converse(gw.port, payload, wait=5)
    assert status_of(raw) == 424, raw[:300]
    doc = json.loads(body_of(raw))
    assert doc["status"] == 424 and "gzip" in doc["message"], doc
    assert closed and secs < 2
    assert fake_algolia.requests("/1/indexes/i/query") == []
    assert healthy(gw)


@pytest.mark.parametrize("coding", [b"chunked, chunked", b"chunked\r\nTransfer-Encoding: chunked"])
def test_chunked_twice_gets_400(gw, coding):
    payload = b"POST /1/indexes/i/query HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: " + coding + b"\r\n\r\n0\r\n\r\n"
    raw, closed, secs = converse(gw.port, payload, wait=5)
    assert status_of(raw) == 400, raw[:300]
    assert closed and secs < 2
    assert healthy(gw)


def test_chunked_body_is_cut_with_413_before_its_last_chunk(gw, fake_algolia):
    """1.5 KiB of chunks against a 1 KiB limit and no last chunk: the 413 comes anyway, at once."""
    s = socket.create_connection(("127.0.0.1", gw.port), timeout=5)
    got = b""
    t0 = time.monotonic()
    try:
        s.sendall(
            b"POST /1/indexes/i/query HTTP/1.1\r\nHost: x\r\n" + ALGOLIA
            + b"Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
        )
        for _ in range(3):
            s.sendall(b"200\r\n" + b"x" * 512 + b"\r\n")
        for _ in range(100):  # the last chunk is never sent: read until the gateway closes, at most 4 s
            left = t0 + 4 - time.monotonic()
            if left <= 0:
                break
            r, _, _ = select.select([s], [], [], left)
            if not r:
                break
            try:
                chunk = s.recv(65536)
            except OSError:
                break
            if not chunk:
                break
            got += chunk
    finally:
        s.close()
    assert status_of(got) == 413, got[:300]
    assert time.monotonic() - t0 < 3
    assert json.loads(body_of(got))["status"] == 413, got
    assert fake_algolia.requests("/1/indexes/i/query") == []
    assert healthy(gw)


def client_hello() -> bytes:
    """A real TLS ClientHello (fresh random bytes each time), as Python's client sends it."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    tls = ctx.wrap_bio(incoming, outgoing, server_hostname=None)
    with pytest.raises(ssl.SSLWantReadError):
        tls.do_handshake()
    hello = outgoing.read()
    assert hello[:1] == b"\x16", hello[:8]
    return hello


def minimal_client_hello() -> bytes:
    """A TLS 1.2 ClientHello without extensions (valid per RFC 5246 §7.4.1.2, as minimal clients send
    it): one cipher suite, no compression, and no LF anywhere, so that a line parser waiting for the end
    of its "request line" would hold it until a timeout."""
    rnd = bytes(b for b in os.urandom(64) if b not in (0x0A, 0x0D))[:32]
    body = b"\x03\x03" + rnd + b"\x00" + b"\x00\x02\x00\x2f" + b"\x01\x00"
    handshake = b"\x01" + len(body).to_bytes(3, "big") + body
    hello = b"\x16\x03\x01" + len(handshake).to_bytes(2, "big") + handshake
    assert len(rnd) == 32 and b"\n" not in hello
    return hello


def test_tls_client_hello_on_the_plain_port_is_closed_at_once(gw):
    """A hello without a line end (which a line parser would hold until requestTimeout) and full ones
    (which it may take apart as junk) are all closed at once."""
    for hello in [minimal_client_hello() for _ in range(3)] + [client_hello() for _ in range(3)]:
        raw, closed, secs = converse(gw.port, hello, wait=5)
        assert closed and secs < 1.5, f"a TLS hello was held {secs:.1f}s (closed={closed})"
        assert raw == b"" or status_of(raw) == 400, raw[:200]
    assert healthy(gw)


# -- D6: slow clients --------------------------------------------------------------------------------


def dribble(port: int, head: bytes, drip: bytes, every: float, limit: float) -> tuple[bytes, bool, float, int]:
    """Sends `head`, then `drip` one byte every `every` seconds for at most `limit` seconds, reading
    whatever the gateway answers. Returns (answer, whether the gateway closed, seconds, bytes dripped)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    t0 = time.monotonic()
    got = b""
    closed = False
    sent = 0
    try:
        s.sendall(head)
        for i in range(int(limit / every) + 1):
            if time.monotonic() - t0 > limit:
                break
            r, _, _ = select.select([s], [], [], every)
            if r:
                try:
                    chunk = s.recv(65536)
                except OSError:
                    closed = True
                    break
                if not chunk:
                    closed = True
                    break
                got += chunk
                continue
            try:
                s.sendall(drip[i % len(drip) : i % len(drip) + 1])
                sent += 1
            except OSError:
                closed = True
                break
    finally:
        s.close()
    return got, closed, time.monotonic() - t0, sent


def test_a_steadily_trickling_head_is_cut_at_request_timeout(gateway_factory, fake_algolia):
    """One header byte every 300 ms never leaves the connection idle; it is closed at requestTimeout anyway."""
    gw = gateway_factory(deep_merge(algolia_config(fake_algolia.url), {"server": {"requestTimeout": "2s"}}))
    raw, closed, secs, sent = dribble(
        gw.port, b"GET /_mirrorgate/health HTTP/1.1\r\nHost: x\r\n", b"X-Slow: abcdefgh\r\n", 0.3, 7
    )
    assert closed, f"still open after {secs:.1f}s and {sent} trickled bytes"
    assert secs < 2 + 1.5, f"closed only after {secs:.1f}s"
    assert sent >= 4, "the client must have been active all along"
    assert raw == b"" or status_of(raw) == 408, raw[:200]
    assert healthy(gw)


def test_a_steadily_trickling_body_gets_408(gateway_factory, fake_algolia):
    gw = gateway_factory(deep_merge(algolia_config(fake_algolia.url), {"server": {"requestTimeout": "2s"}}))
    head = b"POST /1/indexes/i/query HTTP/1.1\r\nHost: x\r\n" + ALGOLIA + b"Content-Length: 100\r\n\r\n"
    raw, closed, secs, sent = dribble(gw.port, head, b'{"query":"aaaa', 0.3, 7)
    assert status_of(raw) == 408, f"after {secs:.1f}s and {sent} body bytes: {raw[:300]!r}"
    assert json.loads(body_of(raw))["status"] == 408
    assert closed and secs < 2 + 1.5, f"closed={closed} after {secs:.1f}s"
    assert fake_algolia.requests("/1/indexes/i/query") == []
    assert healthy(gw)


class Slowloris:
    """Keeps up to `n` connections from `src` dribbling header bytes (never ending the head), reopening
    the ones the gateway closes; bounded in time and in connection attempts."""

    def __init__(self, port: int, n: int, src: str, seconds: float, max_attempts: int = 3000):
        self.port, self.n, self.src, self.seconds, self.max_attempts = port, n, src, seconds, max_attempts
        self.attempts = self.closed_by_gateway = self.most_open = 0
        self.error: str | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> "Slowloris":
        self.thread.start()
        return self

    def join(self) -> None:
        self.thread.join(timeout=self.seconds + 15)
        assert not self.thread.is_alive(), "the slowloris thread did not stop"

    def _open(self) -> socket.socket | None:
        self.attempts += 1
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            s.bind((self.src, 0))
            s.settimeout(0.5)
            s.connect(("127.0.0.1", self.port))
            s.sendall(b"GET /_mirrorgate/health HTTP/1.1\r\nHost: x\r\n")
            s.setblocking(False)
            return s
        except OSError:
            s.close()
            return None

    def _run(self) -> None:
        socks: list[socket.socket] = []
        t0 = time.monotonic()
        tick = 0
        try:
            while time.monotonic() - t0 < self.seconds:
                for _ in range(self.n - len(socks)):
                    if self.attempts >= self.max_attempts:
                        break
                    s = self._open()
                    if s is not None:
                        socks.append(s)
                self.most_open = max(self.most_open, len(socks))
                time.sleep(0.25)
                tick += 1
                alive = []
                for s in socks:
                    try:
                        if s.recv(4096) == b"":
                            raise ConnectionResetError
                    except BlockingIOError:
                        pass
                    except OSError:
                        self.closed_by_gateway += 1
                        s.close()
                        continue
                    try:
                        s.send(b"X-aaaa: bbbb\r\n"[tick % 14 : tick % 14 + 1])
                        alive.append(s)
                    except BlockingIOError:
                        alive.append(s)
                    except OSError:
                        self.closed_by_gateway += 1
                        s.close()
                socks = alive
        except Exception as exc:  # reported by the test
            self.error = repr(exc)
        finally:
            for s in socks:
                s.close()


def test_slowloris_from_one_address_does_not_starve_another(gateway_factory, fake_algolia):
    """maxConnections + 100 connections from 127.0.0.2 trickle header bytes (each well within any idle
    timeout) for 8 s; a client at 127.0.0.1 is answered all along."""
    max_connections = 32
    gw = gateway_factory(
        deep_merge(
            algolia_config(fake_algolia.url),
            {"server": {"maxConnections": max_connections, "requestTimeout": "3s"}},
        )
    )
    attack = Slowloris(gw.port, max_connections + 100, "127.0.0.2", seconds=8).start()
    time.sleep(1.0)  # the attack is in place
    outcomes = []
    t0 = time.monotonic()
    for _ in range(60):
        if time.monotonic() - t0 > 5.5:
            break
        t = time.monotonic()
        try:
            st, _, _ = request("GET", gw.url("/_mirrorgate/health"), timeout=3)
            outcomes.append((st, time.monotonic() - t))
        except OSError as exc:
            outcomes.append((repr(exc), time.monotonic() - t))
        time.sleep(0.1)
    attack.join()
    assert attack.error is None, attack.error
    assert attack.most_open >= max_connections, f"the attack never got going ({attack.most_open} open)"
    failures = [o for o in outcomes if o[0] != 200]
    assert len(outcomes) >= 10 and not failures, f"{len(failures)} of {len(outcomes)} failed: {failures[:5]}"
    assert max(secs for _, secs in outcomes) < 2, outcomes
    assert attack.closed_by_gateway > 0, "the gateway never closed a slow connection"
    assert healthy(gw)


def test_sigterm_during_a_trickling_body_answers_503_and_exits_within_the_grace(gateway_factory, fake_algolia):
    """A body still arriving when the grace ends is answered (503: under /1/ Algolia's `unavailableStatus`,
    424) and closed, so the gateway exits at the end of the grace, not a second later."""
    gw = gateway_factory(
        deep_merge(algolia_config(fake_algolia.url), {"server": {"requestTimeout": "20s", "shutdownGrace": "1s"}})
    )
    gw.expect_exit = True
    s = socket.create_connection(("127.0.0.1", gw.port), timeout=5)
    try:
        s.sendall(b"POST /1/indexes/i/query HTTP/1.1\r\nHost: x\r\n" + ALGOLIA + b'Content-Length: 100\r\n\r\n{"q')
        time.sleep(0.3)
        code, secs = gw.terminate()
        assert code == 0 and secs < 1 + 1.5, f"exit {code} after {secs:.1f}s"
        got = b""
        for _ in range(100):
            try:
                chunk = s.recv(65536)
            except OSError:
                break
            if not chunk:
                break
            got += chunk
        assert status_of(got) == 424, got[:300]
        assert json.loads(body_of(got))["status"] == 424
    finally:
        s.close()
