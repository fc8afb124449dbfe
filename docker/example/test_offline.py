"""An example integration test against the compose kit (docker/compose.yaml): switch an upstream off and on
and see the gateway answer locally meanwhile. Standard library + pytest; copy it into your own suite.

Run it after `docker compose -f docker/compose.yaml up -d` (docker/test-compose.sh does everything):

    MIRRORGATE_URL=http://127.0.0.1:8080 FAKE_ODATA_URL=http://127.0.0.1:8082 \
    COMPOSE="docker compose -f docker/compose.yaml" python -m pytest -q docker/example/test_offline.py

Environment: MIRRORGATE_URL, FAKE_ALGOLIA_URL, FAKE_ODATA_URL (the kit's published ports), MIRRORGATE_ADMIN_TOKEN
(default kit-admin-token), COMPOSE (the command that stops and starts the kit's services).
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import time
import urllib.error
import urllib.request

GATEWAY = os.environ.get("MIRRORGATE_URL", "http://127.0.0.1:8080")
FAKE_ALGOLIA = os.environ.get("FAKE_ALGOLIA_URL", "http://127.0.0.1:8081")
FAKE_ODATA = os.environ.get("FAKE_ODATA_URL", "http://127.0.0.1:8082")
TOKEN = os.environ.get("MIRRORGATE_ADMIN_TOKEN", "kit-admin-token")
COMPOSE = shlex.split(os.environ.get("COMPOSE", "docker compose -f docker/compose.yaml"))
ALGOLIA_HEADERS = {"X-Algolia-Application-Id": "KITAPP", "X-Algolia-API-Key": "kit-search-key"}
ADMIN = {"Authorization": f"Bearer {TOKEN}"}


def call(method: str, url: str, body=None, headers: dict | None = None, timeout: float = 30):
    """(status, headers, parsed JSON or None); HTTP errors are answers too."""
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method, headers=dict(headers or {}))
    if data is not None:
        req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            status, hdrs, raw = r.status, r.headers, r.read()
    except urllib.error.HTTPError as e:
        status, hdrs, raw = e.code, e.headers, e.read()
    try:
        doc = json.loads(raw) if raw else None
    except ValueError:
        doc = None
    return status, hdrs, doc


def compose(*args: str) -> None:
    subprocess.run([*COMPOSE, *args], check=True, timeout=120, stdout=subprocess.DEVNULL)


def until(what: str, probe, tries: int = 60, pause: float = 0.5):
    """Polls probe() until it returns a truthy value: at most `tries` times, `pause` seconds apart."""
    last = None
    for _ in range(tries):
        try:
            last = probe()
        except OSError as e:  # connection refused while a service restarts
            last = e
        if last and not isinstance(last, OSError):
            return last
        time.sleep(pause)
    raise AssertionError(f"{what}: not within {tries * pause:.0f} s (last: {last!r})")


def admin_run(path: str) -> dict:
    """POSTs an admin action with ?wait=true until it ran: 409 means the gateway's own run of it is under
    way (at start, or on reconnect), so ask again once that one is over."""

    def attempt():
        status, _, doc = call("POST", f"{GATEWAY}{path}", headers=ADMIN)
        assert status in (200, 409), (path, status, doc)
        return doc if status == 200 else None

    return until(f"POST {path}", attempt)


def search(query: str):
    return call("POST", f"{GATEWAY}/1/indexes/packages/query", {"query": query, "hitsPerPage": 5}, ALGOLIA_HEADERS)


def test_algolia_search_is_answered_locally_while_the_upstream_is_off():
    # fill the mirror now (the gateway also syncs by itself, at start and on its policy's schedule)
    doc = admin_run("/_mirrorgate/algolia/indices/packages/sync?wait=true")
    assert doc["objects"] == 201, doc
    status, _, online = search("python")
    assert status == 200 and online["origin"] == "remote", online
    try:
        compose("stop", "algolia")
        status, _, offline = search("python")
        assert status == 200, offline
        assert offline["origin"] == "local", offline
        assert {h["objectID"] for h in offline["hits"]} & {"python3", "python3-reportbug"}, offline["hits"]
        # a typo, answered by the local engine the way Algolia would
        assert search("pythn")[2]["hits"][0]["objectID"].startswith("python"), "typo tolerance"
    finally:
        compose("start", "algolia")
    until("the fake Algolia is back", lambda: call("GET", f"{FAKE_ALGOLIA}/_fake/ready")[0] == 200)
    until("answers come from the upstream again", lambda: search("python")[2].get("origin") == "remote")


def test_odata_reads_and_writes_go_on_while_the_upstream_is_off_and_upload_after():
    doc = admin_run("/_mirrorgate/odata/services/northwind/download?wait=true")
    assert doc["entitySets"]["Customers"] > 0, doc
    customer = {"CustomerID": "KIT01", "CompanyName": "Compose Kit", "City": "Turin", "Country": "Italy"}
    try:
        compose("stop", "odata")
        status, hdrs, doc = call("GET", f"{GATEWAY}/odata/northwind/Customers?$orderby=CustomerID")
        assert status == 200 and hdrs["X-Mirrorgate-Origin"] == "local", (status, dict(hdrs))
        assert [c["CustomerID"] for c in doc["value"]][:1] == ["ALFKI"], doc
        # a write while offline: applied to the mirror, queued durably, read back at once
        status, _, created = call("POST", f"{GATEWAY}/odata/northwind/Customers", customer)
        assert status == 201, created
        status, _, doc = call("GET", f"{GATEWAY}/odata/northwind/Customers('KIT01')")
        assert status == 200 and doc["CompanyName"] == "Compose Kit", doc
        status, _, st = call("GET", f"{GATEWAY}/_mirrorgate/status", headers=ADMIN)
        assert st["odata"]["services"]["northwind"]["pendingRequests"] == 1, st["odata"]
    finally:
        compose("start", "odata")
    until("the fake OData service is back", lambda: call("GET", f"{FAKE_ODATA}/_fake/ready")[0] == 200)

    def uploaded():
        # the gateway uploads by itself on reconnect; asking too is harmless (409 while one runs)
        call("POST", f"{GATEWAY}/_mirrorgate/odata/services/northwind/upload?wait=true", headers=ADMIN)
        _, _, st = call("GET", f"{GATEWAY}/_mirrorgate/status", headers=ADMIN)
        return st["odata"]["services"]["northwind"]["pendingRequests"] == 0

    until("the queued write is uploaded", uploaded)
    status, _, doc = call("GET", f"{FAKE_ODATA}/nw.svc/Customers('KIT01')")
    assert status == 200 and doc["City"] == "Turin", (status, doc)
