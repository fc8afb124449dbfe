"""Algolia plumbing (issue 19's Algolia defects, issue 13's routing): a trickling upstream never yields a
truncated 200 (D4); a preventive stream whose upstream fails before the delay carries the local answer
first (D5); multi-query and getObjects are bounded with Algolia's own limits, 20,000 queries refused before
any work (D10); secured keys' filters hold for getObject(s) offline; an offline index answers with its
bootstrap synonyms and query rules; `GET /1/indexes` lists local indices while the upstream is down and
merges the offline ones in while it is up; a multi-query mixing mirrored and offline indices is answered
per part while the upstream is up. Every upstream is the suite's FakeAlgolia on loopback."""

from __future__ import annotations

import http.client
import json

import pytest
from algoliasearch.http.exceptions import RequestException
from conftest import API_KEY, APP_ID
from harness import request
from test_mirrored import client_for, mirrored_config, read_chunks, secured_key, sync
from upstreams.fake_algolia import FakeAlgolia

HEADERS = {"X-Algolia-Application-Id": APP_ID, "X-Algolia-API-Key": API_KEY, "Content-Type": "application/json"}
PHONES = [
    {"objectID": f"p{i}", "name": f"{brand} phone {i}", "brand": brand}
    for i, brand in enumerate(["Apple", "Samsung", "Nokia"])
]
NOTES = [
    {"objectID": "n1", "title": "Public note", "owner": "alice", "visibility": "public"},
    {"objectID": "n2", "title": "Private note", "owner": "bob", "visibility": "private"},
]


@pytest.fixture
def upstream():
    f = FakeAlgolia(browse_page_size=10).start()
    f.seed("products", PHONES, {"attributesForFaceting": ["brand"]})
    yield f
    if not f.stopping:
        f.stop()


def with_notes(cfg: dict, tmp_path) -> dict:
    """`cfg` plus the offline index `notes` (any key), built from a bootstrap file."""
    path = tmp_path / "notes.json"
    path.write_text(json.dumps(NOTES))
    settings = tmp_path / "notes-settings.json"
    settings.write_text(json.dumps({"attributesForFaceting": ["owner", "visibility"]}))
    cfg["algolia"]["offlineIndices"] = {"notes": {"bootstrap": {"settings": str(settings), "objects": [str(path)]}}}
    return cfg


def post(gw, path: str, body: dict, key: str = API_KEY, extra: dict | None = None, timeout: float = 10):
    h = dict(HEADERS, **{"X-Algolia-API-Key": key})
    h.update(extra or {})
    st, headers, data = request("POST", gw.url(path), body=json.dumps(body).encode(), headers=h, timeout=timeout)
    return st, headers, json.loads(data) if data else None


# -- D4: a trickling upstream -------------------------------------------------------------------------


def test_a_trickling_upstream_gives_the_local_answer_never_a_truncated_200(gateway_factory, upstream, tmp_path):
    """The fake answers every `/1/indexes/_trickle/...` call with a chunked body trickling for 4 s; the read
    budget is 1.5 s. The mirror of `_trickle` (bootstrapped from a file) answers instead."""
    objects = tmp_path / "trickle.json"
    objects.write_text(json.dumps([{"objectID": "t1", "name": "local phone"}]))
    cfg = mirrored_config(upstream.url)
    cfg["algolia"]["indices"] = {
        "_trickle": {
            "mirrored": True,
            "dataSelectionQueries": [{"query": {"query": ""}, "maxObjects": 10}],
            "bootstrap": {"objects": [str(objects)]},
        }
    }
    gw = gateway_factory(cfg)
    for method, path, body in [
        ("POST", "/1/indexes/_trickle/query?chunks=40&size=100&interval=0.1", b'{"query":"phone"}'),
        ("GET", "/1/indexes/_trickle/t1?chunks=40&size=100&interval=0.1", None),
    ]:
        conn = http.client.HTTPConnection("127.0.0.1", gw.port, timeout=15)
        try:
            conn.request(method, path, body=body, headers=HEADERS)
            resp = conn.getresponse()
            # A truncated chunked body raises IncompleteRead here: the defect.
            data = resp.read()
        finally:
            conn.close()
        assert resp.status == 200, (path, resp.status, data[:200])
        assert resp.getheader("X-Mirrorgate-Origin") == "local", path
        doc = json.loads(data)
        if method == "POST":
            assert doc["origin"] == "local" and [h["objectID"] for h in doc["hits"]] == ["t1"]
        else:
            assert doc == {"objectID": "t1", "name": "local phone"}


# -- D5: preventive stream when the upstream fails before the delay ------------------------------------


@pytest.mark.parametrize("fault", ["500", "503", "429", "garbage", "reset", "refused"])
def test_a_preventive_stream_sends_the_local_answer_when_the_upstream_fails_early(gateway_factory, upstream, fault):
    gw = gateway_factory(mirrored_config(upstream.url, preventiveOfflineSearchDelay="5s"))
    sync(gw)
    if fault.isdigit():
        upstream.fail_status = int(fault)
    elif fault == "refused":
        upstream.stop()
    else:
        upstream.raw_fault = fault
    chunks = read_chunks(gw.port, b'{"query":"nokia"}', timeout=8)
    lines = [json.loads(payload) for _, payload in chunks]
    assert [line.get("origin") for line in lines] == ["local", "remote"], lines
    assert [h["objectID"] for h in lines[0]["hits"]] == ["p2"]
    assert lines[1]["status"] == 424 and lines[1]["message"], lines[1]


# -- D10: bounded work ------------------------------------------------------------------------------------


def test_more_than_fifty_queries_get_algolias_error(gateway_factory, upstream, tmp_path):
    gw = gateway_factory(with_notes(mirrored_config(upstream.url), tmp_path))
    sync(gw)
    upstream.clear()
    for index in ("products", "notes", "elsewhere"):
        st, _, doc = post(gw, "/1/indexes/*/queries", {"requests": [{"indexName": index, "query": "x"}] * 51})
        assert st == 400, (index, doc)
        assert doc == {"message": "Too many queries in multi query request", "status": 400}
    assert upstream.requests("/1/indexes/*/queries") == []
    st, _, doc = post(gw, "/1/indexes/*/queries", {"requests": [{"indexName": "notes", "query": ""}] * 50})
    assert st == 200 and len(doc["results"]) == 50
    st, _, doc = post(gw, "/1/indexes/*/objects", {"requests": [{"indexName": "notes", "objectID": "n1"}] * 1001})
    assert st == 400 and doc["message"].startswith("Too many objects"), doc


def test_twenty_thousand_queries_are_refused_before_any_work_up_or_down(gateway_factory, upstream, tmp_path):
    """The reported D10 case: 20,000 queries in one multi-query ran for 30 s and went on after the answer.
    They are refused with Algolia's error before any query runs or is forwarded, while the upstream is up
    and while it is down, and the gateway answers the next call."""
    gw = gateway_factory(with_notes(mirrored_config(upstream.url), tmp_path))
    sync(gw)
    upstream.clear()
    body = {"requests": [{"indexName": "products", "query": "phone", "hitsPerPage": 1000}] * 20_000}
    st, _, doc = post(gw, "/1/indexes/*/queries", body, timeout=30)
    assert st == 400 and doc == {"message": "Too many queries in multi query request", "status": 400}
    assert upstream.requests("/1/indexes/*/queries") == []
    upstream.stop()
    for index in ("products", "notes"):
        body = {"requests": [{"indexName": index, "query": ""}] * 20_000}
        st, _, doc = post(gw, "/1/indexes/*/queries", body, timeout=30)
        assert st == 400 and doc["message"] == "Too many queries in multi query request", (index, doc)
    st, _, doc = post(gw, "/1/indexes/*/queries", {"requests": [{"indexName": "products", "query": "nokia"}]})
    assert st == 200 and [h["objectID"] for h in doc["results"][0]["hits"]] == ["p2"], doc


# -- secured keys on getObject(s) -----------------------------------------------------------------------------


def test_secured_key_filters_hold_for_get_objects_offline(gateway_factory, upstream, tmp_path):
    gw = gateway_factory(with_notes(mirrored_config(upstream.url), tmp_path))
    key = secured_key("parent", "filters=visibility%3Apublic")
    h = dict(HEADERS, **{"X-Algolia-API-Key": key})
    st, _, body = request("GET", gw.url("/1/indexes/notes/n1"), headers=h)
    assert st == 200 and json.loads(body)["objectID"] == "n1"
    st, _, body = request("GET", gw.url("/1/indexes/notes/n2"), headers=h)
    assert st == 404 and json.loads(body) == {"message": "ObjectID does not exist", "status": 404}
    res = client_for(gw, key).get_objects(
        {"requests": [{"indexName": "notes", "objectID": "n2"}, {"indexName": "notes", "objectID": "n1"}]}
    ).to_dict()
    assert res["results"][0] is None
    assert res["results"][1]["objectID"] == "n1"


# -- synonyms and rules of an offline index (bootstrap files) --------------------------------------------


def test_an_offline_index_answers_with_its_bootstrap_synonyms_and_rules(gateway_factory, upstream, tmp_path):
    cfg = with_notes(mirrored_config(upstream.url), tmp_path)
    synonyms = tmp_path / "notes-synonyms.json"
    synonyms.write_text(json.dumps([{"objectID": "s1", "type": "synonym", "synonyms": ["memo", "note"]}]))
    rule = {
        "objectID": "hide-public",
        "conditions": [{"pattern": "note", "anchoring": "is"}],
        "consequence": {"hide": [{"objectID": "n1"}], "userData": {"banner": "private only"}},
    }
    rules = tmp_path / "notes-rules.json"
    rules.write_text(json.dumps([rule]))
    cfg["algolia"]["offlineIndices"]["notes"]["bootstrap"].update(synonyms=str(synonyms), rules=str(rules))
    gw = gateway_factory(cfg)
    st, _, doc = post(gw, "/1/indexes/notes/query", {"query": "memo"})
    assert st == 200 and sorted(h["objectID"] for h in doc["hits"]) == ["n1", "n2"], doc
    st, _, doc = post(gw, "/1/indexes/notes/query", {"query": "note"})
    assert st == 200 and [h["objectID"] for h in doc["hits"]] == ["n2"], doc
    assert doc["appliedRules"] == [{"objectID": "hide-public"}] and doc["userData"] == [{"banner": "private only"}]
    st, _, doc = post(gw, "/1/indexes/notes/query", {"query": "note", "enableRules": False})
    assert st == 200 and sorted(h["objectID"] for h in doc["hits"]) == ["n1", "n2"] and "appliedRules" not in doc
    c = client_for(gw)
    found = c.search_rules("notes", {"query": "note"}).to_dict()
    assert [h["objectID"] for h in found["hits"]] == ["hide-public"] and found["nbHits"] == 1
    assert c.get_rule("notes", "hide-public").to_dict()["consequence"]["hide"] == [{"objectID": "n1"}]
    syn = c.search_synonyms("notes", {"query": "memo"}).to_dict()
    assert [h["objectID"] for h in syn["hits"]] == ["s1"]
    st, _, body = request("GET", gw.url("/1/indexes/notes/rules/nope"), headers=HEADERS)
    assert st == 404 and json.loads(body)["status"] == 404


# -- GET /1/indexes and mixed calls ----------------------------------------------------------------------------


def test_list_indices_merges_offline_indices_and_lists_locally_when_the_upstream_is_down(
    gateway_factory, upstream, tmp_path
):
    gw = gateway_factory(with_notes(mirrored_config(upstream.url), tmp_path))
    sync(gw)
    c = client_for(gw)
    online = c.list_indices().to_dict()
    names = [i["name"] for i in online["items"]]
    assert "products" in names and "notes" in names
    upstream.stop()
    offline = c.list_indices().to_dict()
    items = {i["name"]: i for i in offline["items"]}
    assert set(items) == {"notes", "products"}
    assert items["products"]["entries"] == len(PHONES) and items["notes"]["entries"] == len(NOTES)
    assert offline["nbPages"] == 1


def test_list_indices_answered_locally_refuses_a_key_the_upstream_never_accepted(gateway_factory, upstream, tmp_path):
    """Issue 25: with the upstream down, `GET /1/indexes` is listed locally; a key the upstream never accepted
    gets 403 (as every local read with an unknown key), not an empty list; a key it accepted (here the
    gateway's own, which synced the mirror; and one a forwarded answer accepted) lists the mirror."""
    gw = gateway_factory(mirrored_config(upstream.url))
    sync(gw)
    accepted = client_for(gw, "accepted-key")
    accepted.search_single_index("products", {"query": "nokia"})  # forwarded: the upstream accepts the key
    upstream.stop()
    with pytest.raises(RequestException) as refused:
        client_for(gw, "never-accepted-key").list_indices()
    assert refused.value.status_code == 403 and "Invalid Application-ID or API key" in str(refused.value)
    for c in (client_for(gw), accepted):
        listed = c.list_indices_with_http_info()
        assert listed.status_code == 200 and listed.headers.get("x-mirrorgate-origin") == "local"
        assert [i["name"] for i in json.loads(listed.raw_data)["items"]] == ["products"]


def test_a_multi_query_over_mirrored_and_offline_indices_is_answered_per_part_while_up(
    gateway_factory, upstream, tmp_path
):
    gw = gateway_factory(with_notes(mirrored_config(upstream.url), tmp_path))
    sync(gw)
    st, _, doc = post(
        gw,
        "/1/indexes/*/queries",
        {"requests": [{"indexName": "products", "query": "nokia"}, {"indexName": "notes", "query": "public"}]},
    )
    assert st == 200, doc
    products, notes = doc["results"]
    assert products["origin"] == "remote" and [h["objectID"] for h in products["hits"]] == ["p2"]
    assert [h["objectID"] for h in notes["hits"]] == ["n1"] and notes["origin"] == "local"
    # the offline part never reached the upstream
    assert all("notes" not in (r.body or b"").decode() for r in upstream.requests("/1/indexes/*/queries"))
    st, _, doc = post(
        gw,
        "/1/indexes/*/objects",
        {"requests": [{"indexName": "products", "objectID": "p1"}, {"indexName": "notes", "objectID": "n2"}]},
    )
    assert st == 200, doc
    assert [r["objectID"] for r in doc["results"]] == ["p1", "n2"]
