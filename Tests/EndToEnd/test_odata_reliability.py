"""OData reliability items of issue 19 with the real binary (SPEC §4):

- D8: a forwarded write and its CSRF token fetch share one budget (the service's `timeout`); a write is
  never sent after the token fetch failed, so a client that got 504 never finds its write committed later.
- onlineFirst reads: an upstream answering 503, 429 or a 500 that is no OData error (a proxy's page) is
  answered from the mirror (as `fallbackOnFailure` does for Algolia), not relayed (the service's own
  answers are relayed: `test_odata_conventions.py`).
- The `Host` header reaches `@odata.context` (and every gateway URL) only when it is a plain authority.

Chain: gateway → FaultInjector (upstreams/faults.py) → odatapy Northwind V4.
"""

from __future__ import annotations

import threading
import time

import pytest
import requests
from odata_helpers import ACCEPT, JSON_HEADERS, status_of
from test_odata_offline import MOUNT, nw_config, wait_downloaded
from upstreams.faults import FaultInjector


@pytest.fixture
def injector(odata_upstream):
    proxy = FaultInjector(odata_upstream.origin).start()
    yield odata_upstream, proxy
    if proxy.fetch_gate is not None:
        proxy.fetch_gate.set()
    proxy.stop()


def upstream_posts(up) -> list:
    return [r for r in up.requests("POST") if b"D8-" in r.body]


def test_a_write_is_not_sent_after_its_csrf_token_fetch_timed_out(gateway_factory, injector):
    up, proxy = injector
    gw = gateway_factory(nw_config(proxy.url + "/nw.svc/", timeout="1s"))
    wait_downloaded(gw, "nw")
    proxy.fetch_gate = threading.Event()  # the token fetch hangs past the whole budget
    r = requests.post(
        gw.url(MOUNT + "Products"),
        json={"ProductName": "D8-late", "UnitPrice": 1, "Discontinued": False},
        headers=JSON_HEADERS,
        timeout=15,
    )
    assert r.status_code == 504, (r.status_code, r.text)
    assert "error" in r.json() and r.headers["X-Mirrorgate-Origin"] == "remote"
    assert proxy.fetches == 1
    # The upstream answers the held fetch now; the gateway must not send the write after it. Bounded watch:
    # a write sent late would reach the upstream within a moment of the fetch's answer.
    proxy.fetch_gate.set()
    deadline = time.time() + 3
    while time.time() < deadline and not upstream_posts(up):
        time.sleep(0.05)
    assert upstream_posts(up) == [], "the write was sent after its token fetch timed out"
    names = [p["ProductName"] for p in requests.get(up.root + "Products?$top=100", headers=ACCEPT, timeout=10).json()["value"]]
    assert "D8-late" not in names


def test_a_write_whose_token_fetch_is_answered_in_time_is_forwarded_once(gateway_factory, injector):
    up, proxy = injector
    gw = gateway_factory(nw_config(proxy.url + "/nw.svc/", timeout="2s"))
    wait_downloaded(gw, "nw")
    r = requests.post(
        gw.url(MOUNT + "Products"),
        json={"ProductName": "D8-ok", "UnitPrice": 1, "Discontinued": False},
        headers=JSON_HEADERS,
        timeout=15,
    )
    assert r.status_code == 201, r.text
    assert r.headers["X-Mirrorgate-Origin"] == "remote"
    assert len(upstream_posts(up)) == 1


@pytest.mark.parametrize("status", [500, 503, 429])
def test_online_first_reads_answer_from_the_mirror_when_the_upstream_fails(gateway_factory, injector, status):
    up, proxy = injector
    gw = gateway_factory(nw_config(proxy.url + "/nw.svc/"))
    wait_downloaded(gw, "nw")
    r = requests.get(gw.url(MOUNT + "Products?$orderby=ProductID"), headers=ACCEPT, timeout=10)
    assert r.status_code == 200 and r.headers["X-Mirrorgate-Origin"] == "remote"
    online = [p["ProductID"] for p in r.json()["value"]]
    proxy.status_for["GET"] = status
    proxy.body_for[500] = ("text/html", b"<html><body>502 Proxy Error</body></html>")
    for target in ["Products?$orderby=ProductID", "Products(3)", "Customers('ALFKI')/Orders"]:
        r = requests.get(gw.url(MOUNT + target), headers=ACCEPT, timeout=10)
        assert r.status_code == 200, (target, r.status_code, r.text)
        assert r.headers["X-Mirrorgate-Origin"] == "local", target
    r = requests.get(gw.url(MOUNT + "Products?$orderby=ProductID"), headers=ACCEPT, timeout=10)
    assert [p["ProductID"] for p in r.json()["value"]][: len(online)] == online
    assert proxy.injected.get(status, 0) >= 4  # each read was tried upstream first
    # The upstream recovers: reads are forwarded again.
    del proxy.status_for["GET"]
    r = requests.get(gw.url(MOUNT + "Products(3)"), headers=ACCEPT, timeout=10)
    assert r.status_code == 200 and r.headers["X-Mirrorgate-Origin"] == "remote"


def test_a_function_free_read_without_a_mirror_relays_the_upstreams_error(gateway_factory, injector):
    """Without a mirror there is nothing to answer from: the upstream's 503 reaches the client."""
    up, proxy = injector
    gw = gateway_factory({"odata": {"services": {"nw": {"mount": MOUNT, "upstream": proxy.url + "/nw.svc/", "timeout": "2s"}}}})
    proxy.status_for["GET"] = 503
    r = requests.get(gw.url(MOUNT + "Products"), headers=ACCEPT, timeout=10)
    assert r.status_code == 503 and r.headers["X-Mirrorgate-Origin"] == "remote", r.text


@pytest.mark.parametrize("offline", [False, True], ids=["remote", "local"])
def test_the_host_header_reaches_the_context_only_when_it_is_a_plain_authority(gateway_factory, odata_upstream, offline):
    up = odata_upstream
    gw = gateway_factory(nw_config(up.root))
    wait_downloaded(gw, "nw")
    if offline:
        up.stop()
    port = gw.url("/").split(":")[2].split("/")[0]
    r = requests.get(gw.url(MOUNT + "Products(1)"), headers={**ACCEPT, "Host": f"mirror.example:{port}"}, timeout=10)
    assert r.status_code == 200, r.text
    assert r.json()["@odata.context"].startswith(f"http://mirror.example:{port}{MOUNT}"), r.json()["@odata.context"]
    for hostile in ["evil'(x)", "a%22b", "x&y=1", "attacker.example:1:2"]:
        r = requests.get(gw.url(MOUNT + "Products(1)"), headers={**ACCEPT, "Host": hostile}, timeout=10)
        if r.status_code == 400:
            continue  # the HTTP server refused the Host itself
        assert r.status_code == 200, (hostile, r.text)
        context = r.json()["@odata.context"]
        assert context.startswith(f"http://127.0.0.1{MOUNT}"), (hostile, context)
        assert r.headers["X-Mirrorgate-Origin"] == ("local" if offline else "remote")
    st = status_of(gw)
    assert st["reachable"] is (not offline)
