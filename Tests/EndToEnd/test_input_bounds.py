"""Issue 23, items 1 and 2, through the release binary: sizes taken from a request are bounded before they
are allocated, and XML bodies go through the one hardened parser. A 100,000-character Algolia query, a
JSON body nested 100,000 deep, too many filters and an over-long highlight tag get 400 in Algolia's
format; empty, malformed, DTD/entity-bomb, deeply nested, huge-attribute and non-UTF-8 Atom bodies (POST,
PATCH, a `$batch` part, a chunked body) get 400 in OData's error format. After each, the process is alive
and answers an ordinary request.
"""

from __future__ import annotations

import json

import pytest
import requests
from test_odata_offline import MOUNT, nw_config, wait_downloaded
from test_odata_writes import status_of

APP = "BOUNDSAPP"
KEY = "bounds-search-key"
INDEX = "bounds"
HEADERS = {"X-Algolia-Application-Id": APP, "X-Algolia-API-Key": KEY, "Content-Type": "application/json"}
QUERY_ERROR = 'Invalid value for "query" parameter, expected string shorter than 512 bytes'


@pytest.fixture
def search_gateway(gateway_factory, tmp_path):
    records = [
        {"objectID": str(i), "name": f"alpha item {i}", "color": ["red", "blue"][i % 2], "price": i}
        for i in range(50)
    ]
    (tmp_path / "objects.json").write_text(json.dumps(records))
    (tmp_path / "settings.json").write_text(
        json.dumps({"searchableAttributes": ["name"], "attributesForFaceting": ["color"]})
    )
    return gateway_factory(
        {
            "algolia": {
                "appId": APP,
                "apiKey": KEY,
                "hosts": ["http://127.0.0.1:9"],
                "offlineIndices": {
                    INDEX: {
                        "bootstrap": {
                            "settings": str(tmp_path / "settings.json"),
                            "objects": [str(tmp_path / "objects.json")],
                        },
                        "apiKeys": [KEY],
                    }
                },
            },
        }
    )


def algolia_400(r: requests.Response) -> str:
    assert r.status_code == 400, (r.status_code, r.text[:300])
    body = r.json()
    assert set(body) >= {"message", "status"} and body["status"] == 400, body
    return body["message"]


def still_searching(gw) -> None:
    assert gw.alive()
    r = requests.post(gw.url(f"/1/indexes/{INDEX}/query"), json={"query": "alpha"}, headers=HEADERS, timeout=10)
    assert r.status_code == 200 and r.json()["nbHits"] == 50, r.text[:300]


def test_a_100000_character_query_is_a_400_and_the_gateway_lives(search_gateway):
    gw = search_gateway
    url = gw.url(f"/1/indexes/{INDEX}/query")
    for query in ["a" * 100_000, "alpha " * 20_000, "é" * 300]:
        r = requests.post(url, data=json.dumps({"query": query}), headers=HEADERS, timeout=30)
        assert algolia_400(r) == QUERY_ERROR
        still_searching(gw)
    # The `params` string form, a multi-query and a browse carry the same bound.
    r = requests.post(url, data=json.dumps({"params": "query=" + "b" * 600}), headers=HEADERS, timeout=30)
    assert algolia_400(r) == QUERY_ERROR
    multi = {"requests": [{"indexName": INDEX, "query": "alpha"}, {"indexName": INDEX, "query": "x" * 100_000}]}
    r = requests.post(gw.url("/1/indexes/*/queries"), data=json.dumps(multi), headers=HEADERS, timeout=30)
    assert algolia_400(r) == QUERY_ERROR
    r = requests.post(
        gw.url(f"/1/indexes/{INDEX}/browse"), data=json.dumps({"query": "x" * 100_000}), headers=HEADERS, timeout=30
    )
    assert algolia_400(r) == QUERY_ERROR
    for what in ("synonyms", "rules"):
        r = requests.post(
            gw.url(f"/1/indexes/{INDEX}/{what}/search"), json={"query": "x" * 100_000}, headers=HEADERS, timeout=30
        )
        assert algolia_400(r) == QUERY_ERROR, what
    # 512 bytes is accepted.
    r = requests.post(url, data=json.dumps({"query": "a" * 512}), headers=HEADERS, timeout=30)
    assert r.status_code == 200, r.text[:300]
    still_searching(gw)


def test_other_request_sizes_are_bounded(search_gateway):
    gw = search_gateway
    url = gw.url(f"/1/indexes/{INDEX}/query")
    # A JSON body nested 100,000 deep: the parser's depth limit, not a stack overflow.
    deep = b"[" * 100_000 + b"]" * 100_000
    assert "Nesting deeper than 512" in algolia_400(requests.post(url, data=deep, headers=HEADERS, timeout=30))
    deep_object = b'{"query":' * 100_000 + b'"x"' + b"}" * 100_000
    algolia_400(requests.post(url, data=deep_object, headers=HEADERS, timeout=30))
    # A number of 100,000 digits.
    algolia_400(requests.post(url, data=b'{"page":' + b"9" * 100_000 + b"}", headers=HEADERS, timeout=30))
    still_searching(gw)
    # 10,001 filter conditions, as a string and as facetFilters.
    many = [f"color:c{i}" for i in range(10_001)]
    for params in ({"filters": " OR ".join(many)}, {"facetFilters": [many]}):
        assert algolia_400(requests.post(url, json=params, headers=HEADERS, timeout=30)).startswith("Too many filters")
    # Deeply nested filters.
    nested = "(" * 10_000 + "color:red" + ")" * 10_000
    algolia_400(requests.post(url, json={"filters": nested}, headers=HEADERS, timeout=30))
    # Highlight tags longer than 512 bytes.
    message = algolia_400(
        requests.post(url, json={"query": "alpha", "highlightPreTag": "<b>" * 1000}, headers=HEADERS, timeout=30)
    )
    assert '"highlightPreTag"' in message
    # Too many polygon points.
    polygon = [[float(i % 80), float(i % 170)] for i in range(10_001)]
    flat = [x for point in polygon for x in point]
    algolia_400(requests.post(url, json={"insidePolygon": [flat]}, headers=HEADERS, timeout=30))
    # Clamped as Algolia clamps, no allocation sized by them.
    r = requests.post(
        url,
        json={"query": "alpha", "hitsPerPage": 10**12, "maxValuesPerFacet": 10**12, "facets": ["*"],
              "attributesToSnippet": ["name:100000000"]},
        headers=HEADERS,
        timeout=30,
    )
    assert r.status_code == 200 and r.json()["hitsPerPage"] == 1000, r.text[:300]
    still_searching(gw)


# ---------------------------------------------------------------- XML bodies (item 2)

ATOM = "application/atom+xml"
ENTRY_HEAD = (
    '<entry xmlns="http://www.w3.org/2005/Atom" '
    'xmlns:m="http://schemas.microsoft.com/ado/2007/08/dataservices/metadata" '
    'xmlns:d="http://schemas.microsoft.com/ado/2007/08/dataservices">'
)
LAUGHS = (
    '<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol">'
    + "".join(
        f'<!ENTITY lol{i} "{("&lol" + (str(i - 1) if i > 1 else "") + ";") * 10}">' for i in range(1, 10)
    )
    + "]><lolz>&lol9;</lolz>"
)
BAD_BODIES = {
    "empty": b"",
    "blank": b"  \r\n ",
    "malformed": b"<entry><content></entry>",
    "not xml": b"hello",
    "billion laughs": LAUGHS.encode(),
    "external entity": b'<?xml version="1.0"?><!DOCTYPE r [<!ENTITY x SYSTEM "file:///etc/passwd">]><r>&x;</r>',
    "deep nesting": b"<a>" * 100_000 + b"</a>" * 100_000,
    "huge attribute": (ENTRY_HEAD + '<category term="' + "x" * 1_000_000 + '"/></entry>').encode(),
    "non-UTF-8": ENTRY_HEAD.encode() + b"<content><m:properties><d:ProductName>caf\xe9</d:ProductName>"
    b"</m:properties></content></entry>",
    "UTF-16": ("\ufeff" + ENTRY_HEAD + "</entry>").encode("utf-16-le"),
    "two roots": b"<a/><b/>",
    # 0x81 is not a windows-1252 character: libxml2's conversion fails (and used to print to stderr).
    "bytes outside its declared encoding": b'<?xml version="1.0" encoding="windows-1252"?>'
    + ENTRY_HEAD.encode() + b"<title>\x81</title></entry>",
}


def odata_400(r: requests.Response, where: str) -> None:
    assert r.status_code == 400, (where, r.status_code, r.text[:300])
    assert "error" in r.json(), (where, r.text[:300])


@pytest.fixture
def offline_odata(gateway_factory, odata_upstream):
    gw = gateway_factory(nw_config(odata_upstream.root))
    wait_downloaded(gw, "nw")
    odata_upstream.stop()
    return gw


def still_serving(gw) -> None:
    assert gw.alive()
    r = requests.get(gw.url(MOUNT + "Products/$count"), timeout=10)
    assert r.status_code == 200 and r.text.isdigit(), r.text[:300]


def test_bad_xml_bodies_are_400_in_odata_format_and_the_gateway_lives(offline_odata):
    gw = offline_odata
    before = status_of(gw)["pendingRequests"]
    s = requests.Session()
    for name, body in BAD_BODIES.items():
        for method, path in (("POST", "Products"), ("PATCH", "Products(2)"), ("PUT", "Products(4)")):
            r = s.request(
                method, gw.url(MOUNT + path), data=body,
                headers={"Content-Type": ATOM, "Accept": "application/json"}, timeout=30,
            )
            odata_400(r, f"{name} {method}")
        still_serving(gw)
    # The reported crash exactly: an empty body with an explicit Content-Length: 0.
    r = s.post(gw.url(MOUNT + "Products"), headers={"Content-Type": ATOM, "Content-Length": "0"}, timeout=10)
    odata_400(r, "Content-Length: 0")
    # A chunked body (a generator makes requests send Transfer-Encoding: chunked).
    for name in ("empty", "malformed", "billion laughs"):
        chunks = iter([BAD_BODIES[name][:7], BAD_BODIES[name][7:]])
        r = s.post(gw.url(MOUNT + "Products"), data=chunks, headers={"Content-Type": ATOM}, timeout=30)
        odata_400(r, f"chunked {name}")
    still_serving(gw)
    # A `$batch` changeset part: the batch answers, the part is a 400, the gateway lives.
    for name in ("empty", "malformed", "billion laughs", "deep nesting"):
        part = (
            b"--cs\r\nContent-Type: application/http\r\nContent-Transfer-Encoding: binary\r\nContent-ID: 1\r\n\r\n"
            b"POST Products HTTP/1.1\r\nContent-Type: application/atom+xml\r\n\r\n" + BAD_BODIES[name] + b"\r\n"
        )
        batch = b"--b\r\nContent-Type: multipart/mixed; boundary=cs\r\n\r\n" + part + b"--cs--\r\n--b--\r\n"
        r = s.post(
            gw.url(MOUNT + "$batch"), data=batch, headers={"Content-Type": "multipart/mixed; boundary=b"}, timeout=30
        )
        assert r.status_code < 500 and "400" in r.text, (name, r.status_code, r.text[:300])
        still_serving(gw)
    # Nothing refused was queued.
    assert status_of(gw)["pendingRequests"] == before
    # libxml2 prints nothing of the hostile bodies (its generic error channel is silenced on every parse).
    log = gw.stderr()
    for noise in ("encoder error", "encoding error", "I/O error", "parser error"):
        assert noise not in log, (noise, log[-2000:])
    # A good Atom entry is still accepted.
    good = ENTRY_HEAD + (
        '<content type="application/xml"><m:properties><d:ProductName>Atom &amp; co</d:ProductName>'
        '<d:UnitPrice>2.5</d:UnitPrice><d:Discontinued>false</d:Discontinued></m:properties></content></entry>'
    )
    r = s.post(
        gw.url(MOUNT + "Products"), data=good.encode(),
        headers={"Content-Type": ATOM, "Accept": "application/json"}, timeout=10,
    )
    assert r.status_code == 201, r.text[:300]
    assert r.json()["ProductName"] == "Atom & co", r.text[:300]
