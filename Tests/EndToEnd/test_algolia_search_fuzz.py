"""Bad input on the local Algolia search path: seeded random search, browse, multi-query and facet-search
requests, mixing valid parameters with hostile ones (odd types, huge and negative numbers, malformed filter
expressions, garbage geo parameters, 10k-character and control-character queries, broken JSON bodies and
bad percent-escapes), sent to an offline index built from a small bootstrap corpus. Every answer is 200 with
a well-formed result or a 4xx in Algolia's error format (`{"message", "status"}`), never a 5xx, a hang or a
crash, and the gateway still answers a plain search at the end. Seeded (the seed is printed; MG_FUZZ_SEED
replays it), bounded in count and time.
"""

from __future__ import annotations

import base64
import json
import os
import random
import time
from urllib.parse import quote

import pytest
import requests

SEED = int(os.environ.get("MG_FUZZ_SEED", random.SystemRandom().randrange(1 << 30)))
ROUNDS = 4000
TIME_BUDGET = 22.0  # seconds of requests at most
APP = "FUZZAPP"
KEY = "fuzz-search-key"
INDEX = "fuzz"
URL_LIMIT = 16_000  # longer GET URLs meet the HTTP layer's own 414 (see below)
HEADERS = {"X-Algolia-Application-Id": APP, "X-Algolia-API-Key": KEY}

WORDS = ["alpha", "beta", "gamma", "delta", "épée", "naïve", "東京", "straße", "rock", "jazz", "blue", "red", "x"]
COLORS = ["red", "green", "blue", "black", "white"]
FACETS = ["brand", "color", "tags", "inStock", "specs.size", "category"]
ATTRS = ["name", "description", "brand", "color", "tags", "price", "rating", "specs.size", "specs.weight",
         "inStock", "category", "nope", "*", "_geoloc", "objectID", "specs"]


def corpus(rng: random.Random, n: int = 200) -> list[dict]:
    out = []
    for i in range(n):
        rec = {
            "objectID": f"obj-{i}",
            "name": " ".join(rng.choice(WORDS) for _ in range(rng.randrange(1, 4))),
            "description": " ".join(rng.choice(WORDS) for _ in range(rng.randrange(0, 12))),
            "brand": rng.choice(["Acme", "Globex", "Initech", "Umbrella", "O'Reilly", 'Say "hi"']),
            "color": rng.choice(COLORS),
            "tags": rng.sample(WORDS, rng.randrange(0, 4)),
            "_tags": rng.sample(["new", "sale", "hot"], rng.randrange(0, 3)),
            "price": round(rng.uniform(-10, 1000), 2),
            "rating": rng.randrange(0, 6),
            "inStock": rng.random() < 0.5,
            "category": rng.choice(["a", "b", "c", None]),
            "specs": {"size": rng.choice(["S", "M", "L"]), "weight": rng.randrange(1, 100)},
            "_geoloc": {"lat": rng.uniform(-90, 90), "lng": rng.uniform(-180, 180)},
        }
        if i % 17 == 0:
            rec["_geoloc"] = [{"lat": 48.85, "lng": 2.35}, {"lat": 40.7, "lng": -74.0}]
        if i % 23 == 0:
            rec["price"] = str(rec["price"])  # a numeric attribute holding a string now and then
        if i % 29 == 0:
            del rec["_geoloc"]
        out.append(rec)
    return out


SETTINGS = {
    "searchableAttributes": ["name", "unordered(description)", "brand,color", "tags", "specs.size"],
    "attributesForFaceting": ["brand", "color", "searchable(tags)", "filterOnly(category)", "inStock",
                              "specs.size", "afterDistinct(rating)"],
    "customRanking": ["desc(rating)", "asc(price)"],
    "numericAttributesForFiltering": ["price", "rating", "specs.weight"],
    "attributesToHighlight": ["name", "description"],
    "attributeForDistinct": "brand",
}


@pytest.fixture
def search_gateway(gateway_factory, tmp_path):
    records = corpus(random.Random(1234))
    (tmp_path / "objects.json").write_text(json.dumps(records))
    (tmp_path / "settings.json").write_text(json.dumps(SETTINGS))
    return gateway_factory(
        {
            "algolia": {
                "appId": APP,
                "apiKey": KEY,
                "hosts": ["http://127.0.0.1:9"],
                "offlineIndices": {
                    INDEX: {
                        "bootstrap": {"settings": str(tmp_path / "settings.json"),
                                      "objects": [str(tmp_path / "objects.json")]},
                        "apiKeys": [KEY],
                    }
                },
            },
            "server": {"requestTimeout": "10s"},
        }
    )


# -- values ----------------------------------------------------------------------------------------
HUGE_INTS = [0, -1, 1, 2, 5, 20, 1000, 2**31, 2**31 - 1, -(2**31), 2**53, 2**63 - 1, 2**63, -(2**63), 10**30]
ODD = [None, True, False, "", " ", "abc", "1e309", "NaN", "-0", "1.5", 1.5, -2.5, 1e308, [], {}, [1], {"a": 1},
       "\u0000", "💥", "9" * 400]


def rnd_int(rng):
    return rng.choice(HUGE_INTS + ODD + [rng.randrange(-5, 60), str(rng.randrange(-5, 60))])


def rnd_text(rng):
    return rng.choice([
        rng.choice(WORDS),
        " ".join(rng.choice(WORDS) for _ in range(rng.randrange(1, 6))),
        "",
        "x" * 10000,
        " ".join(rng.choice(WORDS) for _ in range(2000)),
        "\u0000\u0001\u0007\t\n\r\u001f\u007f",
        "💥🎉👩‍👩‍👧 emoji",
        "\ud800",  # a lone surrogate (json.dumps escapes it as \\ud800)
        "\udfff\ud800x",
        '"quoted" \\ back\\slash',
        "-alpha -beta \"exact phrase\"",
        "東京 straße épée",
        "a" * 300,
        "%zz%",
        "a b c d e f g h i j k l m n o p q r s t u v w x y z " * 10,
    ])


def rnd_value(rng):
    return rng.choice([rng.choice(WORDS), rng.choice(COLORS), "Acme", "O'Reilly", 'Say "hi"', "", "💥", "\ud800",
                       "x" * 500, "true", "1", "-5", "1e400", "NaN"])


def rnd_number(rng):
    return rng.choice(["0", "-1", "1.5", "1e308", "1e309", "-1e309", "NaN", "inf", "9" * 50, "0x10", "1..2", "",
                       "--3", "+4", ".5", "5.", str(rng.randrange(-100, 1000))])


def filter_expr(rng, depth=0) -> str:
    if depth > 3 or rng.random() < 0.4:
        kind = rng.randrange(7)
        if kind == 0:
            q1, q2 = rng.choice(["", '"']), rng.choice(["", '"'])
            return f"{rng.choice(FACETS)}:{q1}{rnd_value(rng)}{q2}"
        if kind == 1:
            return f"{rng.choice(['price', 'rating', 'specs.weight', 'nope', 'color'])} " \
                   f"{rng.choice(['<', '<=', '=', '!=', '>=', '>', '<>', '==', '=>', '~', ''])} {rnd_number(rng)}"
        if kind == 2:
            return f"price:{rnd_number(rng)} TO {rnd_number(rng)}"
        if kind == 3:
            return f"_tags:{rng.choice(['new', 'sale', 'x', ''])}"
        if kind == 4:
            return rng.choice(["NOT", "AND", "OR", "(", ")", ":", "\"", "'", "TO", "price", "()", "NOT NOT color:red"])
        if kind == 5:
            return f"{rng.choice(FACETS)}:'{rnd_value(rng)}'"
        return '"' + rng.choice(FACETS) + '":"' + rnd_value(rng) + f'"<score={rnd_number(rng)}>' 
    op = rng.choice([" AND ", " OR ", " and ", " ", " AND NOT ", " OR NOT "])
    left, right = filter_expr(rng, depth + 1), filter_expr(rng, depth + 1)
    expr = f"{left}{op}{right}"
    r = rng.random()
    if r < 0.4:
        expr = f"({expr})"
    elif r < 0.5:
        expr = rng.choice(["(", ")", "(("]) + expr
    if rng.random() < 0.1:
        expr = "NOT " + expr
    return expr


def filters(rng) -> str:
    r = rng.random()
    if r < 0.05:
        return "(" * 2000 + "color:red" + ")" * 2000
    if r < 0.08:
        return "(" * 3000
    if r < 0.1:
        return " OR ".join(f"color:c{i}" for i in range(3000))
    if r < 0.12:
        return "NOT " * 3000 + "color:red"
    return filter_expr(rng)


def facet_filter_atom(rng):
    return rng.choice([
        f"{rng.choice(FACETS)}:{rnd_value(rng)}",
        f"-{rng.choice(FACETS)}:{rnd_value(rng)}",
        f"{rng.choice(FACETS)}:-{rnd_value(rng)}",
        "nocolon", "", ":", "color:", ":red", 5, None, True, {"a": 1}, "color:red<score=3>",
    ])


def array_filter(rng, atom, depth=0):
    r = rng.random()
    if r < 0.15:
        return atom(rng) if rng.random() < 0.5 else str(atom(rng))
    if r < 0.2:
        return json.dumps([atom(rng)])  # a JSON array in a string
    if r < 0.22:
        nested = [atom(rng)]
        for _ in range(300):
            nested = [nested]
        return nested
    out = []
    for _ in range(rng.randrange(0, 5)):
        if depth < 2 and rng.random() < 0.3:
            out.append(array_filter(rng, atom, depth + 1))
        else:
            out.append(atom(rng))
    return out


def numeric_atom(rng):
    return rng.choice([
        f"{rng.choice(['price', 'rating', 'specs.weight', 'nope', 'color'])}"
        f"{rng.choice(['<', '<=', '=', '!=', '>=', '>', '<>', ' '])}{rnd_number(rng)}",
        f"price:{rnd_number(rng)} TO {rnd_number(rng)}", "price", "", ">5", "price>", 3, None,
    ])


def tag_atom(rng):
    return rng.choice(["new", "sale", "-hot", "", "nope", "💥", None, 7, "\ud800"])


def attr_list(rng):
    r = rng.random()
    if r < 0.2:
        return rng.choice(["*", "", "name", "name,description", "nope", "*,name", 5, None, True, {"x": 1}])
    return [rng.choice(ATTRS + [f"{rng.choice(ATTRS)}:{rng.choice(['-5', '0', '99999999999', 'abc', '', '3'])}",
                                "", None, 3, "*"]) for _ in range(rng.randrange(0, 5))]


def geo_point(rng):
    return rng.choice(["48.85, 2.35", "48.85,2.35", "91,181", "-91,-181", "NaN,NaN", "abc", "", ",", "1", "1,2,3",
                       "1e309,1e309", "48.85 2.35", [48.85, 2.35], 5, None, "0,0"])


def box(rng):
    return rng.choice(["", "1,2,3", "47.3,4.1,48.8,5.6", "a,b,c,d", [[47.3, 4.1, 48.8, 5.6]], [[1, 2, 3]], [[]],
                       [], [1, 2, 3, 4], "NaN,NaN,NaN,NaN", "90,180,-90,-180", [["a", "b", "c", "d"]], 5])


def polygon(rng):
    return rng.choice(["", "1,2,3,4,5,6", "1,2,3,4,5,6,7", "1,2", [[1, 2, 3, 4, 5, 6]], [[1, 2]], [], [[]],
                       "a,b,c,d,e,f", "NaN,0,0,NaN,1,1", [[1e309, 0, 0, 0, 1, 1]], [["x"] * 6], "0,0,0,0,0,0"])


PARAMS = {
    "query": rnd_text,
    "hitsPerPage": rnd_int,
    "page": rnd_int,
    "offset": rnd_int,
    "length": rnd_int,
    "filters": lambda rng: filters(rng) if rng.random() < 0.9 else rng.choice(ODD),
    "facetFilters": lambda rng: array_filter(rng, facet_filter_atom),
    "numericFilters": lambda rng: array_filter(rng, numeric_atom),
    "tagFilters": lambda rng: array_filter(rng, tag_atom),
    "optionalFilters": lambda rng: array_filter(rng, facet_filter_atom),
    "attributesToRetrieve": attr_list,
    "attributesToHighlight": attr_list,
    "attributesToSnippet": attr_list,
    "restrictSearchableAttributes": attr_list,
    "typoTolerance": lambda rng: rng.choice([True, False, "min", "strict", "true", "false", "bogus", 1, 0, None, [],
                                             {}, 2.5]),
    "minWordSizefor1Typo": rnd_int,
    "minWordSizefor2Typos": rnd_int,
    "aroundLatLng": geo_point,
    "aroundLatLngViaIP": lambda rng: rng.choice([True, False, "x", 1]),
    "aroundRadius": lambda rng: rng.choice(["all", "none", 0, -1, 1, 1000, 2**63, "abc", None, 1.5, "1e309"]),
    "aroundPrecision": lambda rng: rng.choice([0, -5, 10, 2**62, "x", [{"from": 0, "value": 10}],
                                               [{"from": "a"}], [], [5]]),
    "minimumAroundRadius": rnd_int,
    "insideBoundingBox": box,
    "insidePolygon": polygon,
    "distinct": lambda rng: rng.choice([True, False, 0, 1, 2, 3, 4, 5, -1, 2**63, "x", "1", None, 1.5]),
    "facets": lambda rng: rng.choice([["*"], ["brand", "color"], "*", "brand", ["nope"], [], [None], ["tags", 5],
                                      "brand,color", ["specs.size", "inStock"], {}]),
    "maxValuesPerFacet": rnd_int,
    "maxFacetHits": rnd_int,
    "sortFacetValuesBy": lambda rng: rng.choice(["count", "alpha", "bogus", "", 5, None]),
    "facetingAfterDistinct": lambda rng: rng.choice([True, False, "x"]),
    "getRankingInfo": lambda rng: rng.choice([True, False, 1, "true", "x"]),
    "analytics": lambda rng: rng.choice([True, False, "x"]),
    "queryType": lambda rng: rng.choice(["prefixAll", "prefixLast", "prefixNone", "bogus", 5, None]),
    "removeWordsIfNoResults": lambda rng: rng.choice(["none", "lastWords", "firstWords", "allOptional", "x", 5]),
    "advancedSyntax": lambda rng: rng.choice([True, False, "x", 1]),
    "optionalWords": lambda rng: rng.choice([["alpha"], "alpha beta", "", [None], 5, ["x" * 1000]]),
    "exactOnSingleWordQuery": lambda rng: rng.choice(["attribute", "word", "none", "x", 5]),
    "highlightPreTag": lambda rng: rng.choice(["<em>", "", "\u0000", "💥" * 100, 5, None]),
    "highlightPostTag": lambda rng: rng.choice(["</em>", "", "\ud800", 5]),
    "snippetEllipsisText": lambda rng: rng.choice(["…", "", 5]),
    "responseFields": lambda rng: rng.choice([["*"], ["hits"], ["nbHits"], [], "*", "hits,nbHits", 5, ["nope"]]),
    "ignorePlurals": lambda rng: rng.choice([True, False, ["en"], "fr", 5, [5]]),
    "removeStopWords": lambda rng: rng.choice([True, False, ["en"], "fr", 5]),
    "queryLanguages": lambda rng: rng.choice([["en"], "en,fr", 5, [None]]),
    "ruleContexts": lambda rng: rng.choice([["a"], "a", 5]),
    "enableRules": lambda rng: rng.choice([True, False, "x"]),
    "clickAnalytics": lambda rng: rng.choice([True, False, "x"]),
    "cursor": lambda rng: rng.choice(["", "garbage", "%%%", "eyJ4IjoxfQ==", "x" * 5000, 5, None]),
    "facetQuery": lambda rng: rnd_text(rng) if rng.random() < 0.7 else rng.choice(ODD),
    "bogusParam": lambda rng: rng.choice(ODD),
}


def random_params(rng) -> dict:
    names = rng.sample(list(PARAMS), rng.randrange(0, 7))
    return {n: PARAMS[n](rng) for n in names}


def form_value(v) -> str:
    return v if isinstance(v, str) else json.dumps(v)


def params_string(rng, params: dict) -> str:
    parts = []
    for k, v in params.items():
        enc = quote(form_value(v), safe="", errors="surrogatepass") if rng.random() < 0.95 else form_value(v)
        parts.append(f"{quote(k)}={enc}")
    if rng.random() < 0.15:
        parts.insert(rng.randrange(len(parts) + 1), rng.choice(["%", "%zz=1", "query=%E2%82", "=x", "&&", "bogusFlag",
                                                                "%ff%fe=%00", "a=%u1234", "query=%C0%AF"]))
    return "&".join(parts)


def dumps(obj) -> bytes:
    # ensure_ascii escapes lone surrogates as \\udXXX, which is what a hostile client would send
    return json.dumps(obj).encode()


def mutate(rng, data: bytes) -> bytes:
    b = bytearray(data)
    for _ in range(rng.randrange(1, 5)):
        i = rng.randrange(len(b) + 1)
        op = rng.randrange(3)
        if op == 0 and b:
            del b[min(i, len(b) - 1)]
        elif op == 1:
            b.insert(i, rng.randrange(256))
        elif b:
            b[min(i, len(b) - 1)] = rng.choice(b'{}[]",:\\u0123456789-eE')
    return bytes(b)


JUNK_BODIES = [b"{", b"[]", b"null", b"1", b'"x"', b'{"params": 5}', b'{"params": null}', b'{"params": ["a"]}',
               b'{"requests": 5}', b'{"requests": [5]}', b'{"requests": [{}]}', b'{"requests": [{"indexName": 5}]}',
               b'{"query": "\\ud800"}', b'{"query": "\\udc00\\ud800"}', b'{"query": "\\u0000"}',
               b"\xff\xfe", b'{"a":' * 5000 + b"1" + b"}" * 5000, b"[" * 100000, b'{"query": "' + b"\\" * 3 + b'"}',
               b'{"hitsPerPage": 1e999}', b'{"page": -1e999}', b'{"hitsPerPage": 12345678901234567890123}',
               b'{"query": "x", "query": 5}']


def build_request(rng):
    """(method, path, body bytes or None, kind, params sent) for one random request."""
    params = random_params(rng)
    kind = rng.choices(["query", "get", "queries", "browse", "facet", "junk"], [30, 15, 15, 10, 20, 4])[0]
    if kind == "get":
        qs = params_string(rng, params)
        try:
            qs.encode("utf-8")
        except UnicodeEncodeError:  # a raw lone surrogate cannot go on the wire as is: percent-encode it
            qs = quote(qs, safe="=&%", errors="surrogatepass")
        return "GET", f"/1/indexes/{INDEX}" + (f"?{qs}" if qs else ""), None, kind, params
    if kind == "junk":
        path = rng.choice([f"/1/indexes/{INDEX}/query", "/1/indexes/*/queries", f"/1/indexes/{INDEX}/browse",
                           f"/1/indexes/{INDEX}/facets/brand/query"])
        body = rng.choice(JUNK_BODIES)
        if rng.random() < 0.3:
            body = mutate(rng, body)
        return "POST", path, body, kind, {}
    if kind == "queries":
        reqs = []
        for _ in range(rng.randrange(1, 4)):
            p = random_params(rng)
            item = {"indexName": INDEX}
            if rng.random() < 0.5:
                item["params"] = params_string(rng, p)
            else:
                item.update(p)
            if rng.random() < 0.2:
                item["type"] = rng.choice(["facet", "default", "bogus", 5])
                item["facet"] = rng.choice(FACETS + ["nope", "", 5])
            reqs.append(item)
        body: dict = {"requests": reqs}
        if rng.random() < 0.3:
            body["strategy"] = rng.choice(["none", "stopIfEnoughMatches", "bogus", 5])
        data = dumps(body)
        return "POST", "/1/indexes/*/queries", mutate(rng, data) if rng.random() < 0.1 else data, kind, {}
    if kind == "facet":
        facet = rng.choice(FACETS + ["nope", "specs", "%zz", "%E2%82", "💥", "*", "rating"])
        path = f"/1/indexes/{INDEX}/facets/{quote(facet, safe='%')}/query"
    elif kind == "browse":
        path = f"/1/indexes/{INDEX}/browse"
    else:
        path = f"/1/indexes/{INDEX}/query"
    style = rng.randrange(3)
    if style == 0:
        body = dict(params)
    elif style == 1:
        body = {"params": params_string(rng, params)}
    else:
        keys = list(params)
        cut = rng.randrange(len(keys) + 1)
        body = {k: params[k] for k in keys[:cut]}
        body["params"] = params_string(rng, {k: params[k] for k in keys[cut:]})
    data = dumps(body)
    if rng.random() < 0.05:
        data = mutate(rng, data)
        params = {}  # whatever the mutated body now says, no invariant is checked on it
    return "POST", path, data, kind, params


def sane_int(v):
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        return v
    if isinstance(v, str) and v.isdigit():
        return int(v)
    return None


def check_answer(r, kind, params, where, raw=""):
    """`raw`: the request as sent (path and body), for what `params` does not track."""
    assert r.status_code < 500, where
    ctype = r.headers.get("Content-Type", "")
    assert ctype.startswith("application/json"), where + f" content-type {ctype!r}"
    body = r.json()  # raises (fails the test) on a malformed body
    if r.status_code >= 400:
        assert isinstance(body, dict) and isinstance(body.get("message"), str), where
        assert body.get("status") == r.status_code, where
        return
    assert r.status_code == 200, where
    assert isinstance(body, dict), where
    results = body.get("results") if kind == "queries" else [body]
    if kind == "queries":
        assert isinstance(results, list), where
    for res in results:
        if kind == "facet" or "facetHits" in res:
            assert isinstance(res.get("facetHits"), list), where
            for fh in res["facetHits"]:
                assert isinstance(fh.get("value"), str) and isinstance(fh.get("count"), int), where
            continue
        hits = res.get("hits")
        if "hits" not in res and (kind == "queries" or "responseFields" in raw):
            continue  # responseFields may drop hits (the params of each multi-query item are not tracked)
        assert isinstance(hits, list), where
        nb = res.get("nbHits")
        if isinstance(nb, int) and res.get("processed", True) is not False:
            assert nb >= len(hits), where
        hpp = sane_int(params.get("hitsPerPage"))
        if hpp is not None and 0 <= hpp <= 1000 and "length" not in params and "offset" not in params \
                and kind in ("query", "get"):
            assert len(hits) <= hpp, where
        ln = sane_int(params.get("length"))
        if ln is not None and 0 <= ln <= 1000 and "offset" in params and kind in ("query", "get"):
            assert len(hits) <= ln, where
        for h in hits:
            assert isinstance(h, dict), where


def test_random_search_parameters_get_algolia_answers(search_gateway):
    print(f"MG_FUZZ_SEED={SEED}")
    gw = search_gateway
    rng = random.Random(SEED)
    s = requests.Session()
    outcomes: dict[int, int] = {}
    t0 = time.monotonic()
    sent = 0
    for i in range(ROUNDS):
        if time.monotonic() - t0 > TIME_BUDGET:
            break
        method, path, data, kind, params = build_request(rng)
        headers = dict(HEADERS)
        if method == "POST":
            headers["Content-Type"] = rng.choice(["application/json", "application/x-www-form-urlencoded",
                                                  "text/plain"])
        where = f"round {i} seed {SEED}: {method} {path[:300]} body {data[:400] if data else b''!r}"
        try:
            r = s.request(method, gw.url(path), data=data, headers=headers, timeout=10)
        except requests.RequestException as exc:
            raise AssertionError(f"{where}: {exc!r}; gateway alive: {gw.alive()}") from exc
        where += f" -> {r.status_code} {r.text[:300]!r}"
        if r.status_code == 414 and len(path) > URL_LIMIT:
            # The HTTP layer (libmicrohttpd) refuses a request line beyond the per-connection memory
            # (32 KiB, of which the request line gets part) with its own 414 page before any handler
            # runs; Algolia clients POST long queries.
            outcomes[414] = outcomes.get(414, 0) + 1
            continue
        check_answer(r, kind, params, where, raw=path + (data or b"").decode("utf-8", "replace"))
        outcomes[r.status_code] = outcomes.get(r.status_code, 0) + 1
        if os.environ.get("MG_FUZZ_TRACE") and r.status_code == int(os.environ["MG_FUZZ_TRACE"]):
            print(where[:700])
        sent += 1
        if i % 100 == 0:
            assert gw.alive(), where
    # Browse cursors are opaque but readable: a client may edit the position in one.
    r = s.post(gw.url(f"/1/indexes/{INDEX}/browse"), data=json.dumps({"hitsPerPage": 7}), headers=HEADERS, timeout=10)
    assert r.status_code == 200 and r.json().get("cursor"), r.text
    text = r.json()["cursor"]  # URL-safe base64 without padding
    state = json.loads(base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))
    for _ in range(20):
        forged = dict(state, o=rng.choice([-1, -(2**63), 2**63 - 1, 2**62, 10**6, 199, 200, 0, "x", 1.5, None, 10**30]))
        cursor = base64.urlsafe_b64encode(json.dumps(forged).encode()).decode().rstrip("=")
        body = {"cursor": cursor, "hitsPerPage": rng.choice([1, 1000, 2**62, -1])}
        r = s.post(gw.url(f"/1/indexes/{INDEX}/browse"), data=json.dumps(body), headers=HEADERS, timeout=10)
        where = f"seed {SEED}: forged cursor {forged['o']!r} -> {r.status_code} {r.text[:300]!r}; alive {gw.alive()}"
        check_answer(r, "browse", body, where)
        sent += 1
    print(f"{sent} requests in {time.monotonic() - t0:.1f}s, statuses: {sorted(outcomes.items())}")
    assert gw.alive()
    assert outcomes.get(200, 0) > sent // 10, outcomes  # most inputs still reach the engine
    assert outcomes.get(400, 0) > 0, outcomes  # and the hostile ones are refused
    # Still answering a plain valid search with the whole corpus.
    r = s.post(gw.url(f"/1/indexes/{INDEX}/query"), data=json.dumps({"query": "", "hitsPerPage": 5}),
               headers=HEADERS, timeout=10)
    assert r.status_code == 200, r.text
    assert r.json()["nbHits"] == 200 and len(r.json()["hits"]) == 5
