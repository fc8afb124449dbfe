"""Writes to a mirrored index with `offlineWrites: queue` (issue 14): while the upstream is unreachable a
write is applied to the mirror at once (read-your-writes, `origin: local`), queued durably with the
writer's own key, and answered with the gateway's own taskID; after `kill -9` and a restart the writes
are still in the mirror and in the queue; when the upstream returns they arrive there once each, in
order; a write the upstream refuses (its key was revoked meanwhile) is listed at
`/_mirrorgate/algolia/indices/{i}/failedWrites`; the sync that follows leaves the mirror equal to the
upstream. The unmodified `algoliasearch` 4.x client does every write.
"""

from __future__ import annotations

import copy
import json
import os
import signal
import time

import pytest
from algoliasearch.http.exceptions import RequestException
from algoliasearch.http.hosts import Host, HostsCollection
from algoliasearch.search.client import SearchClientSync
from algoliasearch.search.config import SearchConfig
from conftest import API_KEY, APP_ID
from harness import request
from upstreams.fake_algolia import FakeAlgolia

WRITER = "writer-key-1"
REVOKED = "writer-key-2"
STRANGER = "never-seen-key"
PRODUCTS = [{"objectID": f"p{i}", "name": f"phone {i}", "brand": "Acme", "price": 100 + i} for i in range(6)]
SETTINGS = {"searchableAttributes": ["name", "brand"], "attributesForFaceting": ["brand"]}


def client_for(gw, key: str) -> SearchClientSync:
    config = SearchConfig(APP_ID, key)
    config.hosts = HostsCollection([Host(url="127.0.0.1", scheme="http", port=gw.port)])
    return SearchClientSync.create_with_config(config=config)


def config(url: str, data_dir: str) -> dict:
    return {
        "dataDir": data_dir,
        "algolia": {
            "appId": APP_ID,
            "apiKey": API_KEY,
            "hosts": [url],
            "connectTimeout": "300ms",
            "timeout": "1500ms",
            "writeTimeout": "3s",
            "indices": {
                "products": {
                    "mirrored": True,
                    "offlineWrites": "queue",
                    "dataSelectionQueries": [{"query": {"query": ""}, "maxObjects": 1000}],
                }
            },
        },
    }


def wait_for(pred, timeout: float = 30.0, step: float = 0.1) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(step)
    return False


def local_ids(gw) -> dict[str, dict]:
    h = {"X-Algolia-Application-Id": APP_ID, "X-Algolia-API-Key": API_KEY, "X-Mirrorgate-Strategy": "offlineOnly"}
    st, headers, body = request(
        "POST", gw.url("/1/indexes/products/query"), body=json.dumps({"hitsPerPage": 1000}).encode(), headers=h
    )
    assert st == 200, body
    assert headers.get("x-mirrorgate-origin") == "local"
    return {h["objectID"]: h for h in json.loads(body)["hits"]}


def queue_state(gw) -> dict:
    st, _, body = request("GET", gw.url("/_mirrorgate/algolia/indices/products/failedWrites"))
    assert st == 200, body
    return json.loads(body)


def sync(gw) -> None:
    """Runs a sync; if the start-up sync is running (409), waits for it instead."""
    st, _, body = request("POST", gw.url("/_mirrorgate/algolia/indices/products/sync?wait=true"), timeout=20)
    if st == 200:
        return
    assert st == 409, body

    def done():
        idx = json.loads(request("GET", gw.url("/_mirrorgate/status"))[2])["algolia"]["indices"]["products"]
        return not idx["syncing"] and idx["lastSync"]

    assert wait_for(done, timeout=20)


def test_queued_writes_survive_kill_9_and_replay_in_order_once(gateway_factory, tmp_path):
    up = FakeAlgolia(browse_page_size=4).start()
    up.seed("products", PRODUCTS, SETTINGS)
    cfg = config(up.url, str(tmp_path / "data"))
    gw = gateway_factory(cfg)
    sync(gw)
    writer, revoked = client_for(gw, WRITER), client_for(gw, REVOKED)
    # Online: forwarded, and the upstream accepts both keys (the gateway remembers that).
    writer.save_objects("products", [{"objectID": "w0", "name": "online phone", "brand": "Acme"}], wait_for_tasks=True)
    revoked.save_objects("products", [{"objectID": "v0", "name": "other phone", "brand": "Acme"}], wait_for_tasks=True)
    assert {"w0", "v0"} <= set(up.indices["products"].objects)
    port, data = up.port, copy.deepcopy(up.indices)
    up.stop()

    # Offline: the first search fails over to the mirror and marks the upstream down.
    h = {"X-Algolia-Application-Id": APP_ID, "X-Algolia-API-Key": WRITER}
    st, headers, _ = request("POST", gw.url("/1/indexes/products/query"), body=b"{}", headers=h)
    assert st == 200 and headers.get("x-mirrorgate-origin") == "local"
    tasks = []
    tasks.append(writer.save_objects("products", [{"objectID": "q1", "name": "queued phone", "brand": "Queue"}])[0].task_id)
    tasks.append(writer.partial_update_objects("products", [{"objectID": "p0", "price": 999}])[0].task_id)
    tasks.append(writer.delete_objects("products", ["p1"])[0].task_id)
    auto = writer.save_object("products", {"name": "auto id phone", "brand": "Queue"})
    tasks.append(auto.task_id)
    tasks.append(revoked.save_objects("products", [{"objectID": "r1", "name": "refused phone"}])[0].task_id)
    assert all(isinstance(t, int) and t >= 2**52 for t in tasks)
    assert writer.get_task("products", tasks[0]).status == "notPublished"
    with pytest.raises(RequestException) as never:
        client_for(gw, STRANGER).save_objects("products", [{"objectID": "s1", "name": "stranger"}])
    assert never.value.status_code == 424 and "not queued" in str(never.value)
    # Read-your-writes, locally.
    mirror = local_ids(gw)
    assert {"q1", "r1", auto.object_id} <= set(mirror) and "p1" not in mirror and mirror["p0"]["price"] == 999
    assert queue_state(gw)["pending"] == 5

    # kill -9, restart while the upstream is still down: everything is still there.
    os.kill(gw.proc.pid, signal.SIGKILL)
    gw.proc.wait(timeout=5)
    gw.expect_exit = -9
    gw = gateway_factory(cfg, name="gw2")
    mirror = local_ids(gw)
    assert {"q1", "r1", auto.object_id} <= set(mirror) and "p1" not in mirror and mirror["p0"]["price"] == 999
    assert queue_state(gw) == {"index": "products", "pending": 5, "failedWrites": []}
    writer = client_for(gw, WRITER)
    assert writer.get_task("products", tasks[1]).status == "notPublished"

    # The upstream returns, and has revoked one key meanwhile.
    up2 = FakeAlgolia(port=port, browse_page_size=4)
    up2.indices = data
    up2.revoked_keys = {REVOKED}
    up2.start()
    try:
        # A forwarded read shows the upstream is back (else the probe would, after its backoff).
        st, _, _ = request(
            "POST", gw.url("/1/indexes/products/query"), body=b"{}",
            headers={**h, "X-Mirrorgate-Strategy": "onlineOnly"},
        )
        assert st == 200
        assert wait_for(lambda: queue_state(gw)["pending"] == 0), queue_state(gw)
        # Writes only: searches, browses and the sync's synonym/rule searches are reads.
        reads = ("/query", "/browse", "/search")
        writes = [
            r for r in up2.requests("/1/indexes/products")
            if r.method in ("POST", "PUT", "DELETE") and not r.path.endswith(reads)
        ]
        seen = [(r.method, r.path, r.json()) for r in writes]
        assert [m for m, _, _ in seen] == ["POST", "POST", "POST", "PUT", "POST"], seen
        assert seen[0][2]["requests"][0]["body"]["objectID"] == "q1"
        assert seen[1][2]["requests"] == [{"action": "partialUpdateObjectNoCreate", "body": {"objectID": "p0", "price": 999}}]
        assert seen[2][2]["requests"] == [{"action": "deleteObject", "body": {"objectID": "p1"}}]
        assert seen[3][1] == f"/1/indexes/products/{auto.object_id}"  # the gateway's objectID, kept upstream
        assert seen[4][2]["requests"][0]["body"]["objectID"] == "r1"
        assert writes[4].header("X-Algolia-API-Key") == REVOKED and writes[0].header("X-Algolia-API-Key") == WRITER
        objects = up2.indices["products"].objects
        assert "q1" in objects and "p1" not in objects and objects["p0"]["price"] == 999 and auto.object_id in objects
        assert "r1" not in objects
        failed = queue_state(gw)["failedWrites"]
        assert len(failed) == 1 and failed[0]["status"] == 403 and failed[0]["taskID"] == tasks[4]
        assert failed[0]["body"]["requests"][0]["body"]["objectID"] == "r1"
        assert REVOKED not in json.dumps(failed) and WRITER not in json.dumps(failed)  # no credentials listed
        # The local tasks follow the upstream's; a refused one is over too.
        for t in tasks:
            assert writer.wait_for_task("products", t).status == "published"
        # The sync after the replay repairs the mirror: it equals the upstream (r1 gone).
        assert wait_for(lambda: set(local_ids(gw)) == set(up2.indices["products"].objects)), (
            set(local_ids(gw)) ^ set(up2.indices["products"].objects)
        )
        # Back online: writes are forwarded again.
        before = len(up2.requests("/1/indexes/products/batch"))
        writer.save_objects("products", [{"objectID": "after", "name": "online again"}], wait_for_tasks=True)
        assert len(up2.requests("/1/indexes/products/batch")) == before + 1
    finally:
        up2.stop()


def test_reject_is_the_default(gateway_factory, tmp_path):
    up = FakeAlgolia(browse_page_size=4).start()
    up.seed("products", PRODUCTS, SETTINGS)
    cfg = config(up.url, str(tmp_path / "data"))
    del cfg["algolia"]["indices"]["products"]["offlineWrites"]
    gw = gateway_factory(cfg)
    sync(gw)
    writer = client_for(gw, WRITER)
    writer.save_objects("products", [{"objectID": "w0", "name": "online"}], wait_for_tasks=True)
    up.stop()
    for _ in range(2):  # the first finds the upstream down, the second knows it
        with pytest.raises(RequestException) as e:
            writer.save_objects("products", [{"objectID": "w1", "name": "offline"}])
        assert e.value.status_code == 424
    assert "w1" not in local_ids(gw)
    st, _, _ = request("GET", gw.url("/_mirrorgate/algolia/indices/nope/failedWrites"))
    assert st == 404


def test_the_first_write_after_the_upstream_stops_is_queued_when_it_was_not_sent(gateway_factory, tmp_path):
    """Issue 25: the upstream stops just before the write (its port refuses connections) and nothing has told
    the gateway yet (no read, no wait for the reachability probe): the official client's `batch` is queued and
    acknowledged like any offline write, because nothing of it reached the upstream."""
    up = FakeAlgolia(browse_page_size=4).start()
    up.seed("products", PRODUCTS, SETTINGS)
    cfg = config(up.url, str(tmp_path / "data"))
    gw = gateway_factory(cfg)
    sync(gw)
    writer = client_for(gw, WRITER)
    writer.save_objects("products", [{"objectID": "w0", "name": "online phone", "brand": "Acme"}], wait_for_tasks=True)
    assert status_reachable(gw) is True
    port, data = up.port, copy.deepcopy(up.indices)
    up.stop()

    answer = writer.batch_with_http_info(
        "products", {"requests": [{"action": "addObject", "body": {"objectID": "first", "name": "first offline phone"}}]}
    )
    assert answer.status_code == 200, answer.raw_data
    assert answer.headers.get("x-mirrorgate-origin") == "local"
    body = json.loads(answer.raw_data)
    assert body["objectIDs"] == ["first"] and body["taskID"] >= 2**52
    assert writer.get_task("products", body["taskID"]).status == "notPublished"
    assert "first" in local_ids(gw)
    assert queue_state(gw)["pending"] == 1
    assert status_reachable(gw) is False  # the refused connection told the tracker

    # The upstream comes back: the write arrives there once.
    up2 = FakeAlgolia(port=port, browse_page_size=4)
    up2.indices = data
    up2.start()
    try:
        assert wait_for(lambda: queue_state(gw)["pending"] == 0), queue_state(gw)
        assert "first" in up2.indices["products"].objects
        assert writer.wait_for_task("products", body["taskID"]).status == "published"
        assert len(up2.requests("/1/indexes/products/batch", method="POST")) == 1
    finally:
        up2.stop()


def test_a_write_that_may_have_reached_the_upstream_is_not_queued(gateway_factory, tmp_path):
    """Issue 25: a forwarded write that was sent and got no answer (the connection reset after the request) may
    have been applied upstream: it gets `unavailableStatus` saying so, and is neither queued nor applied to the
    mirror."""
    up = FakeAlgolia(browse_page_size=4).start()
    try:
        up.seed("products", PRODUCTS, SETTINGS)
        gw = gateway_factory(config(up.url, str(tmp_path / "data")))
        sync(gw)
        writer = client_for(gw, WRITER)
        writer.save_objects("products", [{"objectID": "w0", "name": "online phone"}], wait_for_tasks=True)
        up.raw_fault = "reset"
        with pytest.raises(RequestException) as doubt:
            writer.batch_with_http_info(
                "products", {"requests": [{"action": "addObject", "body": {"objectID": "doubt", "name": "in doubt"}}]}
            )
        assert doubt.value.status_code == 424
        assert "may have reached the upstream" in str(doubt.value) and "outcome is unknown" in str(doubt.value)
        assert len([r for r in up.requests("/1/indexes/products/batch") if b"doubt" in r.body]) == 1  # it was sent
        assert queue_state(gw)["pending"] == 0
        assert "doubt" not in local_ids(gw)
    finally:
        up.stop()


def status_reachable(gw):
    st, _, body = request("GET", gw.url("/_mirrorgate/status"))
    assert st == 200, body
    return json.loads(body)["upstreams"]["algolia"]["reachable"]
