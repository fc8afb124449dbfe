"""A sync killed with `kill -9` mid-way never leaves a half-built mirror: after a restart (same dataDir,
upstream gone) the gateway answers locally from the version the first, complete sync stored."""

from __future__ import annotations

import json
import os
import signal

import pytest
from conftest import API_KEY, APP_ID
from harness import request
from test_mirrored import deep, mirrored_config, sync, wait_for
from upstreams.fake_algolia import FakeAlgolia

FIRST = [{"objectID": f"a{i:03d}", "name": f"alpha record {i}", "brand": "Alpha", "price": i} for i in range(40)]
SECOND = [{"objectID": f"b{i:03d}", "name": f"beta record {i}", "brand": "Beta", "price": i} for i in range(200)]
SETTINGS = {"searchableAttributes": ["name", "brand"], "attributesForFaceting": ["brand"]}


@pytest.fixture
def slow_upstream():
    f = FakeAlgolia(browse_page_size=5).start()
    f.seed("products", FIRST, SETTINGS)
    yield f
    if not f.stopping:
        f.stop()


def local_search(gw, params: dict):
    h = {"X-Algolia-Application-Id": APP_ID, "X-Algolia-API-Key": API_KEY, "Content-Type": "application/json"}
    return request("POST", gw.url("/1/indexes/products/query"), body=json.dumps(params).encode(), headers=h, timeout=10)


def test_sync_killed_midway_leaves_the_previous_mirror_answering(gateway_factory, slow_upstream, tmp_path):
    data = tmp_path / "data"
    config = deep(mirrored_config(slow_upstream.url), {"dataDir": str(data)})
    gw = gateway_factory(config)
    first = sync(gw)
    assert first["objects"] == len(FIRST)

    # A second, slow sync of a bigger data set: 240 objects, 5 per page, 0.1 s per call (~5 s).
    slow_upstream.seed("products", SECOND)
    slow_upstream.delay = 0.1
    slow_upstream.clear()
    st, _, body = request("POST", gw.url("/_mirrorgate/algolia/indices/products/sync"))
    assert st == 202, body
    assert wait_for(lambda: len(slow_upstream.requests("/1/indexes/products/browse")) >= 10, timeout=15)
    status = json.loads(request("GET", gw.url("/_mirrorgate/status"))[2])["algolia"]["indices"]["products"]
    assert status["syncing"] is True, status  # killed mid-way, not after the end
    os.kill(gw.proc.pid, signal.SIGKILL)
    gw.proc.wait(timeout=5)
    gw.expect_exit = -9
    browsed = len(slow_upstream.requests("/1/indexes/products/browse"))
    assert browsed < len(FIRST + SECOND) // 5  # it really was interrupted before the last page
    slow_upstream.stop()

    gw2 = gateway_factory(config, name="gw2")
    st, headers, body = local_search(gw2, {"query": "", "hitsPerPage": 1000, "facets": ["brand"]})
    assert st == 200, body
    assert headers.get("x-mirrorgate-origin") == "local"
    doc = json.loads(body)
    assert doc["origin"] == "local"
    assert doc["nbHits"] == len(FIRST)
    assert doc["facets"]["brand"] == {"Alpha": len(FIRST)}
    assert {h["objectID"] for h in doc["hits"]} == {o["objectID"] for o in FIRST}
    st, _, body = local_search(gw2, {"query": "beta"})
    assert st == 200 and json.loads(body)["nbHits"] == 0
    idx = json.loads(request("GET", gw2.url("/_mirrorgate/status"))[2])["algolia"]["indices"]["products"]
    assert idx["hasOfflineData"] is True
    assert idx["objects"] == len(FIRST)
    assert idx["lastSuccessfulSyncAt"]
