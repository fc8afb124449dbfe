"""Operations (issue 18 items 4-6): token-free probes, Prometheus metrics that promtool accepts (HELP and
TYPE for every family, build info, process metrics, data ages, run outcomes, oldest queued request), honest
reachability after a restart, request IDs, traceparent forwarding, and logs that tools read (JSON with
typed fields, logfmt text).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time

from conftest import API_KEY, APP_ID, algolia_config
from harness import deep_merge, raw_exchange, request
from test_mirrored import PRODUCTS, SETTINGS, mirrored_config, sync

HEADERS = {"X-Algolia-Application-Id": APP_ID, "X-Algolia-API-Key": API_KEY, "Content-Type": "application/json"}
TOKEN = "ops-admin-token-7f3a"
HEX32 = re.compile(r"^[0-9a-f]{32}$")


def metrics_text(gw) -> str:
    st, hdrs, body = request("GET", gw.url("/metrics"))
    assert st == 200, body
    assert hdrs["content-type"].startswith("text/plain"), hdrs
    return body.decode()


def promtool_check(text: str) -> None:
    """`promtool check metrics` (from Debian's prometheus package, installed by scripts/setup.sh --test)."""
    exe = shutil.which("promtool")
    assert exe, "promtool is missing: run scripts/setup.sh --test (Debian package prometheus)"
    done = subprocess.run([exe, "check", "metrics"], input=text.encode(), capture_output=True, timeout=30)
    report = (done.stdout + done.stderr).decode()
    assert done.returncode == 0 and not report.strip(), f"promtool check metrics:\n{report}"


def sample(text: str, name: str, **labels) -> float | None:
    """The value of the sample `name{labels}` (labels matched exactly as a set), or None."""
    for line in text.splitlines():
        if line.startswith("#") or not line.startswith(name):
            continue
        m = re.match(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$", line)
        if not m or m.group(1) != name:
            continue
        got = dict(re.findall(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"', m.group(3) or ""))
        if got == {k: str(v) for k, v in labels.items()}:
            return float(m.group(4))
    return None


# ------------------------------------------------------------------------------------------------ probes


def test_probes_need_no_token_and_say_nothing_else(gateway_factory):
    gw = gateway_factory({"admin": {"token": TOKEN}})
    st, hdrs, body = request("GET", gw.url("/_mirrorgate/live"))
    assert st == 200, body
    assert json.loads(body) == {"status": "live"}
    st, _, body = request("GET", gw.url("/_mirrorgate/ready"))
    assert st == 200, body
    doc = json.loads(body)
    assert doc == {"status": "ready", "checks": {"configuration": "ok", "storage": "ok", "listener": "ok"}}, doc
    for path in ("/_mirrorgate/live", "/_mirrorgate/ready"):
        st, hdrs, body = request("POST", gw.url(path), body=b"{}")
        assert st == 405 and hdrs.get("allow") == "GET, HEAD", (st, hdrs, body)
        assert TOKEN not in body.decode()
    # everything else still needs the token
    st, hdrs, _ = request("GET", gw.url("/_mirrorgate/health"))
    assert st == 401 and hdrs.get("www-authenticate") == "Bearer"
    st, _, _ = request("GET", gw.url("/_mirrorgate/health"), headers=gw.admin_headers())
    assert st == 200


# ----------------------------------------------------------------------------------------------- metrics


def test_metrics_pass_promtool_with_build_process_age_and_outcomes(gateway_factory, fake_algolia):
    fake_algolia.seed("products", PRODUCTS, SETTINGS)
    gw = gateway_factory(mirrored_config(fake_algolia.url))
    stats = sync(gw)
    assert stats["objects"] == len(PRODUCTS), stats
    st, _, _ = request("POST", gw.url("/1/indexes/products/query"), body=b'{"query":"phone"}', headers=HEADERS)
    assert st == 200
    text = metrics_text(gw)
    promtool_check(text)
    types = re.findall(r"^# TYPE (\S+) ", text, re.M)
    helps = set(re.findall(r"^# HELP (\S+) ", text, re.M))
    assert types and set(types) <= helps, f"families without HELP: {set(types) - helps}"
    assert len(types) == len(set(types)), "a family's TYPE appears twice"
    assert sample(text, "mirrorgate_build_info", version=json.loads(request("GET", gw.url("/_mirrorgate/health"))[2])["version"]) == 1
    for name in (
        "process_cpu_seconds_total",
        "process_resident_memory_bytes",
        "process_open_fds",
        "process_max_fds",
        "process_start_time_seconds",
    ):
        assert (sample(text, name) or 0) > 0, f"{name} missing or 0"
    start = sample(text, "process_start_time_seconds")
    assert abs(start - time.time()) < 600, start
    age = sample(text, "mirrorgate_mirror_data_age_seconds", mirror="algolia:products")
    assert age is not None and 0 <= age < 60, age
    assert (sample(text, "mirrorgate_mirror_runs_total", mirror="algolia:products", outcome="success") or 0) >= 1
    assert sample(text, "mirrorgate_upstream_reachable", upstream="algolia") == 1
    # a failed sync is counted as such
    fake_algolia.fail_status = 503
    st, _, body = request("POST", gw.url("/_mirrorgate/algolia/indices/products/sync?wait=true"), timeout=20)
    assert st == 502, body
    assert json.loads(body)["status"] == 502
    fake_algolia.fail_status = None
    text = metrics_text(gw)
    assert sample(text, "mirrorgate_mirror_runs_total", mirror="algolia:products", outcome="failure") == 1
    promtool_check(text)


def test_oldest_queued_odata_request_age(gateway_factory, odata_upstream):
    from test_odata_offline import nw_config, wait_downloaded

    gw = gateway_factory(nw_config(odata_upstream.root, routing="localFirst"))
    wait_downloaded(gw, "nw")
    text = metrics_text(gw)
    assert sample(text, "mirrorgate_odata_queue_oldest_age_seconds", service="nw") == 0
    # localFirst: a write is queued until the upload; the upstream stopped keeps it queued
    odata_upstream.stop()
    st, _, body = request(
        "PATCH",
        gw.url("/odata/nw/Customers('ALFKI')"),
        body=b'{"CompanyName":"Queued"}',
        headers={"Content-Type": "application/json", "Accept": "application/json"},
    )
    assert st in (200, 204), body
    time.sleep(1.2)
    text = metrics_text(gw)
    assert (sample(text, "mirrorgate_odata_queue_length", service="nw") or 0) >= 1, text
    age = sample(text, "mirrorgate_odata_queue_oldest_age_seconds", service="nw")
    assert age is not None and 1.0 <= age < 60, age
    promtool_check(text)


def test_reachability_is_honest_after_a_restart(gateway_factory, odata_upstream):
    """localFirst with its data downloaded: after a restart nothing calls the upstream, yet status and the
    metric must not say it is reachable when nothing listens (unknown until probed, then the truth)."""
    from test_odata_offline import nw_config, wait_downloaded

    gw = gateway_factory(nw_config(odata_upstream.root, routing="localFirst"))
    wait_downloaded(gw, "nw")
    code, _ = gw.terminate()
    assert code == 0
    odata_upstream.stop()
    gw.start()
    seen = []
    deadline = time.monotonic() + 15
    for _ in range(300):
        doc = json.loads(request("GET", gw.url("/_mirrorgate/status"))[2])
        value = doc["upstreams"]["odata:nw"]["reachable"]
        metric = sample(metrics_text(gw), "mirrorgate_upstream_reachable", upstream="odata:nw")
        seen.append((value, doc["odata"]["services"]["nw"]["reachable"], metric))
        if value is False or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert seen[-1] == (False, False, 0), seen
    assert all(v in (None, False) and s in (None, False) and m in (None, 0) for v, s, m in seen), seen


# ------------------------------------------------------------------------------------- request IDs, tracing


def test_request_id_is_kept_or_minted_returned_and_forwarded(algolia_gateway, fake_algolia):
    gw = algolia_gateway
    traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    st, hdrs, _ = request(
        "POST",
        gw.url("/1/indexes/i/query"),
        body=b"{}",
        headers={**HEADERS, "X-Request-Id": "client-id-42", "traceparent": traceparent, "tracestate": "vendor=1"},
    )
    assert st == 200
    assert hdrs["x-request-id"] == "client-id-42"
    rec = fake_algolia.requests("/1/indexes/i/query")[-1]
    assert rec.header("x-request-id") == "client-id-42"
    assert rec.header("traceparent") == traceparent, "traceparent must reach the upstream unchanged"
    assert rec.header("tracestate") == "vendor=1"
    # none given: one is minted, returned and forwarded; no traceparent is invented
    st, hdrs, _ = request("POST", gw.url("/1/indexes/i/query"), body=b"{}", headers=HEADERS)
    assert st == 200 and HEX32.match(hdrs["x-request-id"]), hdrs
    rec = fake_algolia.requests("/1/indexes/i/query")[-1]
    assert rec.header("x-request-id") == hdrs["x-request-id"]
    assert rec.header("traceparent") is None
    # an unusable one (spaces, quotes) is replaced
    st, hdrs, _ = request("GET", gw.url("/_mirrorgate/health"), headers={"X-Request-Id": 'a "b" c'})
    assert st == 200 and HEX32.match(hdrs["x-request-id"]), hdrs
    # the server's own answers carry it too: a 404 and a body over the limit (413)
    st, hdrs, _ = request("GET", gw.url("/nowhere"), headers={"X-Request-Id": "r-404"})
    assert st == 404 and hdrs["x-request-id"] == "r-404"
    head = (
        f"POST /1/indexes/i/query HTTP/1.1\r\nHost: 127.0.0.1:{gw.port}\r\nX-Request-Id: r-413\r\n"
        f"Content-Length: {11 << 20}\r\n\r\n"
    )
    answer = raw_exchange(gw.port, head.encode())
    assert answer.startswith(b"HTTP/1.1 413"), answer[:200]
    assert b"\r\nX-Request-Id: r-413\r\n" in answer, answer[:400]


# ------------------------------------------------------------------------------------------------------ logs


def access_lines_json(gw) -> list[dict]:
    docs = [json.loads(line) for line in gw.stderr().splitlines() if line.strip()]
    return [d for d in docs if d.get("logger") == "mirrorgate.access"]


def test_json_logs_have_typed_fields(gateway_factory, fake_algolia):
    gw = gateway_factory(deep_merge(algolia_config(fake_algolia.url), {"log": {"format": "json"}}))
    st, hdrs, _ = request(
        "POST", gw.url("/1/indexes/i/query?x-algolia-api-key=secret-in-query"), body=b"{}", headers=HEADERS
    )
    assert st == 200
    rid = hdrs["x-request-id"]
    line = None
    for _ in range(40):
        line = next((d for d in access_lines_json(gw) if d.get("request_id") == rid), None)
        if line:
            break
        time.sleep(0.05)
    assert line, gw.stderr()[-2000:]
    assert line["method"] == "POST" and line["path"] == "/1/indexes/i/query", line
    assert line["status"] == 200 and isinstance(line["status"], int), line
    assert isinstance(line["duration_ms"], (int, float)) and line["duration_ms"] >= 0, line
    assert isinstance(line["upstream_ms"], (int, float)) and 0 <= line["upstream_ms"] <= line["duration_ms"] + 1, line
    # an index neither mirrored nor offline: forwarded, no X-Mirrorgate-Origin
    assert line["origin"] == "none" and line["route"] == "algolia", line
    assert isinstance(line["time"], str) and line["level"] == "info"
    text = gw.stderr()
    assert API_KEY not in text and "secret-in-query" not in text


LOGFMT_PAIR = re.compile(r'([A-Za-z0-9_.\-]+)=("(?:[^"\\]|\\.)*"|[^\s"=]+)')


def parse_logfmt(line: str) -> dict:
    pairs = LOGFMT_PAIR.findall(line)
    rebuilt = " ".join(f"{k}={v}" for k, v in pairs)
    assert rebuilt == line, f"not logfmt: {line!r}"
    return {k: json.loads(v) if v.startswith('"') else v for k, v in pairs}


def test_text_logs_are_logfmt(gateway_factory, fake_algolia):
    gw = gateway_factory(algolia_config(fake_algolia.url))
    st, hdrs, _ = request("POST", gw.url("/1/indexes/i/query"), body=b"{}", headers=HEADERS)
    assert st == 200
    rid = hdrs["x-request-id"]
    found = None
    for _ in range(40):
        lines = [ln for ln in gw.stderr().splitlines() if ln.strip()]
        parsed = [parse_logfmt(ln) for ln in lines]
        found = next((p for p in parsed if p.get("request_id") == rid), None)
        if found:
            break
        time.sleep(0.05)
    assert found, gw.stderr()[-2000:]
    assert found["logger"] == "mirrorgate.access" and found["level"] == "info"
    assert found["msg"] == "POST /1/indexes/i/query 200"
    assert found["status"] == "200" and found["method"] == "POST" and float(found["duration_ms"]) >= 0
    assert float(found["upstream_ms"]) >= 0
    assert all("time" in p and "level" in p and "msg" in p for p in parsed)
