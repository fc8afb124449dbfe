"""Mirrored Algolia indices (issue 4): sync from the upstream, request strategies, origin, remembered
keys, secured-key restrictions, preventive NDJSON streams, admin sync and events.

The upstream is the suite's FakeAlgolia; its JSON answers carry `"_upstream"`, so a remote answer can be
told from a local one by content as well as by `origin`.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import socket
import threading
import time

import pytest
from algoliasearch.http.exceptions import RequestException
from algoliasearch.http.hosts import Host, HostsCollection
from algoliasearch.search.client import SearchClientSync
from algoliasearch.search.config import SearchConfig
from conftest import API_KEY, APP_ID
from harness import request
from upstreams.fake_algolia import FakeAlgolia
from upstreams.faults import BlackHole

PRODUCTS = [
    {"objectID": f"p{i}", "name": f"{brand} phone {i}", "brand": brand, "price": 100 + i}
    for i, brand in enumerate(["Apple", "Samsung", "Apple", "Nokia", "Apple", "Samsung", "Fairphone"])
]
SETTINGS = {"searchableAttributes": ["name", "brand"], "attributesForFaceting": ["brand"]}


def mirrored_config(host_url: str, **index) -> dict:
    idx = {
        "mirrored": True,
        "dataSelectionQueries": [{"query": {"query": ""}, "maxObjects": 1000}],
    }
    idx.update(index)
    return {
        "algolia": {
            "appId": APP_ID,
            "apiKey": API_KEY,
            "hosts": [host_url],
            "connectTimeout": "300ms",
            "timeout": "1500ms",
            "indices": {"products": idx},
        }
    }


def client_for(gw, key: str = API_KEY) -> SearchClientSync:
    config = SearchConfig(APP_ID, key)
    config.hosts = HostsCollection([Host(url="127.0.0.1", scheme="http", port=gw.port)])
    return SearchClientSync.create_with_config(config=config)


def sync(gw) -> dict:
    """Runs a sync and returns its stats; if the start-up sync is running (409), waits for it instead."""
    st, _, body = request("POST", gw.url("/_mirrorgate/algolia/indices/products/sync?wait=true"), timeout=20)
    if st == 200:
        return json.loads(body)
    assert st == 409, body
    end = time.monotonic() + 20
    while time.monotonic() < end:
        idx = json.loads(request("GET", gw.url("/_mirrorgate/status"))[2])["algolia"]["indices"]["products"]
        if not idx["syncing"] and idx["lastSync"]:
            return idx["lastSync"]
        time.sleep(0.05)
    raise AssertionError("the running sync did not finish")


def search(gw, params: dict, key: str = API_KEY, headers: dict | None = None):
    h = {"X-Algolia-Application-Id": APP_ID, "X-Algolia-API-Key": key, "Content-Type": "application/json"}
    h.update(headers or {})
    return request("POST", gw.url("/1/indexes/products/query"), body=json.dumps(params).encode(), headers=h, timeout=10)


@pytest.fixture
def upstream():
    f = FakeAlgolia(browse_page_size=3).start()
    f.seed("products", PRODUCTS, SETTINGS)
    yield f
    if not f.stopping:
        f.stop()


def wait_for(pred, timeout: float = 10.0, step: float = 0.05) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(step)
    return False


def test_online_remote_then_offline_local_with_the_same_client(gateway_factory, upstream):
    gw = gateway_factory(mirrored_config(upstream.url))
    stats = sync(gw)
    assert stats["objects"] == len(PRODUCTS)
    assert stats["pages"] >= 3  # browse_page_size 3: the cursor was followed
    c = client_for(gw)
    res = c.search_single_index("products", {"query": "phone"}).to_dict()
    assert res["origin"] == "remote"
    assert res.get("_upstream")  # the fake's marker: this came from the upstream
    st, headers, _ = search(gw, {"query": "phone"})
    assert headers.get("x-mirrorgate-origin") == "remote"
    upstream.stop()
    # The same client object keeps working: a new query, facets and filters, answered locally.
    res = c.search_single_index(
        "products", {"query": "aple", "facets": ["brand"], "filters": "price > 101"}
    ).to_dict()
    assert res["origin"] == "local"
    assert "_upstream" not in res
    assert {h["brand"] for h in res["hits"]} == {"Apple"}
    assert all(h["price"] > 101 for h in res["hits"])
    assert res["facets"]["brand"] == {"Apple": len(res["hits"])}
    obj = c.get_object("products", "p3")
    assert obj["brand"] == "Nokia"
    st, _, body = request("GET", gw.url("/_mirrorgate/status"))
    doc = json.loads(body)
    assert doc["upstreams"]["algolia"]["reachable"] is False
    idx = doc["algolia"]["indices"]["products"]
    assert idx["hasOfflineData"] is True and idx["objects"] == len(PRODUCTS)
    assert idx["lastSuccessfulSyncAt"]


def test_unknown_key_gets_403_offline(gateway_factory, upstream):
    gw = gateway_factory(mirrored_config(upstream.url))
    sync(gw)
    assert search(gw, {"query": "phone"})[0] == 200  # remembers the key
    upstream.stop()
    st, _, body = search(gw, {"query": "phone"}, key="never-seen-key")
    assert st == 403
    assert json.loads(body) == {"message": "Invalid Application-ID or API key", "status": 403}
    assert search(gw, {"query": "phone"})[0] == 200


def secured_key(parent: str, params: str) -> str:
    digest = hmac.new(parent.encode(), params.encode(), hashlib.sha256).hexdigest()
    return base64.b64encode((digest + params).encode()).decode()


def test_secured_key_filters_apply_offline(gateway_factory, upstream):
    gw = gateway_factory(mirrored_config(upstream.url))
    sync(gw)
    key = secured_key(API_KEY, "filters=brand%3ASamsung")
    assert search(gw, {"query": ""}, key=key)[0] == 200  # the upstream (fake) accepts any key
    upstream.stop()
    st, _, body = search(gw, {"query": "phone"}, key=key)
    assert st == 200
    hits = json.loads(body)["hits"]
    assert hits and {h["brand"] for h in hits} == {"Samsung"}
    expired = secured_key(API_KEY, "validUntil=1000")
    # never accepted by the upstream: refused like any unknown key
    assert search(gw, {"query": ""}, key=expired)[0] == 403


def test_4xx_from_upstream_is_relayed(gateway_factory, upstream):
    gw = gateway_factory(mirrored_config(upstream.url))
    upstream.fail_status = 400
    st, _, body = search(gw, {"query": "x"})
    assert st == 400
    assert "_upstream" in json.loads(body) or "message" in json.loads(body)


def test_fallback_on_timeout_with_a_black_holed_upstream(gateway_factory, upstream, tmp_path):
    data = tmp_path / "shared-data"
    gw = gateway_factory(deep(mirrored_config(upstream.url), {"dataDir": str(data)}))
    sync(gw)
    assert search(gw, {"query": "phone"})[0] == 200
    gw.expect_exit = 0
    gw.terminate()
    hole = BlackHole().start()
    try:
        cfg = mirrored_config(
            f"http://127.0.0.1:{hole.port}", requestStrategy="fallbackOnTimeout", offlineFallbackTimeout="300ms"
        )
        cfg["algolia"]["timeout"] = "5s"
        gw2 = gateway_factory(deep(cfg, {"dataDir": str(data)}), name="gw2")
        t0 = time.monotonic()
        st, headers, body = search(gw2, {"query": "samsung"})
        elapsed = time.monotonic() - t0
        assert st == 200
        assert headers.get("x-mirrorgate-origin") == "local"
        assert json.loads(body)["origin"] == "local"
        assert elapsed < 0.3 + 0.1, f"answered after {elapsed:.3f}s (offlineFallbackTimeout 300 ms + 100 ms)"
    finally:
        hole.stop()


def deep(base: dict, extra: dict) -> dict:
    out = dict(base)
    out.update(extra)
    return out


def read_chunks(port: int, body: bytes, timeout: float = 8.0) -> list[tuple[float, bytes]]:
    """POSTs a preventive search over a raw socket; returns (arrival time, chunk payload) per chunk."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    req = (
        f"POST /1/indexes/products/query HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Algolia-Application-Id: {APP_ID}\r\n"
        f"X-Algolia-API-Key: {API_KEY}\r\nX-Mirrorgate-Strategy: preventive\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    ).encode() + body
    t0 = time.monotonic()
    s.sendall(req)
    buf = b""
    while b"\r\n\r\n" not in buf:
        buf += s.recv(65536)
    head, buf = buf.split(b"\r\n\r\n", 1)
    assert b" 200 " in head.split(b"\r\n")[0]
    assert b"transfer-encoding: chunked" in head.lower()
    assert b"application/x-ndjson" in head.lower()
    chunks = []
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        while b"\r\n" not in buf:
            more = s.recv(65536)
            if not more:
                return chunks
            buf += more
        size_line, buf = buf.split(b"\r\n", 1)
        size = int(size_line.split(b";")[0], 16)
        while len(buf) < size + 2:
            more = s.recv(65536)
            if not more:
                raise AssertionError("truncated chunk")
            buf += more
        payload, buf = buf[:size], buf[size + 2 :]
        if size == 0:
            return chunks
        chunks.append((time.monotonic() - t0, payload))
    raise AssertionError("stream did not end")


def test_preventive_local_first_then_remote(gateway_factory, upstream):
    gw = gateway_factory(mirrored_config(upstream.url, preventiveOfflineSearchDelay="100ms"))
    sync(gw)
    assert search(gw, {"query": "phone"})[0] == 200
    upstream.delay = 0.6
    chunks = read_chunks(gw.port, b'{"query":"nokia"}')
    assert len(chunks) == 2, chunks
    (t_local, local), (t_remote, remote) = chunks
    assert local.endswith(b"\n") and remote.endswith(b"\n")
    assert json.loads(local)["origin"] == "local"
    assert json.loads(remote)["origin"] == "remote"
    assert t_local < 0.1 + 0.15, f"local line after {t_local:.3f}s"
    assert t_remote >= 0.55


def test_preventive_single_line_when_upstream_is_fast(gateway_factory, upstream):
    gw = gateway_factory(mirrored_config(upstream.url, preventiveOfflineSearchDelay="400ms"))
    sync(gw)
    chunks = read_chunks(gw.port, b'{"query":"apple"}')
    assert len(chunks) == 1
    assert json.loads(chunks[0][1])["origin"] == "remote"


def test_concurrent_sync_gets_409_and_events_arrive_in_order(gateway_factory, upstream):
    gw = gateway_factory(mirrored_config(upstream.url))
    events: list[str] = []
    stop = threading.Event()

    def listen():
        s = socket.create_connection(("127.0.0.1", gw.port), timeout=10)
        s.sendall(b"GET /_mirrorgate/events HTTP/1.1\r\nHost: x\r\n\r\n")
        buf = b""
        while not stop.is_set():
            try:
                data = s.recv(65536)
            except socket.timeout:
                break
            if not data:
                break
            buf += data
            events[:] = [line.split(b": ", 1)[1].decode() for line in buf.split(b"\n") if line.startswith(b"event: ")]
        s.close()

    t = threading.Thread(target=listen, daemon=True)
    t.start()
    time.sleep(0.3)
    upstream.delay = 0.5
    st1, _, _ = request("POST", gw.url("/_mirrorgate/algolia/indices/products/sync"))
    st2, _, body2 = request("POST", gw.url("/_mirrorgate/algolia/indices/products/sync"))
    assert st1 == 202
    assert st2 == 409, body2
    def manual_run() -> list[str]:
        seq = [e for e in events if e in ("syncDidStart", "buildDidStart", "buildDidFinish", "syncDidFinish")]
        # the start-up sync may have been half over when we subscribed: take the last run
        last = len(seq) - 1 - seq[::-1].index("syncDidStart") if "syncDidStart" in seq else len(seq)
        return seq[last:]

    assert wait_for(lambda: "syncDidFinish" in manual_run(), timeout=15), events
    stop.set()
    seq = manual_run()
    assert seq[:4] == ["syncDidStart", "buildDidStart", "buildDidFinish", "syncDidFinish"], events


def test_restart_keeps_the_mirror_and_the_keys(gateway_factory, upstream, tmp_path):
    data = tmp_path / "keep"
    gw = gateway_factory(deep(mirrored_config(upstream.url), {"dataDir": str(data)}))
    sync(gw)
    assert search(gw, {"query": "phone"})[0] == 200
    gw.expect_exit = 0
    gw.terminate()
    upstream.stop()
    gw2 = gateway_factory(deep(mirrored_config(upstream.url), {"dataDir": str(data)}), name="gw2")
    st, headers, body = search(gw2, {"query": "fairphone"})
    assert st == 200, body
    assert headers.get("x-mirrorgate-origin") == "local"
    assert json.loads(body)["hits"][0]["objectID"] == "p6"


def test_killed_sync_resumes_from_its_checkpoint(gateway_factory, upstream, tmp_path):
    import os
    import signal

    many = [{"objectID": f"r{i:03d}", "name": f"record {i}", "brand": "X", "price": i} for i in range(60)]
    upstream.seed("products", many)
    data = tmp_path / "resume"
    gw = gateway_factory(deep(mirrored_config(upstream.url), {"dataDir": str(data)}))
    # the start-up sync runs immediately; let it finish, then slow the upstream for a second one
    sync(gw)
    upstream.delay = 0.15  # 60+7 objects, 3 per page: ~23 pages, ~3.5 s
    upstream.clear()
    st, _, _ = request("POST", gw.url("/_mirrorgate/algolia/indices/products/sync"))
    assert st in (202, 409)
    assert wait_for(lambda: len(upstream.requests("/1/indexes/products/browse")) >= 6, timeout=30)
    os.kill(gw.proc.pid, signal.SIGKILL)
    gw.proc.wait(timeout=5)
    gw.expect_exit = -9
    seen_before = len(upstream.requests("/1/indexes/products/browse"))
    upstream.clear()
    upstream.delay = 0
    gw2 = gateway_factory(deep(mirrored_config(upstream.url), {"dataDir": str(data)}), name="gw2")

    # The replication scheduler resumes the run cut by the kill at once (a manual sync would race it and,
    # coming second, browse everything again): wait for that run.
    def resumed_run_done():
        idx = json.loads(request("GET", gw2.url("/_mirrorgate/status"))[2])["algolia"]["indices"]["products"]
        return bool(upstream.requests("/1/indexes/products/browse")) and not idx["syncing"] and idx["lastSync"]

    assert wait_for(resumed_run_done, timeout=20)
    stats = json.loads(request("GET", gw2.url("/_mirrorgate/status"))[2])["algolia"]["indices"]["products"]["lastSync"]
    assert stats["objects"] == len(PRODUCTS) + len(many)
    browses = upstream.requests("/1/indexes/products/browse")
    first = json.loads(browses[0].body)
    assert "cursor" in first, f"the resumed sync started over: {first}"
    # it did not fetch again the pages it had stored before the crash
    assert len(browses) < 23 - seen_before + 3


def test_data_selection_max_objects_settings_and_synonyms_are_mirrored(gateway_factory, upstream):
    upstream.index("products").synonyms.append(
        {"objectID": "syn-1", "type": "synonym", "synonyms": ["handy", "phone"]}
    )
    gw = gateway_factory(
        mirrored_config(upstream.url, dataSelectionQueries=[{"query": {"query": ""}, "maxObjects": 4}])
    )
    stats = sync(gw)
    # browse pages of 3: the first page (3) is under the cap, the second (6) passes it: one page of overshoot
    assert stats["objects"] == 6, stats
    upstream.stop()
    hdrs = {"X-Algolia-Application-Id": APP_ID, "X-Algolia-API-Key": API_KEY}
    st, _, body = request("GET", gw.url("/1/indexes/products/settings"), headers=hdrs)
    assert st == 200
    assert json.loads(body)["attributesForFaceting"] == SETTINGS["attributesForFaceting"]
    st, _, body = request(
        "POST", gw.url("/1/indexes/products/synonyms/search"), body=b'{"query":"handy"}', headers=hdrs
    )
    assert st == 200
    assert [h["objectID"] for h in json.loads(body)["hits"]] == ["syn-1"]
    # and the synonym is used by local searches: "handy" finds the phones
    st, _, body = search(gw, {"query": "handy"})
    assert st == 200 and json.loads(body)["nbHits"] > 0


def test_answers_are_remote_again_and_a_sync_runs_when_the_upstream_returns(gateway_factory, upstream):
    gw = gateway_factory(mirrored_config(upstream.url))
    sync(gw)
    assert search(gw, {"query": "phone"})[0] == 200
    port = upstream.port
    upstream.stop()
    st, headers, _ = search(gw, {"query": "nokia"})
    assert st == 200 and headers.get("x-mirrorgate-origin") == "local"
    # an unlucky sync attempt while it is down fails and is retried once it is back
    request("POST", gw.url("/_mirrorgate/algolia/indices/products/sync"))
    back = FakeAlgolia(port=port, browse_page_size=3).start()
    try:
        back.seed("products", PRODUCTS + [{"objectID": "new", "name": "brand new phone", "brand": "New"}], SETTINGS)
        assert wait_for(lambda: search(gw, {"query": "phone"})[1].get("x-mirrorgate-origin") == "remote", timeout=15)
        assert wait_for(lambda: len(back.requests("/1/indexes/products/browse")) > 0, timeout=15)
        assert wait_for(
            lambda: json.loads(request("GET", gw.url("/_mirrorgate/status"))[2])["algolia"]["indices"]["products"][
                "objects"
            ]
            == len(PRODUCTS) + 1,
            timeout=15,
        )
    finally:
        back.stop()


def test_mixed_multi_query_is_split_and_merged_in_order(gateway_factory, upstream, tmp_path):
    (tmp_path / "local.json").write_text(json.dumps([{"objectID": "l1", "name": "local phone"}]))
    upstream.seed("remote_only", [{"objectID": "r1", "name": "remote phone"}])
    cfg = mirrored_config(upstream.url)
    cfg["algolia"]["offlineIndices"] = {"local_only": {"bootstrap": {"objects": [str(tmp_path / "local.json")]}}}
    gw = gateway_factory(cfg)
    sync(gw)
    assert search(gw, {"query": "phone"})[0] == 200  # the key is now known for the mirror
    hdrs = {"X-Algolia-Application-Id": APP_ID, "X-Algolia-API-Key": API_KEY}
    body = json.dumps(
        {
            "requests": [
                {"indexName": "local_only", "query": "phone"},
                {"indexName": "remote_only", "query": "phone"},
                {"indexName": "products", "query": "nokia"},
            ]
        }
    ).encode()
    st, headers, data = request("POST", gw.url("/1/indexes/*/queries"), body=body, headers=hdrs)
    assert st == 200, data
    doc = json.loads(data)
    assert doc["origin"] == "local"  # one part was local
    origins = [r["origin"] for r in doc["results"]]
    assert origins == ["local", "remote", "remote"]
    assert [r["hits"][0]["objectID"] for r in doc["results"]] == ["l1", "r1", "p3"]
    # offline: the mirror answers its part, but the remote-only part fails the whole call
    upstream.stop()
    st, _, data = request("POST", gw.url("/1/indexes/*/queries"), body=body, headers=hdrs)
    assert st == 424, data
    body2 = json.dumps(
        {"requests": [{"indexName": "local_only", "query": "phone"}, {"indexName": "products", "query": "nokia"}]}
    ).encode()
    st, _, data = request("POST", gw.url("/1/indexes/*/queries"), body=body2, headers=hdrs)
    assert st == 200, data
    assert [r["origin"] for r in json.loads(data)["results"]] == ["local", "local"]


def test_rate_limited_upstream_falls_back_but_online_only_relays_429(gateway_factory, upstream):
    gw = gateway_factory(mirrored_config(upstream.url))
    sync(gw)
    assert search(gw, {"query": "phone"})[0] == 200
    upstream.fail_status = 429
    upstream.retry_after = "1"
    st, headers, body = search(gw, {"query": "nokia"})
    assert st == 200, body
    assert headers.get("x-mirrorgate-origin") == "local"
    st, headers, body = search(gw, {"query": "nokia"}, headers={"X-Mirrorgate-Strategy": "onlineOnly"})
    assert st == 429
    assert headers.get("retry-after") == "1"
