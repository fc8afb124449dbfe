"""Writable offline indices (issue 14): the unmodified `algoliasearch` 4.x client writes to purely local
indices with its own helpers (save_objects + wait_for_task, partial_update_objects, delete_objects,
replace_all_objects, set_settings, save_synonyms, save_rules, operation_index copy/move, multiple_batch)
and every search afterwards sees the change; keys without the ACL a call needs get Algolia's 403; bad
input gets Algolia's error shapes; acknowledged writes survive `kill -9`, and a batch killed mid-way is all
or nothing. No upstream exists here: every answer is local.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time

import pytest
from algoliasearch.http.exceptions import RequestException
from algoliasearch.http.hosts import Host, HostsCollection
from algoliasearch.search.client import SearchClientSync
from algoliasearch.search.config import SearchConfig
from harness import request

APP = "LOCALAPP"
ADMIN = "admin-key"
READER = "reader-key"
WRITER = "writer-key"

PRODUCTS = [
    {"objectID": f"p{i}", "name": f"{color} {kind}", "brand": brand, "price": 10 + i, "stock": i % 4}
    for i, (color, kind, brand) in enumerate(
        (c, k, b)
        for c in ("red", "green", "blue")
        for k in ("chair", "table", "lamp", "sofa")
        for b in ("Acme",)
    )
]


def client_for(gw, key: str = ADMIN) -> SearchClientSync:
    config = SearchConfig(APP, key)
    config.hosts = HostsCollection([Host(url="127.0.0.1", scheme="http", port=gw.port)])
    return SearchClientSync.create_with_config(config=config)


def offline_config(tmp_path, extra: dict | None = None) -> dict:
    acl_all = ["search", "browse", "addObject", "deleteObject", "deleteIndex", "settings", "editSettings"]
    keys = {ADMIN: acl_all, READER: ["search", "browse", "settings"], WRITER: ["search", "addObject"]}
    (tmp_path / "products.json").write_text(json.dumps(PRODUCTS))
    cfg = {
        "dataDir": str(tmp_path / "data"),
        "algolia": {
            "appId": APP,
            "hosts": ["http://127.0.0.1:9"],
            "offlineIndices": {
                "products": {"bootstrap": {"objects": [str(tmp_path / "products.json")]}, "apiKeys": keys},
                "products_tmp_*": {"apiKeys": keys},
                "products_copy": {"apiKeys": keys},
                "notes": {},
            },
        },
        "server": {"requestTimeout": "20s"},
    }
    if extra:
        cfg["algolia"]["offlineIndices"].update(extra)
    return cfg


@pytest.fixture
def gw(gateway_factory, tmp_path):
    return gateway_factory(offline_config(tmp_path))


def ids(result) -> set[str]:
    return {h.object_id for h in result.hits}


def search(c, index: str, params: dict):
    return c.search_single_index(index, {"hitsPerPage": 100, **params})


def raw(gw, method: str, path: str, body=None, key: str = ADMIN):
    data = body if isinstance(body, (bytes, type(None))) else json.dumps(body).encode()
    st, headers, out = request(
        method, gw.url(path), body=data, headers={"X-Algolia-Application-Id": APP, "X-Algolia-API-Key": key}
    )
    return st, headers, (json.loads(out) if out else None)


def test_save_objects_wait_for_task_and_search(gw):
    c = client_for(gw)
    new = [{"objectID": "n1", "name": "purple chair", "brand": "Zed", "price": 99}, {"name": "purple lamp", "price": 5}]
    responses = c.save_objects("products", new, wait_for_tasks=True)
    assert len(responses) == 1
    r = responses[0]
    assert isinstance(r.task_id, int) and r.task_id >= 2**52
    assert r.object_ids[0] == "n1" and r.object_ids[1]  # the second one's objectID is generated
    assert c.get_task("products", r.task_id).status == "published"
    res = search(c, "products", {"query": "purple"})
    assert ids(res) == {"n1", r.object_ids[1]}
    assert c.get_object("products", r.object_ids[1])["name"] == "purple lamp"
    # The plain endpoints: POST (201, createdAt), PUT, DELETE.
    saved = c.save_object("products", {"name": "purple sofa"})
    assert saved.object_id and saved.created_at
    c.wait_for_task("products", saved.task_id)
    put = c.add_or_update_object("products", "n1", {"name": "violet chair", "price": 98})
    assert put.object_id == "n1" and put.updated_at
    deleted = c.delete_object("products", saved.object_id)
    c.wait_for_task("products", deleted.task_id)
    res = search(c, "products", {"query": "purple"})
    assert ids(res) == {r.object_ids[1]}
    assert c.get_object("products", "n1") == {"objectID": "n1", "name": "violet chair", "price": 98}
    assert res.to_dict()["nbHits"] == 1


def test_partial_updates_and_every_built_in_operation(gw):
    c = client_for(gw)
    c.partial_update_objects(
        "products", [{"objectID": "p1", "price": 500}, {"objectID": "ghost", "name": "nothing"}], wait_for_tasks=True
    )
    assert c.get_object("products", "p1")["price"] == 500
    assert c.get_object("products", "p1")["name"] == "red table"
    with pytest.raises(RequestException) as missing:
        c.get_object("products", "ghost")
    assert missing.value.status_code == 404
    c.partial_update_objects("products", [{"objectID": "ghost", "name": "created"}], create_if_not_exists=True, wait_for_tasks=True)
    assert c.get_object("products", "ghost")["name"] == "created"

    def op(name, value):
        return {"_operation": name, "value": value}

    r = c.partial_update_object(
        "products",
        "p2",
        {
            "price": op("Increment", 5),
            "stock": op("Decrement", 1),
            "tags": op("Add", "new"),
            "colors": op("AddUnique", "red"),
        },
    )
    c.wait_for_task("products", r.task_id)
    c.partial_update_object("products", "p2", {"tags": op("Add", "sale"), "colors": op("AddUnique", "red")})
    c.partial_update_object("products", "p2", {"tags": op("Remove", "new"), "version": op("IncrementFrom", 0)})
    c.partial_update_object("products", "p2", {"version": op("IncrementFrom", 0), "name": "ignored"})
    r = c.partial_update_object("products", "p2", {"rev": op("IncrementSet", 7)})
    c.wait_for_task("products", r.task_id)
    p2 = c.get_object("products", "p2")
    assert p2["price"] == 12 + 5 and p2["stock"] == 1
    assert p2["tags"] == ["sale"] and p2["colors"] == ["red"]
    assert p2["version"] == 1 and p2["rev"] == 7
    assert p2["name"] == "red lamp"  # the update whose IncrementFrom did not hold was ignored whole
    # createIfNotExists=false on the single endpoint: nothing created.
    st, _, body = raw(gw, "POST", "/1/indexes/products/none/partial?createIfNotExists=false", {"a": 1})
    assert st == 200 and isinstance(body["taskID"], int)
    assert raw(gw, "GET", "/1/indexes/products/none")[0] == 404
    # A numeric filter sees the incremented value (p7's price is 17 from the start) and no longer the old one.
    assert ids(search(c, "products", {"filters": "price = 17"})) == {"p2", "p7"}
    assert ids(search(c, "products", {"filters": "price = 12"})) == set()


def test_delete_objects_delete_by_and_clear(gw):
    c = client_for(gw)
    c.delete_objects("products", ["p0", "p1"], wait_for_tasks=True)
    res = search(c, "products", {"query": ""})
    assert res.nb_hits == len(PRODUCTS) - 2
    r = c.delete_by("products", {"filters": "price > 18"})
    c.wait_for_task("products", r.task_id)
    assert {h.object_id for h in search(c, "products", {"query": ""}).hits} == {f"p{i}" for i in range(2, 9)}
    st, _, body = raw(gw, "POST", "/1/indexes/products/deleteByQuery", {})
    assert st == 400 and "filter" in body["message"]
    r = c.clear_objects("products")
    c.wait_for_task("products", r.task_id)
    assert search(c, "products", {"query": ""}).nb_hits == 0
    # The settings stay after a clear.
    c.set_settings("products", {"searchableAttributes": ["name"]})
    c.clear_objects("products")
    assert c.get_settings("products").to_dict()["searchableAttributes"] == ["name"]


def test_settings_synonyms_and_rules_change_searches(gw):
    c = client_for(gw)
    r = c.set_settings(
        "products",
        {"searchableAttributes": ["name"], "attributesForFaceting": ["brand", "stock"], "customRanking": ["desc(price)"]},
    )
    c.wait_for_task("products", r.task_id)
    res = search(c, "products", {"query": "chair", "facets": ["brand"]})
    assert [h.object_id for h in res.hits] == ["p8", "p4", "p0"]  # desc(price)
    assert res.facets == {"brand": {"Acme": 3}}
    # A partial settings change keeps the others; null resets one.
    st, _, body = raw(gw, "PUT", "/1/indexes/products/settings", {"customRanking": None})
    assert st == 200 and isinstance(body["taskID"], int) and body["updatedAt"]
    settings = c.get_settings("products").to_dict()
    assert settings["searchableAttributes"] == ["name"] and "customRanking" not in settings
    r = c.save_synonyms(
        "products", [{"objectID": "syn1", "type": "synonym", "synonyms": ["couch", "sofa"]}], replace_existing_synonyms=True
    )
    c.wait_for_task("products", r.task_id)
    assert ids(search(c, "products", {"query": "couch"})) == {"p3", "p7", "p11"}
    assert c.get_synonym("products", "syn1").to_dict()["synonyms"] == ["couch", "sofa"]
    r = c.save_rules(
        "products",
        [{"objectID": "r1", "conditions": [{"pattern": "lamp", "anchoring": "contains"}],
          "consequence": {"promote": [{"objectID": "p0", "position": 0}]}}],
        clear_existing_rules=True,
    )
    c.wait_for_task("products", r.task_id)
    res = search(c, "products", {"query": "lamp"})
    assert [h.object_id for h in res.hits][:1] == ["p0"] and ids(res) == {"p0", "p2", "p6", "p10"}
    assert c.get_rule("products", "r1").to_dict()["objectID"] == "r1"
    c.wait_for_task("products", c.delete_synonym("products", "syn1").task_id)
    assert search(c, "products", {"query": "couch"}).nb_hits == 0
    c.wait_for_task("products", c.clear_rules("products").task_id)
    with pytest.raises(RequestException) as gone:
        c.get_rule("products", "r1")
    assert gone.value.status_code == 404


def test_replace_all_objects_through_a_temporary_pattern_index(gw):
    c = client_for(gw)
    c.set_settings("products", {"searchableAttributes": ["name"], "attributesForFaceting": ["brand"]})
    c.save_synonyms("products", [{"objectID": "s", "type": "synonym", "synonyms": ["couch", "sofa"]}])
    replacement = [{"objectID": f"r{i}", "name": f"new sofa {i}", "brand": "Neo"} for i in range(2500)]
    out = c.replace_all_objects("products", replacement, batch_size=1000)
    assert len(out.batch_responses) == 3
    res = search(c, "products", {"query": "", "facets": ["brand"]})
    assert res.nb_hits == 2500 and res.facets == {"brand": {"Neo": 2500}}
    assert search(c, "products", {"query": "couch"}).nb_hits == 2500  # synonyms came along (scope)
    assert c.get_settings("products").to_dict()["searchableAttributes"] == ["name"]
    # The temporary index is gone (moved onto products).
    assert not [n for n in status(gw) if n.startswith("products_tmp_")]


def status(gw) -> dict:
    return json.loads(request("GET", gw.url("/_mirrorgate/status"))[2])["algolia"]["indices"]


def test_copy_and_move(gw):
    c = client_for(gw)
    r = c.operation_index("products", {"operation": "copy", "destination": "products_copy"})
    c.wait_for_task("products_copy", r.task_id)
    assert search(c, "products_copy", {"query": "chair"}).nb_hits == 3
    c.save_objects("products_copy", [{"objectID": "only-in-copy", "name": "copy chair"}], wait_for_tasks=True)
    assert search(c, "products", {"query": "chair"}).nb_hits == 3
    # Copy of settings only keeps the destination's records.
    c.set_settings("products", {"searchableAttributes": ["brand"]})
    c.operation_index("products", {"operation": "copy", "destination": "products_copy", "scope": ["settings"]})
    assert c.get_settings("products_copy").to_dict()["searchableAttributes"] == ["brand"]
    assert search(c, "products_copy", {"query": ""}).nb_hits == len(PRODUCTS) + 1
    # Move: the source is gone, the destination replaced.
    r = c.operation_index("products_copy", {"operation": "move", "destination": "products_tmp_9"})
    c.wait_for_task("products_tmp_9", r.task_id)
    assert search(c, "products_tmp_9", {"query": ""}).nb_hits == len(PRODUCTS) + 1
    with pytest.raises(RequestException) as gone:
        search(c, "products_copy", {"query": ""})
    assert gone.value.status_code == 404
    st, _, body = raw(gw, "POST", "/1/indexes/products/operation", {"operation": "copy", "destination": "elsewhere"})
    assert st == 400 and "not an offline index" in body["message"]


def test_multi_index_batch_and_index_creation_on_first_write(gw):
    c = client_for(gw)
    out = c.multiple_batch(
        {
            "requests": [
                {"action": "addObject", "indexName": "notes", "body": {"objectID": "a", "text": "first note"}},
                {"action": "addObject", "indexName": "products_tmp_1", "body": {"objectID": "x", "name": "tmp chair"}},
                {"action": "deleteObject", "indexName": "products", "body": {"objectID": "p0"}},
            ]
        }
    )
    assert set(out.task_id) == {"notes", "products_tmp_1", "products"}
    assert out.object_ids == ["a", "x", "p0"]
    for name, task in out.task_id.items():
        assert c.wait_for_task(name, task).status == "published"
    assert search(c, "notes", {"query": "note"}).nb_hits == 1
    assert search(c, "products_tmp_1", {"query": "chair"}).nb_hits == 1
    assert "products_tmp_1" in status(gw)
    st, _, body = raw(gw, "POST", "/1/indexes/*/batch", {"requests": [
        {"action": "addObject", "indexName": "notes", "body": {"objectID": "b"}},
        {"action": "addObject", "indexName": "upstream_only", "body": {"objectID": "c"}},
    ]})
    assert st == 400 and "mix" in body["message"]
    # A pattern index that does not exist is 404 locally (never forwarded).
    st, headers, body = raw(gw, "POST", "/1/indexes/products_tmp_404/query", {"query": ""})
    assert st == 404 and headers.get("x-mirrorgate-origin") == "local"


def test_api_key_acls(gw):
    reader = client_for(gw, READER)
    writer = client_for(gw, WRITER)
    assert search(reader, "products", {"query": "chair"}).nb_hits == 3
    with pytest.raises(RequestException) as refused:
        reader.save_objects("products", [{"objectID": "z", "name": "z"}])
    assert refused.value.status_code == 403 and "Method not allowed with this API key" in str(refused.value)
    writer.save_objects("products", [{"objectID": "w", "name": "writer chair"}], wait_for_tasks=True)
    for call in (
        lambda: writer.delete_objects("products", ["w"]),
        lambda: writer.set_settings("products", {"searchableAttributes": ["name"]}),
        lambda: writer.clear_objects("products"),
        lambda: writer.browse("products", {}),
    ):
        with pytest.raises(RequestException) as e:
            call()
        assert e.value.status_code == 403
    st, _, body = raw(gw, "POST", "/1/indexes/products/batch", {"requests": []}, key="unknown-key")
    assert st == 403 and body == {"message": "Invalid Application-ID or API key", "status": 403}
    # An index with apiKeys null takes any key with every ACL.
    anyone = client_for(gw, "whatever")
    anyone.save_objects("notes", [{"objectID": "n", "text": "hello"}], wait_for_tasks=True)
    assert search(anyone, "notes", {"query": "hello"}).nb_hits == 1


@pytest.mark.parametrize(
    "method,path,body,status,words",
    [
        ("POST", "/1/indexes/products/batch", b"{not json", 400, "Invalid JSON"),
        ("POST", "/1/indexes/products/batch", {"requests": [{"action": "explode", "body": {}}]}, 400, "Invalid action"),
        ("POST", "/1/indexes/products/batch", {"requests": [{"action": "updateObject", "body": {"a": 1}}]}, 400, "objectID"),
        ("POST", "/1/indexes/products/batch", {"requests": "nope"}, 400, "requests"),
        ("POST", "/1/indexes/products/p1/partial", {"price": {"_operation": "Explode", "value": 1}}, 400, "unknown _operation"),
        ("POST", "/1/indexes/products/p1/partial", {"name": {"_operation": "Increment", "value": 1}}, 400, "numeric attribute"),
        ("PUT", "/1/indexes/products/p1", [1, 2], 400, "JSON object"),
        ("PUT", "/1/indexes/products/settings", "text", 400, "JSON object"),
        ("PUT", "/1/indexes/products/synonyms/s1", {"synonyms": ["a"]}, 400, "type"),
        ("GET", "/1/indexes/products/p404", None, 404, "ObjectID does not exist"),
        ("GET", "/1/indexes/products/task/abc", None, 400, "taskID"),
        ("GET", "/1/indexes/products/task/12", None, 404, "Task"),
        ("GET", "/1/indexes/products/synonyms/none", None, 404, "does not exist"),
        ("POST", "/1/indexes/products/operation", {"operation": "rename", "destination": "x"}, 400, "copy or move"),
    ],
)
def test_bad_input_gets_algolia_errors(gw, method, path, body, status, words):
    st, headers, out = raw(gw, method, path, body)
    assert st == status, out
    assert set(out) == {"message", "status"} and out["status"] == status
    assert words in out["message"]
    assert headers.get("x-mirrorgate-origin") == "local"
    # Nothing changed.
    assert search(client_for(gw), "products", {"query": ""}).nb_hits == len(PRODUCTS)


def test_writes_survive_restarts_and_deletion_sticks(gateway_factory, tmp_path):
    cfg = offline_config(tmp_path)
    gw = gateway_factory(cfg)
    c = client_for(gw)
    c.save_objects("products_tmp_7", [{"objectID": "t", "name": "kept"}], wait_for_tasks=True)
    c.set_settings("products", {"searchableAttributes": ["brand", "name"]})
    r = c.delete_index("products")
    c.wait_for_task("products", r.task_id)
    assert gw.terminate()[0] == 0
    gw.expect_exit = 0
    gw2 = gateway_factory(cfg, name="gw2")
    c = client_for(gw2)
    assert search(c, "products_tmp_7", {"query": "kept"}).nb_hits == 1
    with pytest.raises(RequestException) as gone:  # deleted, not bootstrapped again
        search(c, "products", {"query": ""})
    assert gone.value.status_code == 404
    c.save_objects("products", [{"objectID": "again", "name": "reborn"}], wait_for_tasks=True)
    assert search(c, "products", {"query": ""}).nb_hits == 1
    assert c.get_settings("products").to_dict().get("searchableAttributes") is None


def test_kill_9_right_after_an_acknowledged_write(gateway_factory, tmp_path):
    cfg = offline_config(tmp_path)
    gw = gateway_factory(cfg)
    c = client_for(gw)
    acked = []
    for i in range(20):
        r = c.save_object("products", {"objectID": f"k{i}", "name": f"durable {i}"})
        acked.append(r.object_id)
    r = c.partial_update_object("products", "p3", {"price": 1234})
    os.kill(gw.proc.pid, signal.SIGKILL)
    gw.proc.wait(timeout=5)
    gw.expect_exit = -9
    gw2 = gateway_factory(cfg, name="gw2")
    c = client_for(gw2)
    res = search(c, "products", {"query": "durable"})
    assert ids(res) == set(acked)
    assert c.get_object("products", "p3")["price"] == 1234
    assert c.get_task("products", r.task_id).status == "published"


def test_a_batch_killed_midway_is_all_or_nothing(gateway_factory, tmp_path):
    cfg = offline_config(tmp_path)
    gw = gateway_factory(cfg)
    batch = [{"objectID": f"b{i}", "name": f"bulk item {i} " + "word " * 20, "brand": "Bulk"} for i in range(30000)]
    body = json.dumps({"requests": [{"action": "addObject", "body": o} for o in batch]}).encode()
    outcomes = []
    for attempt, delay in enumerate((0.05, 0.3, 0.8)):
        result = {}

        def send():
            try:
                result["status"] = raw(gw, "POST", "/1/indexes/products/batch", body)[0]
            except Exception as exc:  # the gateway died under the request
                result["error"] = repr(exc)

        t = threading.Thread(target=send)
        t.start()
        time.sleep(delay)
        os.kill(gw.proc.pid, signal.SIGKILL)
        gw.proc.wait(timeout=5)
        gw.expect_exit = -9
        t.join(timeout=15)
        gw = gateway_factory(cfg, name=f"gw{attempt + 2}")
        n = search(client_for(gw), "products", {"query": "", "filters": "brand:Bulk", "hitsPerPage": 0}).nb_hits
        assert n in (0, len(batch)), f"attempt {attempt}: {n} of {len(batch)} records"
        if result.get("status") == 200:
            assert n == len(batch), "an acknowledged batch is all there"
        outcomes.append(n)
        # Start the next attempt from nothing.
        if n:
            client_for(gw).delete_by("products", {"filters": "brand:Bulk"})
    assert search(client_for(gw), "products", {"query": ""}).nb_hits == len(PRODUCTS)
