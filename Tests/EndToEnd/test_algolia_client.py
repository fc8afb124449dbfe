"""The unmodified official `algoliasearch` 4.x Python client through the gateway (issue 2, Done means).

Each client-side request is captured at the `requests` adapter (exactly what the client put on the
wire) and compared with what the fake upstream recorded: method, path, query, body bytes and every
end-to-end header must arrive unchanged.
"""

from __future__ import annotations

import hashlib
import json

import pytest
import requests
from algoliasearch.http.hosts import Host, HostsCollection
from algoliasearch.search.client import SearchClientSync
from algoliasearch.search.config import SearchConfig
from conftest import API_KEY, APP_ID, algolia_config
from harness import request

# Hop-by-hop headers (RFC 9110 §7.6.1) and the ones a proxy legitimately rewrites.
NOT_END_TO_END = {"host", "connection", "keep-alive", "proxy-connection", "te", "trailer", "transfer-encoding", "upgrade"}


@pytest.fixture
def wire(monkeypatch):
    """Captures every request the `requests` library sends: (method, url, headers, body)."""
    sent: list[tuple[str, str, dict, bytes]] = []
    orig = requests.adapters.HTTPAdapter.send

    def send(self, req, *a, **kw):
        body = req.body
        if isinstance(body, str):
            body = body.encode()
        sent.append((req.method, req.url, dict(req.headers), body or b""))
        return orig(self, req, *a, **kw)

    monkeypatch.setattr(requests.adapters.HTTPAdapter, "send", send)
    return sent


def client_records(fake):
    """What the official client sent (a gateway's own probes, if any, carry another User-Agent)."""
    return [r for r in fake.requests() if (r.header("user-agent") or "").startswith("Algolia for Python")]


def make_client(port: int, app_id: str = APP_ID, api_key: str = API_KEY) -> SearchClientSync:
    config = SearchConfig(app_id, api_key)
    config.hosts = HostsCollection([Host(url="127.0.0.1", scheme="http", port=port)])
    return SearchClientSync.create_with_config(config=config)


def assert_passed_through(sent, records, gw_port: int):
    """Every client request reached the upstream unchanged, in order."""
    from urllib.parse import urlsplit

    assert len(records) == len(sent), (
        f"client sent {len(sent)} requests, upstream recorded {len(records)}: "
        f"{[(s[0], s[1]) for s in sent]} vs {[(r.method, r.path) for r in records]}"
    )
    for (method, url, headers, body), rec in zip(sent, records):
        u = urlsplit(url)
        assert u.port == gw_port, "the client must have talked to the gateway"
        assert rec.method == method
        assert rec.path == u.path
        assert rec.query == (u.query or "")
        assert rec.body == body, f"{method} {u.path}: body changed"
        for name, value in headers.items():
            if name.lower() in NOT_END_TO_END:
                continue
            if name.lower() == "content-length" and rec.chunked_request:
                continue
            got = rec.header(name)
            assert got == value, f"{method} {u.path}: header {name!r} arrived as {got!r}, sent {value!r}"


def test_official_client_search_save_settings_browse(algolia_gateway, fake_algolia, wire):
    gw = algolia_gateway
    client = make_client(gw.port)

    objs = [{"objectID": f"m{i}", "title": f"Movie {i}", "year": 2000 + i} for i in range(5)]
    responses = client.save_objects("movies", objs, wait_for_tasks=True)
    assert len(responses) == 1 and responses[0].object_ids == [o["objectID"] for o in objs]
    status = client.wait_for_task(index_name="movies", task_id=responses[0].task_id)
    assert status.status == "published"

    res = client.search_single_index("movies", {"query": "movie 3", "hitsPerPage": 5})
    d = res.to_dict()
    assert d["_upstream"] == fake_algolia.name, "answer must come from the fake upstream"
    assert [h.object_id for h in res.hits] == ["m3"]

    settings = client.get_settings("movies").to_dict()
    assert settings["_upstream"] == fake_algolia.name
    assert settings["hitsPerPage"] == 20

    seen: list[str] = []
    client.browse_objects("movies", lambda resp: seen.extend(h.object_id for h in resp.hits))
    assert sorted(seen) == sorted(o["objectID"] for o in objs)
    browses = fake_algolia.requests("/1/indexes/movies/browse")
    assert len(browses) == 3, "the fake pages by 2, so 5 objects need 3 browse calls with cursors"
    assert json.loads(browses[1].body)["cursor"] == "c2"

    recs = client_records(fake_algolia)
    assert recs and recs[0].header("user-agent").startswith("Algolia for Python (4.")
    assert all(r.header("x-algolia-api-key") == API_KEY for r in recs)
    assert all(r.header("x-algolia-application-id") == APP_ID for r in recs)
    assert_passed_through(wire, recs, gw.port)


def test_official_client_multi_search_and_get_object(algolia_gateway, fake_algolia, wire):
    fake_algolia.seed("a", [{"objectID": "1", "name": "apple"}, {"objectID": "2", "name": "banana"}])
    fake_algolia.seed("b", [{"objectID": "3", "name": "apricot"}])
    client = make_client(algolia_gateway.port)
    res = client.search(
        {"requests": [{"indexName": "a", "query": "ap"}, {"indexName": "b", "query": "ap"}]}
    ).to_dict()
    assert [r["index"] for r in res["results"]] == ["a", "b"]
    assert res["results"][0]["hits"][0]["objectID"] == "1"
    obj = client.get_object("b", "3")
    assert obj["name"] == "apricot"
    assert_passed_through(wire, client_records(fake_algolia), algolia_gateway.port)


def test_response_relayed_byte_for_byte(algolia_gateway, fake_algolia):
    fake_algolia.seed("idx", [{"objectID": "1", "t": "héllo wörld ✓"}])
    body = b'{"query":"h\\u00e9llo","hitsPerPage":3}'
    st, hdrs, data = request(
        "POST",
        algolia_gateway.url("/1/indexes/idx/query"),
        body=body,
        headers={
            "X-Algolia-Application-Id": APP_ID,
            "X-Algolia-API-Key": API_KEY,
            "Content-Type": "application/json",
            "X-Custom-Thing": "  keep  me ",
        },
    )
    rec = fake_algolia.requests("/1/indexes/idx/query")[-1]
    assert st == 200
    assert data == rec.response_body, "response body must be relayed unchanged"
    assert hdrs.get("x-fake-upstream") == fake_algolia.name, "upstream response headers are relayed"
    assert rec.body == body
    assert rec.header("X-Algolia-Application-Id") == APP_ID
    assert rec.header("X-Algolia-API-Key") == API_KEY
    assert rec.header("X-Custom-Thing") is not None and rec.header("X-Custom-Thing").strip() == "keep  me"


def test_raw_path_and_query_forwarded_unchanged(algolia_gateway, fake_algolia):
    path = "/1/indexes/my%20index%2Fx/settings"
    query = "x-algolia-application-id=TESTAPPID&x-algolia-api-key=k%2By&getVersion=2&a=%C3%A9"
    st, _, _ = request("GET", algolia_gateway.url(f"{path}?{query}"))
    assert st == 200
    rec = fake_algolia.requests("/1/indexes/my%20index")[-1]
    assert rec.path == path
    assert rec.query == query


def test_large_bodies_both_ways(gateway_factory, fake_algolia):
    gw = gateway_factory(algolia_config(fake_algolia.url, writeTimeout="20s", timeout="10s"))
    # 3 MiB request body (under the default 10MiB maxBodySize) arrives intact
    objs = [{"objectID": str(i), "blob": "x" * 1000 + str(i)} for i in range(3000)]
    body = json.dumps({"requests": [{"action": "addObject", "body": o} for o in objs]}).encode()
    st, _, data = request(
        "POST",
        gw.url("/1/indexes/big/batch"),
        body=body,
        headers={"Content-Type": "application/json", "X-Algolia-API-Key": API_KEY, "X-Algolia-Application-Id": APP_ID},
        timeout=30,
    )
    assert st == 200, data[:300]
    rec = fake_algolia.requests("/1/indexes/big/batch")[-1]
    assert hashlib.sha256(rec.body).hexdigest() == hashlib.sha256(body).hexdigest()
    # 8 MiB response relayed intact
    size = 8 * 1024 * 1024
    st, _, data = request("GET", gw.url(f"/1/indexes/_bytes/x?size={size}"), timeout=30)
    assert st == 200
    assert len(data) == size
    block = bytes(range(256)) * 4096
    assert data == (block * 8)[:size]
    # and a JSON search answer of several MiB
    st, _, data = request(
        "POST",
        gw.url("/1/indexes/big/query"),
        body=b'{"hitsPerPage":3000}',
        headers={"Content-Type": "application/json"},
        timeout=30,
    )
    assert st == 200
    rec = fake_algolia.requests("/1/indexes/big/query")[-1]
    assert len(data) > 3_000_000
    assert hashlib.sha256(data).hexdigest() == hashlib.sha256(rec.response_body).hexdigest()


def test_read_and_write_hosts(gateway_factory):
    from upstreams.fake_algolia import FakeAlgolia

    reader = FakeAlgolia(name="reader").start()
    writer = FakeAlgolia(name="writer").start()
    try:
        gw = gateway_factory(
            algolia_config({"url": reader.url, "accept": "read"}, {"url": writer.url, "accept": "write"})
        )
        client = make_client(gw.port)
        r = client.search_single_index("i", {"query": ""}).to_dict()
        assert r["_upstream"] == "reader"
        b = client.save_objects("i", [{"objectID": "1"}])
        assert b[0].to_dict()["_upstream"] == "writer"
        assert [x.path for x in client_records(reader)] == ["/1/indexes/i/query"]
        assert [x.path for x in client_records(writer)] == ["/1/indexes/i/batch"]
    finally:
        reader.stop()
        writer.stop()


def test_hosts_tried_in_order_on_refusal(gateway_factory, fake_algolia):
    from upstreams.faults import refused_port

    dead = f"http://127.0.0.1:{refused_port()}"
    gw = gateway_factory(algolia_config(dead, fake_algolia.url))
    client = make_client(gw.port)
    res = client.search_single_index("i", {"query": ""}).to_dict()
    assert res["_upstream"] == fake_algolia.name


def test_hop_by_hop_headers_are_not_forwarded(algolia_gateway, fake_algolia):
    """RFC 9110 §7.6.1: Connection and the fields it names are the proxy's own; end-to-end ones pass."""
    st, _, _ = request(
        "POST",
        algolia_gateway.url("/1/indexes/i/query"),
        body=b"{}",
        headers={
            **{"X-Algolia-Application-Id": APP_ID, "X-Algolia-API-Key": API_KEY},
            "Connection": "keep-alive, X-Private-Hop",
            "X-Private-Hop": "secret",
            "Keep-Alive": "timeout=5",
            "Proxy-Authorization": "Basic Zm9vOmJhcg==",
            "X-End-To-End": "yes",
        },
    )
    assert st == 200
    rec = fake_algolia.requests("/1/indexes/i/query")[-1]
    assert rec.header("X-Private-Hop") is None, "a field named by Connection must be dropped"
    assert rec.header("Keep-Alive") is None
    assert rec.header("Proxy-Authorization") is None
    assert rec.header("X-End-To-End") == "yes"
    assert rec.header("Host") == f"127.0.0.1:{fake_algolia.port}", "Host must name the upstream"


def test_expect_100_continue(algolia_gateway, fake_algolia):
    import socket
    import time

    body = b'{"query":"' + b"q" * 2000 + b'"}'
    s = socket.create_connection(("127.0.0.1", algolia_gateway.port), timeout=5)
    try:
        s.sendall(
            b"POST /1/indexes/i/query HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Expect: 100-continue\r\nContent-Length: %d\r\n\r\n" % len(body)
        )
        s.settimeout(2)
        try:
            interim = s.recv(1024)
        except socket.timeout:
            interim = b""  # a server may also just wait for the body
        if interim:
            assert interim.startswith(b"HTTP/1.1 100"), interim[:100]
        s.sendall(body)
        s.settimeout(5)
        data = b""
        deadline = time.monotonic() + 5
        for _ in range(100):
            if time.monotonic() > deadline or (b"\r\n\r\n" in data and data.rstrip().endswith(b"}")):
                break
            try:
                c = s.recv(65536)
            except socket.timeout:
                break
            if not c:
                break
            data += c
    finally:
        s.close()
    assert data.startswith(b"HTTP/1.1 200"), data[:200]
    rec = fake_algolia.requests("/1/indexes/i/query")[-1]
    assert rec.body == body
    assert rec.header("Expect") is None


def test_async_official_client(algolia_gateway, fake_algolia):
    import asyncio

    from algoliasearch.search.client import SearchClient

    fake_algolia.seed("movies", [{"objectID": "1", "title": "Alien"}])

    async def run():
        config = SearchConfig(APP_ID, API_KEY)
        config.hosts = HostsCollection([Host(url="127.0.0.1", scheme="http", port=algolia_gateway.port)])
        async with SearchClient.create_with_config(config=config) as c:
            return (await c.search_single_index("movies", {"query": "ali"})).to_dict()

    res = asyncio.run(asyncio.wait_for(run(), timeout=20))
    assert [h["objectID"] for h in res["hits"]] == ["1"]
    assert res["_upstream"] == fake_algolia.name


def test_concurrent_clients(algolia_gateway, fake_algolia):
    import threading

    fake_algolia.seed("c", [{"objectID": str(i), "t": f"item {i}"} for i in range(20)])
    statuses: list[int] = []
    lock = threading.Lock()

    def worker(n):
        for j in range(25):
            body = json.dumps({"query": f"item {(n * 25 + j) % 20}"}).encode()
            st, _, data = request(
                "POST", algolia_gateway.url("/1/indexes/c/query"), body=body, headers={"Content-Type": "application/json"}
            )
            ok = st == 200 and json.loads(data)["query"] == f"item {(n * 25 + j) % 20}"
            with lock:
                statuses.append(200 if ok else st)

    ts = [threading.Thread(target=worker, args=(n,), daemon=True) for n in range(8)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(timeout=60)
    assert statuses == [200] * 200
    assert len(fake_algolia.requests("/1/indexes/c/query")) == 200
