"""Upstream failures under /1/: never a 5xx, never a hang (SPEC §3, issue 2)."""

from __future__ import annotations

import json
import time

from conftest import API_KEY, APP_ID, algolia_config
from harness import request
from upstreams.faults import refused_port

HEADERS = {"X-Algolia-Application-Id": APP_ID, "X-Algolia-API-Key": API_KEY, "Content-Type": "application/json"}


def search(gw, index="i", timeout=15):
    t0 = time.monotonic()
    st, hdrs, body = request(
        "POST", gw.url(f"/1/indexes/{index}/query"), body=b'{"query":"x"}', headers=HEADERS, timeout=timeout
    )
    return st, hdrs, body, time.monotonic() - t0


def assert_unavailable(st, body):
    assert st == 424, f"expected 424, got {st}: {body[:300]!r}"
    doc = json.loads(body)
    assert doc["status"] == 424
    assert doc["message"].startswith("upstream unavailable"), doc


def test_refused_gives_424_quickly(gateway_factory):
    gw = gateway_factory(algolia_config(f"http://127.0.0.1:{refused_port()}"))
    st, hdrs, body, secs = search(gw)
    assert_unavailable(st, body)
    assert "json" in hdrs.get("content-type", "")
    assert secs < 1.0, f"a refused connection must not wait for the timeout ({secs:.2f}s)"


def test_refused_write_gives_424(gateway_factory):
    gw = gateway_factory(algolia_config(f"http://127.0.0.1:{refused_port()}"))
    st, _, body = request(
        "POST", gw.url("/1/indexes/i/batch"), body=b'{"requests":[]}', headers=HEADERS, timeout=15
    )
    assert_unavailable(st, body)


def test_blackhole_read_gives_424_within_budget(gateway_factory, blackhole):
    gw = gateway_factory(algolia_config(blackhole.url, timeout="1500ms"))
    st, _, body, secs = search(gw)
    assert_unavailable(st, body)
    assert secs < 1.5 + 1.0, f"read budget is 1.5s, answer took {secs:.2f}s"
    assert blackhole.accepted >= 1


def test_blackhole_two_hosts_share_one_budget(gateway_factory):
    from upstreams.faults import BlackHole

    a, b = BlackHole().start(), BlackHole().start()
    try:
        gw = gateway_factory(algolia_config(a.url, b.url, timeout="1500ms"))
        st, _, body, secs = search(gw)
        assert_unavailable(st, body)
        assert secs < 1.5 + 1.0, f"the whole budget covers every host: took {secs:.2f}s"
    finally:
        a.stop()
        b.stop()


def test_blackhole_write_uses_write_budget(gateway_factory, blackhole):
    gw = gateway_factory(algolia_config(blackhole.url, timeout="500ms", writeTimeout="2s"))
    t0 = time.monotonic()
    st, _, body = request("POST", gw.url("/1/indexes/i/batch"), body=b'{"requests":[]}', headers=HEADERS, timeout=15)
    secs = time.monotonic() - t0
    assert_unavailable(st, body)
    assert secs < 2.0 + 1.0, f"write budget is 2s, answer took {secs:.2f}s"


def test_upstream_5xx_is_never_relayed(algolia_gateway, fake_algolia):
    for code in (500, 502, 503):
        fake_algolia.fail_status = code
        st, _, body, _ = search(algolia_gateway)
        assert st == 424, f"an upstream {code} must become 424, got {st}"
        assert json.loads(body)["status"] == 424


def test_upstream_4xx_is_relayed(algolia_gateway, fake_algolia):
    fake_algolia.fail_status = 403
    st, _, body, _ = search(algolia_gateway)
    assert st == 403
    assert json.loads(body)["message"] == "fake failure 403"
    fake_algolia.fail_status = None
    st, _, body = request("GET", algolia_gateway.url("/1/indexes/i/nope-object"), headers=HEADERS)
    assert st == 404
    assert json.loads(body)["_upstream"] == fake_algolia.name


def test_upstream_429_is_relayed_with_retry_after(algolia_gateway, fake_algolia):
    fake_algolia.fail_status = 429
    fake_algolia.retry_after = "1"
    st, hdrs, body, _ = search(algolia_gateway)
    assert st == 429
    assert hdrs.get("retry-after") == "1"


def test_slow_upstream_within_budget_is_fine(gateway_factory, fake_algolia):
    gw = gateway_factory(algolia_config(fake_algolia.url, timeout="3s"))
    fake_algolia.delay = 0.5
    st, _, body, secs = search(gw)
    assert st == 200, body[:300]
    assert 0.5 <= secs < 3.0


def test_slow_upstream_beyond_budget_gives_424(gateway_factory, fake_algolia):
    gw = gateway_factory(algolia_config(fake_algolia.url, timeout="1s"))
    fake_algolia.delay = 3.0
    st, _, body, secs = search(gw)
    assert_unavailable(st, body)
    assert secs < 1.0 + 1.0


def test_gateway_keeps_serving_after_upstream_returns(gateway_factory):
    """Refused, then the upstream comes up on that port: forwarding resumes (bounded wait)."""
    from upstreams.fake_algolia import FakeAlgolia

    port = refused_port()
    gw = gateway_factory(algolia_config(f"http://127.0.0.1:{port}"))
    st, _, body, _ = search(gw)
    assert_unavailable(st, body)
    fake = FakeAlgolia(port=port).start()
    try:
        deadline = time.monotonic() + 15
        last = None
        for _ in range(150):
            st, _, body, _ = search(gw)
            last = st
            if st == 200 or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        assert last == 200, f"forwarding did not resume within 15 s (last status {last})"
    finally:
        fake.stop()


def test_reachability_in_status(gateway_factory):
    gw = gateway_factory(algolia_config(f"http://127.0.0.1:{refused_port()}"))
    search(gw)
    st, _, body = request("GET", gw.url("/_mirrorgate/status"), headers=gw.admin_headers())
    assert st == 200
    up = json.loads(body)["upstreams"]["algolia"]
    assert up["reachable"] is False, up


def test_small_slow_response_reaches_the_client_as_it_comes(gateway_factory, fake_algolia):
    """A small body that trickles in is relayed while it arrives, not held until it is complete."""
    import socket
    import time

    from conftest import algolia_config

    gw = gateway_factory(algolia_config(fake_algolia.url, timeout="10s"))
    s = socket.create_connection(("127.0.0.1", gw.port), timeout=10)
    s.sendall(
        b"GET /1/indexes/_trickle/x?chunks=4&size=100&interval=0.5 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    t0 = time.monotonic()
    first_body_at = None
    buf = b""
    while True:
        data = s.recv(65536)
        if not data:
            break
        buf += data
        if first_body_at is None and b"\r\n\r\n" in buf and len(buf.split(b"\r\n\r\n", 1)[1]) > 0:
            first_body_at = time.monotonic() - t0
    total = time.monotonic() - t0
    assert first_body_at is not None
    assert total >= 1.5, f"the trickle takes ~2 s, took {total:.2f}"
    assert first_body_at < total - 0.7, f"first body bytes at {first_body_at:.2f}s of {total:.2f}s"
