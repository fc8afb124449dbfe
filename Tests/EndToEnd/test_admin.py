"""Admin endpoints, metrics and CORS (SPEC §3 CORS, §5)."""

from __future__ import annotations

import json
import re

from conftest import API_KEY, APP_ID, algolia_config
from harness import deep_merge, request

HEADERS = {"X-Algolia-Application-Id": APP_ID, "X-Algolia-API-Key": API_KEY, "Content-Type": "application/json"}


def test_health_shape(algolia_gateway):
    st, hdrs, body = request("GET", algolia_gateway.url("/_mirrorgate/health"))
    assert st == 200
    assert "json" in hdrs.get("content-type", "")
    doc = json.loads(body)
    assert doc["status"] == "ok"
    assert isinstance(doc["version"], str) and doc["version"]


def test_status_lists_upstreams(algolia_gateway, fake_algolia):
    request("POST", algolia_gateway.url("/1/indexes/i/query"), body=b"{}", headers=HEADERS)
    st, _, body = request("GET", algolia_gateway.url("/_mirrorgate/status"))
    assert st == 200
    doc = json.loads(body)
    assert isinstance(doc["version"], str)
    assert "algolia" in doc["upstreams"], doc
    alg = doc["upstreams"]["algolia"]
    assert alg["reachable"] is True
    assert "since" in alg


def test_metrics_count_requests(algolia_gateway, fake_algolia):
    gw = algolia_gateway
    for _ in range(3):
        st, _, _ = request("POST", gw.url("/1/indexes/i/query"), body=b"{}", headers=HEADERS)
        assert st == 200
    request("GET", gw.url("/nope"))
    st, hdrs, body = request("GET", gw.url("/metrics"))
    assert st == 200
    assert hdrs.get("content-type", "").startswith("text/plain"), hdrs
    text = body.decode()
    counters = re.findall(r"^# TYPE (\S+) counter$", text, re.M)
    req_counters = [c for c in counters if "request" in c]
    assert req_counters, f"no request counter among {counters}"
    # some sample of a request counter has a value >= 3 (the three searches)
    values = []
    for name in req_counters:
        for m in re.finditer(rf"^{re.escape(name)}(?:_total)?(\{{[^}}]*\}})? ([0-9.e+]+)$", text, re.M):
            values.append(float(m.group(2)))
    assert values and max(values) >= 3, f"request counters: {values}"
    assert re.search(r"^# TYPE \S+ histogram$", text, re.M), "a latency histogram is expected"


def cors_gateway(factory, fake, origins):
    return factory(deep_merge(algolia_config(fake.url), {"server": {"cors": {"allowOrigins": origins}}}))


PREFLIGHT = {
    "Access-Control-Request-Method": "POST",
    "Access-Control-Request-Headers": "x-algolia-api-key,x-algolia-application-id,content-type",
}


def test_cors_preflight_answered_locally(gateway_factory, fake_algolia):
    gw = cors_gateway(gateway_factory, fake_algolia, ["http://app.example"])
    st, hdrs, _ = request("OPTIONS", gw.url("/1/indexes/i/query"), headers={"Origin": "http://app.example", **PREFLIGHT})
    assert st in (200, 204)
    assert hdrs.get("access-control-allow-origin") == "http://app.example"
    assert "post" in hdrs.get("access-control-allow-methods", "").lower()
    allowed = hdrs.get("access-control-allow-headers", "").lower()
    assert "x-algolia-api-key" in allowed or allowed == "*"
    assert fake_algolia.requests(method="OPTIONS") == [], "a preflight must not reach the upstream"


def test_cors_actual_request_exposes_origin_header(gateway_factory, fake_algolia):
    gw = cors_gateway(gateway_factory, fake_algolia, ["http://app.example"])
    st, hdrs, _ = request(
        "POST", gw.url("/1/indexes/i/query"), body=b"{}", headers={"Origin": "http://app.example", **HEADERS}
    )
    assert st == 200
    assert hdrs.get("access-control-allow-origin") == "http://app.example"
    assert "x-mirrorgate-origin" in hdrs.get("access-control-expose-headers", "").lower()


def test_cors_unlisted_origin_gets_no_allow_header(gateway_factory, fake_algolia):
    gw = cors_gateway(gateway_factory, fake_algolia, ["http://app.example"])
    st, hdrs, _ = request("OPTIONS", gw.url("/1/indexes/i/query"), headers={"Origin": "http://evil.example", **PREFLIGHT})
    assert "access-control-allow-origin" not in hdrs
    st, hdrs, _ = request(
        "POST", gw.url("/1/indexes/i/query"), body=b"{}", headers={"Origin": "http://evil.example", **HEADERS}
    )
    assert "access-control-allow-origin" not in hdrs


def test_cors_none_by_default(algolia_gateway, fake_algolia):
    st, hdrs, _ = request(
        "OPTIONS", algolia_gateway.url("/1/indexes/i/query"), headers={"Origin": "http://app.example", **PREFLIGHT}
    )
    assert "access-control-allow-origin" not in hdrs


def test_metrics_show_upstream_reachability(algolia_gateway, fake_algolia):
    request("POST", algolia_gateway.url("/1/indexes/i/query"), body=b"{}", headers=HEADERS)
    st, _, body = request("GET", algolia_gateway.url("/metrics"))
    assert st == 200
    text = body.decode()
    assert re.search(r"^[a-z_]*(reachab|upstream)[a-z_]*(\{[^}]*\})? [0-9.e+-]+$", text, re.M), (
        "expected an upstream reachability metric"
    )


def test_json_access_log(gateway_factory, fake_algolia):
    import time

    gw = gateway_factory(deep_merge(algolia_config(fake_algolia.url), {"log": {"format": "json"}}))
    request("POST", gw.url("/1/indexes/i/query"), body=b"{}", headers=HEADERS)
    time.sleep(0.3)
    lines = [ln for ln in gw.stderr().splitlines() if ln.strip()]
    assert lines
    docs = []
    for ln in lines:
        docs.append(json.loads(ln))  # every line is one JSON document
    assert any("/1/indexes/i/query" in json.dumps(d) for d in docs), docs
    assert API_KEY not in gw.stderr()
