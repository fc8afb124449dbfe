"""Local search fidelity (issue 13): a mirrored index with settings and synonyms is synced from the fake
upstream, then searched locally (X-Mirrorgate-Strategy: offlineOnly) with the parameters of issue 13.
Every expectation below is what Algolia's documentation says the service answers for this corpus
(parameter pages for ignorePlurals, removeStopWords, optionalWords, removeWordsIfNoResults,
advancedSyntax, alternativesAsExact, optionalFilters, sumOrFiltersScores, insidePolygon, aroundPrecision,
placeholders, renderingContent, getSettings; query rules: conditions, consequences, enableRules,
ruleContexts, appliedRules; replicas and relevant sort). The upstream also holds query rules and two
replicas of `products` (a standard one ranked by ascending price, a virtual one with a descending-price
custom ranking): the sync brings them home, and the mirror answers rules and replicas itself.
"""

from __future__ import annotations

import json

import pytest
from conftest import API_KEY, APP_ID
from harness import request
from test_mirrored import client_for, mirrored_config, sync
from upstreams.fake_algolia import FakeAlgolia

# objectIDs sort in insertion order, so the mirror's index order (the browse order) is this order.
RECORDS = [
    {"objectID": "p01", "name": "Red sports car", "brand": "Fast", "kind": "car", "price": 30,
     "_geoloc": {"lat": 48.8566, "lng": 2.3522}, "_tags": ["new"]},
    {"objectID": "p02", "name": "Blue family car", "brand": "Calm", "kind": "car", "price": 20,
     "_geoloc": {"lat": 45.764, "lng": 4.8357}},
    {"objectID": "p03", "name": "Two cars for kids", "brand": "Toy", "kind": "toy", "price": 5,
     "_geoloc": {"lat": 52.52, "lng": 13.405}},
    {"objectID": "p04", "name": "Running shoes for the feet", "brand": "Fast", "kind": "shoe", "price": 50,
     "_geoloc": {"lat": 40.4168, "lng": -3.7038}},
    {"objectID": "p05", "name": "Foot spa", "brand": "Calm", "kind": "spa", "price": 70},
    {"objectID": "p06", "name": "Les chevaux du village", "brand": "Livre", "kind": "book", "price": 12},
    {"objectID": "p07", "name": "Das Haus am See", "brand": "Buch", "kind": "book", "price": 14},
    {"objectID": "p08", "name": "Canciones de la ciudad", "brand": "Libro", "kind": "book", "price": 9},
    {"objectID": "p09", "name": "Shop at 12 <Street> Main", "brand": "Map", "kind": "place", "price": 1},
    {"objectID": "p10", "name": "Main street corner", "brand": "Map", "kind": "place", "price": 2},
    {"objectID": "p11", "name": "Mouse trap", "brand": "Home", "kind": "tool", "price": 3},
    {"objectID": "p12", "name": "Three mice", "brand": "Home", "kind": "book", "price": 4},
]
RENDERING = {"facetOrdering": {"facets": {"order": ["brand", "kind"]}}}
SETTINGS = {"attributesForFaceting": ["brand", "kind"], "renderingContent": RENDERING}
SYNONYMS = [
    {"objectID": "s1", "type": "synonym", "synonyms": ["automobile", "car"]},
    {"objectID": "s2", "type": "placeholder", "placeholder": "<Street>", "replacements": ["street", "st"]},
]
# Query rules (Algolia's rule objects), each written for a query no case above uses, so that the cases
# above keep their meaning; they cover conditions (pattern with each anchoring, {facet:…}, alternatives,
# context, filters, validity, enabled) and consequences (query edits, automaticFacetFilters, promote, hide,
# filterPromotes, userData, renderingContent, params).
RULE_RENDERING = {"facetOrdering": {"facets": {"order": ["kind"]}}}
RULES = [
    {"objectID": "bargain", "conditions": [{"pattern": "bargain", "anchoring": "contains"}],
     "consequence": {"params": {"query": {"edits": [{"type": "remove", "delete": "bargain"}]}},
                     "promote": [{"objectID": "p05", "position": 0}]}},
    {"objectID": "hide-trap", "conditions": [{"pattern": "trap", "anchoring": "is"}],
     "consequence": {"hide": [{"objectID": "p11"}]}},
    {"objectID": "sneakers", "conditions": [{"pattern": "sneakers", "anchoring": "is"}],
     "consequence": {"params": {"query": {"edits": [{"type": "replace", "delete": "sneakers", "insert": "shoes"}]}}}},
    {"objectID": "brand-facet", "conditions": [{"pattern": "{facet:brand}", "anchoring": "contains"}],
     "consequence": {"params": {"automaticFacetFilters": ["brand"]}}},
    {"objectID": "kids-context", "conditions": [{"context": "kids"}],
     "consequence": {"params": {"filters": "kind:toy"}}},
    {"objectID": "ciudad", "conditions": [{"pattern": "ciudad", "anchoring": "contains"}],
     "consequence": {"userData": {"banner": "libros"}, "renderingContent": RULE_RENDERING}},
    {"objectID": "disabled", "enabled": False, "conditions": [{"pattern": "spa", "anchoring": "is"}],
     "consequence": {"promote": [{"objectID": "p01", "position": 0}]}},
    {"objectID": "expired", "validity": [{"from": 1, "until": 2}],
     "conditions": [{"pattern": "corner", "anchoring": "is"}],
     "consequence": {"promote": [{"objectID": "p01", "position": 0}]}},
    {"objectID": "starts-three", "conditions": [{"pattern": "three", "anchoring": "startsWith"}],
     "consequence": {"userData": {"starts": "three"}}},
    {"objectID": "ends-village", "conditions": [{"pattern": "village", "anchoring": "endsWith"}],
     "consequence": {"userData": {"ends": "village"}}},
    {"objectID": "alt-automobile", "conditions": [{"pattern": "automobile", "anchoring": "is", "alternatives": True}],
     "consequence": {"userData": {"alternative": "automobile"}}},
    {"objectID": "home-filter", "conditions": [{"filters": "brand:Home"}],
     "consequence": {"userData": {"home": True}}},
    {"objectID": "discount", "conditions": [{"pattern": "discount", "anchoring": "is"}],
     "consequence": {"params": {"query": {"edits": [{"type": "remove", "delete": "discount"}]}},
                     "promote": [{"objectID": "p01", "position": 0}], "filterPromotes": True}},
]


def brand_match(r: dict, oid: str) -> str:
    return next(h["_highlightResult"]["brand"]["matchLevel"] for h in r["hits"] if h["objectID"] == oid)


def applied(r: dict) -> list[str]:
    return [a["objectID"] for a in r.get("appliedRules", [])]


# (params, check) on `products`: what Algolia's rules documentation says the answer holds.
RULE_CASES = [
    ({"query": "bargain car"}, lambda r: ids(r)[0] == "p05" and set(ids(r)) == {"p01", "p02", "p03", "p05"}
     and applied(r) == ["bargain"]),
    ({"query": "bargain car", "enableRules": False}, lambda r: r["nbHits"] == 0 and "appliedRules" not in r),
    ({"query": "trap"}, lambda r: r["nbHits"] == 0 and applied(r) == ["hide-trap"]),
    ({"query": "mouse trap"}, lambda r: ids(r) == ["p11"] and "appliedRules" not in r),
    ({"query": "sneakers"}, lambda r: ids(r) == ["p04"] and applied(r) == ["sneakers"]),
    # automaticFacetFilters: the brand's word leaves the query and becomes a filter (so it is no longer
    # highlighted in the hit)
    ({"query": "calm car"}, lambda r: ids(r) == ["p02"] and applied(r) == ["brand-facet"]
     and brand_match(r, "p02") == "none"),
    ({"query": "calm car", "enableRules": False}, lambda r: ids(r) == ["p02"] and "appliedRules" not in r
     and brand_match(r, "p02") == "partial"),
    ({"query": "", "ruleContexts": ["kids"]}, lambda r: ids(r) == ["p03"] and applied(r) == ["kids-context"]),
    ({"query": "", "ruleContexts": ["adults"]}, lambda r: r["nbHits"] == len(RECORDS) and "appliedRules" not in r),
    ({"query": "ciudad"}, lambda r: ids(r) == ["p08"] and r["userData"] == [{"banner": "libros"}]
     and r["renderingContent"] == RULE_RENDERING),
    ({"query": "spa"}, lambda r: ids(r) == ["p05"] and "appliedRules" not in r),
    ({"query": "corner"}, lambda r: ids(r) == ["p10"] and "appliedRules" not in r),
    ({"query": "three mice"}, lambda r: ids(r) == ["p12"] and r["userData"] == [{"starts": "three"}]),
    ({"query": "mice three"}, lambda r: ids(r) == ["p12"] and "userData" not in r),
    ({"query": "du village"}, lambda r: ids(r) == ["p06"] and r["userData"] == [{"ends": "village"}]),
    ({"query": "village du"}, lambda r: ids(r) == ["p06"] and "userData" not in r),
    ({"query": "car"}, lambda r: r.get("userData") == [{"alternative": "automobile"}]),
    ({"query": "car", "synonyms": False}, lambda r: "userData" not in r),
    ({"query": "", "filters": "brand:Home"}, lambda r: set(ids(r)) == {"p11", "p12"} and r["userData"] == [{"home": True}]),
    ({"query": "", "filters": "brand:Map"}, lambda r: "userData" not in r),
    ({"query": "discount", "filters": "brand:Calm"}, lambda r: set(ids(r)) == {"p02", "p05"} and applied(r) == ["discount"]),
    ({"query": "discount"}, lambda r: ids(r)[0] == "p01" and r["nbHits"] == len(RECORDS)),
]

PRICES = {r["objectID"]: r["price"] for r in RECORDS}
BY_PRICE = sorted(PRICES, key=PRICES.get)
REPLICAS = ["products_price_asc", "virtual(products_price_desc)"]
ASC_SETTINGS = {
    "attributesForFaceting": ["brand", "kind"], "primary": "products",
    "ranking": ["asc(price)", "typo", "geo", "words", "filters", "proximity", "attribute", "exact", "custom"],
}
DESC_SETTINGS = {"customRanking": ["desc(price)"], "relevancyStrictness": 0, "primary": "products"}

# (index, params, check): standard replica (its own ranking: exhaustive sort) and virtual replica
# (relevant sort: with relevancyStrictness 0 every match, by its customRanking).
REPLICA_CASES = [
    ("products_price_asc", {"query": ""}, lambda r: ids(r) == BY_PRICE),
    ("products_price_asc", {"query": "car"}, lambda r: ids(r) == ["p03", "p02", "p01"]),
    ("products_price_asc", {"query": "", "facets": ["brand"]}, lambda r: r["facets"]["brand"]["Calm"] == 2),
    ("products_price_asc", {"query": "bargain car"}, lambda r: r["nbHits"] == 0 and "appliedRules" not in r),
    ("products_price_desc", {"query": ""}, lambda r: ids(r) == BY_PRICE[::-1] and not_applied(r) == []),
    ("products_price_desc", {"query": "car"}, lambda r: ids(r) == ["p01", "p02", "p03"] and not_applied(r) == []),
    ("products_price_desc", {"query": "book", "restrictSearchableAttributes": ["kind"]},
     lambda r: ids(r) == ["p07", "p06", "p08", "p12"]),
    ("products_price_desc", {"query": "car", "relevancyStrictness": 100},
     lambda r: ids(r) == ["p01", "p02", "p03"] and any("relevant sort approximated" in m for m in not_applied(r))),
    ("products_price_desc", {"query": "", "relevancyStrictness": 100}, lambda r: ids(r) == BY_PRICE[::-1]),
]

HEADERS = {
    "X-Algolia-Application-Id": APP_ID, "X-Algolia-API-Key": API_KEY, "Content-Type": "application/json",
    "X-Mirrorgate-Strategy": "offlineOnly",
}
FRANCE = [51, -5, 51, 8, 42, 8, 42, -5]
GERMANY = [55, 6, 55, 15, 47, 15, 47, 6]


def ids(res: dict) -> list[str]:
    return [h["objectID"] for h in res["hits"]]


def info(res: dict, oid: str) -> dict:
    return next(h["_rankingInfo"] for h in res["hits"] if h["objectID"] == oid)


def not_applied(res: dict) -> list[str]:
    """What the local answer's `message` says was not applied. The fake upstream adds its `_upstream`
    marker to every answer, the settings too; real settings never hold it, so it is left out here."""
    message = res.get("message")
    if message is None:
        return []
    prefix = "Answered locally by Mirrorgate; not applied: "
    assert message.startswith(prefix), message
    return [m for m in message[len(prefix):].split("; ") if m != "setting _upstream"]


def hl(res: dict, oid: str) -> dict:
    return next(h["_highlightResult"]["name"] for h in res["hits"] if h["objectID"] == oid)


# (params, check): each check asserts what Algolia answers for the query.
CASES = [
    # ignorePlurals (parameter; languages from the parameter or queryLanguages)
    ({"query": "cars", "queryType": "prefixNone", "typoTolerance": False}, lambda r: ids(r) == ["p03"]),
    ({"query": "cars", "queryType": "prefixNone", "typoTolerance": False, "ignorePlurals": True},
     lambda r: set(ids(r)) == {"p01", "p02", "p03"}),
    ({"query": "cars", "queryType": "prefixNone", "typoTolerance": False, "ignorePlurals": ["en"]},
     lambda r: set(ids(r)) == {"p01", "p02", "p03"} and not_applied(r) == []),
    ({"query": "cars", "queryType": "prefixNone", "typoTolerance": False, "ignorePlurals": True,
      "queryLanguages": ["es"]}, lambda r: ids(r) == ["p03"]),
    ({"query": "foot", "queryType": "prefixNone", "ignorePlurals": ["en"]}, lambda r: set(ids(r)) == {"p04", "p05"}),
    ({"query": "feet", "queryType": "prefixNone", "ignorePlurals": ["en"]}, lambda r: set(ids(r)) == {"p04", "p05"}),
    ({"query": "mouse", "queryType": "prefixNone", "ignorePlurals": ["en"]}, lambda r: set(ids(r)) == {"p11", "p12"}),
    ({"query": "mouse", "queryType": "prefixNone"}, lambda r: ids(r) == ["p11"]),
    ({"query": "cheval", "ignorePlurals": ["fr"]}, lambda r: ids(r) == ["p06"]),
    ({"query": "häuser", "ignorePlurals": ["de"]}, lambda r: ids(r) == ["p07"]),
    ({"query": "canción", "ignorePlurals": ["es"]}, lambda r: ids(r) == ["p08"]),
    ({"query": "foot", "queryType": "prefixNone", "ignorePlurals": ["en"], "getRankingInfo": True},
     lambda r: info(r, "p04")["nbTypos"] == 0 and hl(r, "p04")["value"] == "Running shoes for the <em>feet</em>"
     and hl(r, "p04")["matchedWords"] == ["foot"]),
    ({"query": "shoes foot", "ignorePlurals": ["en"], "getRankingInfo": True},
     lambda r: info(r, "p04")["nbExactWords"] == 2),
    ({"query": "shoes foot", "ignorePlurals": ["en"], "getRankingInfo": True,
      "alternativesAsExact": ["singleWordSynonym"]}, lambda r: info(r, "p04")["nbExactWords"] == 1),
    ({"query": "car", "ignorePlurals": ["en", "it"]}, lambda r: "ignorePlurals for it" in not_applied(r)),
    # removeStopWords
    ({"query": "the red car"}, lambda r: r["nbHits"] == 0),
    ({"query": "the red car", "removeStopWords": ["en"]}, lambda r: ids(r) == ["p01"]),
    ({"query": "the red car", "removeStopWords": True, "queryLanguages": ["en"]}, lambda r: ids(r) == ["p01"]),
    ({"query": "red car the", "removeStopWords": ["en"]}, lambda r: r["nbHits"] == 0),
    ({"query": "the red car", "removeStopWords": ["en"], "queryType": "prefixAll"}, lambda r: r["nbHits"] == 0),
    ({"query": "las canciones", "removeStopWords": ["es"]}, lambda r: ids(r) == ["p08"]),
    ({"query": "un village", "removeStopWords": ["fr"]}, lambda r: ids(r) == ["p06"]),
    ({"query": "die haus", "removeStopWords": ["de"]}, lambda r: ids(r) == ["p07"]),
    # optionalWords
    ({"query": "red car", "optionalWords": ["red"], "getRankingInfo": True},
     lambda r: ids(r)[0] == "p01" and set(ids(r)) == {"p01", "p02", "p03"} and info(r, "p01")["words"] == 2
     and info(r, "p02")["words"] == 1),
    ({"query": "red car", "optionalWords": "red car"}, lambda r: set(ids(r)) == {"p01", "p02", "p03"}),
    ({"query": "red spa", "optionalWords": ["red", "spa"]}, lambda r: set(ids(r)) == {"p01", "p05"}),
    # removeWordsIfNoResults
    ({"query": "red car yellow"}, lambda r: r["nbHits"] == 0),
    ({"query": "red car yellow", "removeWordsIfNoResults": "lastWords", "getRankingInfo": True},
     lambda r: ids(r) == ["p01"] and r["nbHits"] == 1 and r["queryAfterRemoval"] == "red car <em>yellow</em>"
     and info(r, "p01")["words"] == 2 and r["query"] == "red car yellow"),
    ({"query": "yellow blue car", "removeWordsIfNoResults": "firstWords"},
     lambda r: ids(r) == ["p02"] and r["queryAfterRemoval"] == "<em>yellow</em> blue car"),
    ({"query": "yellow spa kids", "removeWordsIfNoResults": "allOptional"},
     lambda r: set(ids(r)) == {"p03", "p05"}),
    ({"query": "yellow", "removeWordsIfNoResults": "lastWords"}, lambda r: r["nbHits"] == 0),
    ({"query": "red car", "removeWordsIfNoResults": "lastWords"}, lambda r: ids(r) == ["p01"] and "queryAfterRemoval" not in r),
    # advancedSyntax: exclusion and exact phrases
    ({"query": "car -sports", "advancedSyntax": True}, lambda r: set(ids(r)) == {"p02", "p03"}),
    ({"query": "car -sports"}, lambda r: ids(r) == ["p01"]),
    ({"query": "-car", "advancedSyntax": True}, lambda r: "p01" not in ids(r) and "p02" not in ids(r) and r["nbHits"] == 10),
    ({"query": "car -sports", "advancedSyntax": True, "advancedSyntaxFeatures": ["exactPhrase"]},
     lambda r: ids(r) == ["p01"]),
    ({"query": "\"family car\"", "advancedSyntax": True}, lambda r: ids(r) == ["p02"]),
    ({"query": "\"car family\"", "advancedSyntax": True}, lambda r: r["nbHits"] == 0),
    ({"query": "\"car family\""}, lambda r: ids(r) == ["p02"]),
    ({"query": "\"famly car\"", "advancedSyntax": True}, lambda r: r["nbHits"] == 0),
    ({"query": "\"blue family\" car", "advancedSyntax": True},
     lambda r: ids(r) == ["p02"] and hl(r, "p02")["value"] == "<em>Blue</em> <em>family</em> <em>car</em>"),
    # synonyms (multi-way, placeholder)
    ({"query": "automobile"}, lambda r: set(ids(r)) == {"p01", "p02"}),
    ({"query": "main st", "queryType": "prefixNone"}, lambda r: ids(r) == ["p09"]),
    ({"query": "main street", "queryType": "prefixNone"}, lambda r: set(ids(r)) == {"p09", "p10"}),
    ({"query": "main st", "queryType": "prefixNone", "synonyms": False}, lambda r: r["nbHits"] == 0),
    # optionalFilters, filter scores, sumOrFiltersScores
    ({"query": "car", "optionalFilters": ["brand:Calm"], "getRankingInfo": True},
     lambda r: ids(r)[0] == "p02" and r["nbHits"] == 3 and info(r, "p02")["filters"] == 1 and info(r, "p01")["filters"] == 0),
    ({"query": "car", "optionalFilters": "brand:Calm"}, lambda r: ids(r)[0] == "p02"),
    ({"query": "car", "optionalFilters": ["brand:-Calm"]}, lambda r: ids(r)[-1] == "p02"),
    ({"query": "car", "optionalFilters": [["brand:Fast<score=3>", "brand:Toy<score=2>"]], "getRankingInfo": True},
     lambda r: ids(r) == ["p01", "p03", "p02"] and info(r, "p01")["filters"] == 3),
    ({"query": "", "optionalFilters": [["brand:Fast<score=2>", "kind:car<score=2>"]], "getRankingInfo": True},
     lambda r: info(r, "p01")["filters"] == 2),
    ({"query": "", "optionalFilters": [["brand:Fast<score=2>", "kind:car<score=2>"]], "getRankingInfo": True,
      "sumOrFiltersScores": True}, lambda r: info(r, "p01")["filters"] == 4 and ids(r)[0] == "p01"),
    ({"query": "", "filters": "brand:Calm<score=1> OR brand:Fast<score=5>", "getRankingInfo": True},
     lambda r: set(ids(r)) == {"p01", "p02", "p04", "p05"} and set(ids(r)[:2]) == {"p01", "p04"}),
    # nested facetFilters
    ({"query": "", "facetFilters": [[["brand:Fast", "brand:Toy"]], "kind:car"]}, lambda r: ids(r) == ["p01"]),
    ({"query": "", "facetFilters": [["brand:Fast", ["brand:Toy", "brand:Calm"]]]}, lambda r: r["nbHits"] == 5),
    # geo: insidePolygon (several), aroundPrecision (number and ranges)
    ({"query": "", "insidePolygon": [FRANCE]}, lambda r: set(ids(r)) == {"p01", "p02"}),
    ({"query": "", "insidePolygon": [FRANCE, GERMANY]}, lambda r: set(ids(r)) == {"p01", "p02", "p03"}),
    ({"query": "", "insidePolygon": ",".join(str(x) for x in FRANCE)}, lambda r: set(ids(r)) == {"p01", "p02"}),
    ({"query": "", "aroundLatLng": "50.8503,4.3517", "aroundRadius": 600000}, lambda r: ids(r) == ["p01", "p02"]),
    ({"query": "", "aroundLatLng": "50.8503,4.3517", "aroundRadius": 600000, "aroundPrecision": 1000000},
     lambda r: ids(r) == ["p02", "p01"]),
    ({"query": "", "aroundLatLng": "50.8503,4.3517", "aroundRadius": 600000, "getRankingInfo": True,
      "aroundPrecision": [{"from": 0, "value": 10}, {"from": 100000, "value": 1000000}]},
     lambda r: ids(r) == ["p02", "p01"] and info(r, "p01")["geoPrecision"] == 1000000),
    ({"query": "", "aroundLatLng": "50.8503,4.3517", "minimumAroundRadius": 1000},
     lambda r: any(m.startswith("aroundRadius") for m in not_applied(r))),
    # ranking: word position without searchableAttributes; ties (last indexed first)
    ({"query": "main"}, lambda r: ids(r) == ["p10", "p09"]),
    ({"query": "book", "restrictSearchableAttributes": ["kind"]}, lambda r: ids(r) == ["p12", "p08", "p07", "p06"]),
    ({"query": ""}, lambda r: ids(r)[:3] == ["p12", "p11", "p10"]),
    # shapes: renderingContent, ignored parameters named
    ({"query": "car"}, lambda r: r["renderingContent"] == RENDERING and not_applied(r) == []),
    ({"query": "car", "clickAnalytics": True}, lambda r: not_applied(r) == ["clickAnalytics"]),
    ({"query": "car", "aroundLatLngViaIP": True}, lambda r: not_applied(r) == ["aroundLatLngViaIP"]),
    ({"query": "car", "enablePersonalization": True}, lambda r: not_applied(r) == ["enablePersonalization"]),
    ({"query": "car", "analytics": False, "analyticsTags": ["x"], "userToken": "u1"}, lambda r: not_applied(r) == []),
]

BAD = [
    {"query": "x", "removeWordsIfNoResults": "sometimes"},
    {"query": "", "filters": "brand:Calm<score=x>"},
    {"query": "", "insidePolygon": [[1, 2, 3, 4]]},
    {"query": "", "aroundLatLng": "46.2,6.1", "aroundPrecision": [{"from": 0}]},
]


@pytest.fixture
def upstream():
    f = FakeAlgolia(browse_page_size=5).start()
    f.seed("products", RECORDS, dict(SETTINGS, replicas=REPLICAS))
    f.index("products").synonyms = [dict(s) for s in SYNONYMS]
    f.index("products").rules = [json.loads(json.dumps(r)) for r in RULES]
    f.seed("products_price_asc", [], ASC_SETTINGS)
    f.seed("products_price_desc", [], DESC_SETTINGS)
    yield f
    if not f.stopping:
        f.stop()


@pytest.fixture
def gw(gateway_factory, upstream):
    g = gateway_factory(mirrored_config(upstream.url))
    stats = sync(g)
    assert stats["objects"] == len(RECORDS)
    return g


def local(gw, params: dict, index: str = "products") -> tuple[int, dict]:
    st, headers, body = request(
        "POST", gw.url(f"/1/indexes/{index}/query"), body=json.dumps(params).encode(), headers=HEADERS, timeout=10
    )
    assert headers.get("x-mirrorgate-origin") == "local", (st, body)
    return st, json.loads(body)


def test_local_answers_follow_algolias_documented_semantics(gw):
    cases = [("products", p, c) for p, c in CASES + RULE_CASES] + REPLICA_CASES
    assert len(cases) >= 60
    failures = []
    for index, params, check in cases:
        st, res = local(gw, params, index)
        ok = False
        try:
            ok = st == 200 and bool(check(res))
        except (KeyError, IndexError, StopIteration, TypeError):
            ok = False
        if not ok:
            failures.append(
                (index, params, st, {k: res.get(k) for k in ("nbHits", "message", "queryAfterRemoval", "appliedRules")},
                 ids(res) if "hits" in res else res)
            )
    assert not failures, failures


def test_bad_parameters_get_a_400_in_algolias_format(gw):
    for params in BAD:
        st, res = local(gw, params)
        assert st == 400, (params, res)
        assert res["status"] == 400 and isinstance(res["message"], str) and res["message"], res


def test_official_client_gets_no_warning_and_settings_with_defaults(gw, upstream):
    upstream.stop()  # the official client's default strategy then answers locally
    c = client_for(gw)
    res = c.search_single_index("products", {"query": "blue car", "ignorePlurals": ["en"]}).to_dict()
    assert res["origin"] == "local"
    assert ids(res) == ["p02"]
    assert not_applied(res) == []
    hdrs = {"X-Algolia-Application-Id": APP_ID, "X-Algolia-API-Key": API_KEY}
    for version in ("1", "2"):
        st, _, body = request("GET", gw.url(f"/1/indexes/products/settings?getVersion={version}"), headers=hdrs)
        assert st == 200
        s = json.loads(body)
        assert s["attributesForFaceting"] == SETTINGS["attributesForFaceting"]
        assert s["renderingContent"] == RENDERING
        assert s["minWordSizefor1Typo"] == 4 and s["minWordSizefor2Typos"] == 8
        assert s["maxValuesPerFacet"] == 100 and s["hitsPerPage"] == 20 and s["paginationLimitedTo"] == 1000
        assert s["ranking"] == ["typo", "geo", "words", "filters", "proximity", "attribute", "exact", "custom"]
        assert s["queryType"] == "prefixLast" and s["removeWordsIfNoResults"] == "none"
        assert s["alternativesAsExact"] == ["ignorePlurals", "singleWordSynonym"]
        assert ("synonyms" in s) == (version == "1")


def test_rules_and_replicas_through_the_official_client_offline(gw, upstream):
    upstream.stop()  # the client's default strategy then answers locally
    c = client_for(gw)
    both = c.search(
        {"requests": [{"indexName": "products", "query": "bargain car"},
                      {"indexName": "products_price_asc", "query": "car"}]}
    ).to_dict()
    first, second = both["results"]
    assert first["origin"] == "local" and ids(first)[0] == "p05" and applied(first) == ["bargain"]
    assert ids(second) == ["p03", "p02", "p01"]
    objects = c.get_objects(
        {"requests": [{"indexName": "products_price_desc", "objectID": "p04"},
                      {"indexName": "products", "objectID": "p99"}]}
    ).to_dict()
    assert objects["results"][0]["name"] == "Running shoes for the feet" and objects["results"][1] is None
    found = c.search_rules("products", {"query": "sneakers"}).to_dict()
    assert found["nbHits"] == 1 and found["hits"][0]["objectID"] == "sneakers"
    contextual = c.search_rules("products", {"context": "kids"}).to_dict()
    assert [h["objectID"] for h in contextual["hits"]] == ["kids-context"]
    rule = c.get_rule("products", "hide-trap").to_dict()
    assert rule["objectID"] == "hide-trap" and rule["consequence"]["hide"] == [{"objectID": "p11"}]
    listed = {i["name"]: i for i in c.list_indices().to_dict()["items"]}
    assert set(listed) == {"products", "products_price_asc", "products_price_desc"}
    assert listed["products"]["replicas"] == REPLICAS and listed["products"]["entries"] == len(RECORDS)
    assert listed["products_price_asc"]["primary"] == "products"
    assert listed["products_price_desc"]["virtual"] is True
    hdrs = {"X-Algolia-Application-Id": APP_ID, "X-Algolia-API-Key": API_KEY}
    st, _, body = request("GET", gw.url("/1/indexes/products_price_desc/settings"), headers=hdrs)
    settings = json.loads(body)
    assert st == 200 and settings["customRanking"] == ["desc(price)"] and settings["primary"] == "products"
    assert settings["attributesForFaceting"] == SETTINGS["attributesForFaceting"]  # the primary's
    st, _, body = request("GET", gw.url("/1/indexes/products/rules/nope"), headers=hdrs)
    assert st == 404 and json.loads(body)["status"] == 404


def test_the_status_names_replicas_and_what_local_answers_did_not_apply(gw):
    local(gw, {"query": "car", "clickAnalytics": True})
    st, _, body = request("GET", gw.url("/_mirrorgate/status"), headers=gw.admin_headers())
    products = json.loads(body)["algolia"]["indices"]["products"]
    assert "clickAnalytics" in products["notApplied"]["parameters"]
    assert products["replicas"]["products_price_desc"]["virtual"] is True
    assert products["replicas"]["products_price_asc"]["objects"] == len(RECORDS)
