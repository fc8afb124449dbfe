"""The admin API's OpenAPI description is true (issue 18 item 7): schemathesis (pinned in requirements.txt)
runs every check against a gateway with an admin token, a mirrored index, an offline index and an OData
service, with 0 failures; admin writes are guarded, so that a caller without the token cannot replace a
mirror.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from conftest import API_KEY, APP_ID
from harness import REPO, request
from test_mirrored import PRODUCTS, SETTINGS, mirrored_config, wait_for

TOKEN = "openapi-admin-token"
SPEC = REPO / "openapi" / "mirrorgate-admin.yaml"


def schemathesis() -> list[str]:
    exe = Path(sys.executable).with_name("schemathesis")
    assert exe.exists(), f"schemathesis is missing next to {sys.executable}: pip install -r Tests/EndToEnd/requirements.txt"
    return [str(exe)]


def run_schemathesis(spec: Path, base_url: str, tmp_path: Path, *extra: str, timeout: float = 900) -> str:
    env = dict(os.environ, SCHEMATHESIS_HOOKS="", NO_COLOR="1")
    # the names the fuzzer should use for path parameters (else it meets only 404s)
    # A build body of the documented shape may still name files the gateway cannot read: that is a 400
    # (documented), so the positive-data check of that one operation also accepts 400.
    (tmp_path / "schemathesis.toml").write_text(
        '[parameters]\n"path.index" = "products"\n"path.service" = "nw"\n"path.set" = "ErrorArchive"\n\n'
        '[[operations]]\ninclude-path-regex = "/build$"\n'
        'checks.positive_data_acceptance.expected-statuses = ["2xx", "400", "401", "404", "409"]\n'
    )
    cmd = schemathesis() + [
        "run",
        str(spec),
        "--url",
        base_url,
        "--checks",
        "all",
        "--phases",
        "examples,coverage,fuzzing",
        "--max-examples",
        "15",
        "--seed",
        "18",
        "--workers",
        "1",
        "--request-timeout",
        "30",
        "--report",
        "junit",
        "--report-junit-path",
        str(tmp_path / "schemathesis.xml"),
        *extra,
    ]
    done = subprocess.run(cmd, capture_output=True, timeout=timeout, env=env, cwd=tmp_path)
    out = (done.stdout + done.stderr).decode(errors="replace")
    assert done.returncode == 0, f"schemathesis found failures:\n{out[-12000:]}"
    return out


def test_admin_openapi_holds_under_schemathesis(gateway_factory, fake_algolia, odata_upstream, tmp_path):
    fake_algolia.seed("products", PRODUCTS, SETTINGS)
    objects = tmp_path / "notes.json"
    objects.write_text(json.dumps([{"objectID": "n1", "title": "note"}]))
    config = mirrored_config(fake_algolia.url)
    config["algolia"]["offlineIndices"] = {"notes": {"bootstrap": {"objects": [str(objects)]}}}
    config["admin"] = {"token": TOKEN}
    config["odata"] = {
        "services": {
            "nw": {
                "mount": "/odata/nw/",
                "upstream": odata_upstream.root,
                "timeout": "3s",
                "definingRequests": [{"name": "c", "query": "Customers"}],
            }
        }
    }
    gw = gateway_factory(config)
    auth = {"Authorization": f"Bearer {TOKEN}"}
    st, _, body = request("POST", gw.url("/_mirrorgate/algolia/indices/products/sync?wait=true"), headers=auth, timeout=20)
    assert st in (200, 409), body

    def objects_of(name: str) -> int:
        st, _, body = request("GET", gw.url("/_mirrorgate/status"), headers=auth)
        assert st == 200
        return json.loads(body)["algolia"]["indices"][name]["objects"]

    # 409: the scheduler's first run (the mirror never synced) holds the index; it ends soon.
    assert wait_for(lambda: objects_of("products") == len(PRODUCTS), timeout=20)
    before = objects_of("products")
    # without the token a build (or any admin write) is refused before it is read
    for path in ("/_mirrorgate/algolia/indices/products/build", "/_mirrorgate/reload"):
        st, hdrs, _ = request("POST", gw.url(path), body=b'{"objects":[]}', headers={"Content-Type": "application/json"})
        assert st == 401 and hdrs.get("www-authenticate") == "Bearer", (path, st)
    assert objects_of("products") == before
    # a build body that names no objects is refused rather than taken as an empty index
    st, _, body = request("POST", gw.url("/_mirrorgate/algolia/indices/products/build"), body=b"{}", headers=auth)
    assert st == 400 and json.loads(body)["status"] == 400, body
    assert objects_of("products") == before

    out = run_schemathesis(
        SPEC,
        gw.origin,
        tmp_path,
        "-H",
        f"Authorization: Bearer {TOKEN}",
        # the event stream never ends; its head is checked below
        "--exclude-path",
        "/_mirrorgate/events",
    )
    assert "passed" in out.lower(), out[-3000:]
    st, hdrs, _ = request("POST", gw.url("/_mirrorgate/events"), headers=auth)
    assert st == 405 and hdrs["allow"] == "GET"
    # the run left the gateway healthy and the offline index intact
    st, _, body = request(
        "POST",
        gw.url("/1/indexes/notes/query"),
        body=b'{"query":"note"}',
        headers={"X-Algolia-Application-Id": APP_ID, "X-Algolia-API-Key": API_KEY},
    )
    assert st == 200 and json.loads(body)["nbHits"] == 1, body


# ----------------------------------------------------------------------- the Algolia subset answered locally

ALGOLIA_SPEC = REPO / "openapi" / "mirrorgate-algolia.yaml"


def algolia_operation(path: str, method: str):
    import schemathesis as st

    return st.openapi.from_path(str(ALGOLIA_SPEC))[path][method]


def checked(operation, method: str, url: str, body=None, headers=None, origin: str | None = None):
    """Sends a real request and validates the real answer against `operation` (status documented, body
    schema, X-Mirrorgate-Origin when expected, and `origin` in search, multi-query and getObjects
    envelopes)."""
    import requests

    h = {"X-Algolia-Application-Id": APP_ID, "X-Algolia-API-Key": API_KEY, **(headers or {})}
    resp = requests.request(method, url, data=None if body is None else json.dumps(body), headers=h, timeout=20)
    assert str(resp.status_code) in operation.definition.raw["responses"], (url, resp.status_code, resp.text[:300])
    operation.validate_response(resp)
    if origin is not None:
        assert resp.headers.get("X-Mirrorgate-Origin") == origin, (url, dict(resp.headers))
        if resp.headers.get("content-type", "").startswith("application/json") and resp.status_code == 200:
            doc = resp.json()
            envelope = url.endswith(("/query", "/queries", "/objects")) or "/1/indexes/notes?" in url
            if envelope and "facetHits" not in doc:
                assert doc.get("origin") == origin, doc
    assert resp.headers.get("X-Request-Id"), "every answer carries X-Request-Id"
    return resp


def line_response(line: bytes):
    """One NDJSON line as a JSON response, to validate it against the search schema."""
    import requests
    import urllib3

    r = requests.models.Response()
    r.status_code = 200
    r.headers["Content-Type"] = "application/json"
    r.raw = urllib3.HTTPResponse(body=b"", headers={"Content-Type": "application/json"}, status=200)
    r._content = line
    return r


def test_algolia_openapi_matches_real_answers(gateway_factory, fake_algolia, tmp_path):
    fake_algolia.seed("products", PRODUCTS, SETTINGS)
    objects = tmp_path / "notes.json"
    objects.write_text(json.dumps([{"objectID": "n1", "title": "first note"}, {"objectID": "n2", "title": "second"}]))
    settings = tmp_path / "notes.settings.json"
    settings.write_text(json.dumps({"attributesForFaceting": ["title"], "searchableAttributes": ["title"]}))
    config = mirrored_config(fake_algolia.url, preventiveOfflineSearchDelay="50ms")
    config["algolia"]["offlineIndices"] = {
        "notes": {"bootstrap": {"settings": str(settings), "objects": [str(objects)]}}
    }
    gw = gateway_factory(config)
    st, _, body = request("POST", gw.url("/_mirrorgate/algolia/indices/products/sync?wait=true"), timeout=20)
    assert st in (200, 409), body
    query = algolia_operation("/1/indexes/{indexName}/query", "POST")
    checked(query, "POST", gw.url("/1/indexes/notes/query"), {"query": "note"}, origin="local")
    checked(query, "POST", gw.url("/1/indexes/products/query"), {"query": "phone"}, origin="remote")
    checked(
        query, "POST", gw.url("/1/indexes/products/query"), {"query": "apple"},
        headers={"X-Mirrorgate-Strategy": "offlineOnly"}, origin="local",
    )
    forbidden = checked(
        query, "POST", gw.url("/1/indexes/notes/query"), {"query": "x", "filters": "(("}, origin=None
    )
    assert forbidden.status_code == 400
    checked(algolia_operation("/1/indexes/{indexName}", "GET"), "GET", gw.url("/1/indexes/notes?query=note"), origin="local")
    queries = algolia_operation("/1/indexes/*/queries", "POST")
    both = [{"indexName": "notes", "params": "query=note"}, {"indexName": "notes", "params": "query=second"}]
    checked(queries, "POST", gw.url("/1/indexes/*/queries"), {"requests": both}, origin="local")
    checked(
        queries, "POST", gw.url("/1/indexes/*/queries"),
        {"requests": [{"indexName": "products", "params": "query=phone"}]}, origin="remote",
    )
    checked(algolia_operation("/1/indexes/{indexName}/browse", "POST"), "POST", gw.url("/1/indexes/notes/browse"), {}, origin="local")
    checked(algolia_operation("/1/indexes/{indexName}/settings", "GET"), "GET", gw.url("/1/indexes/notes/settings"), origin="local")
    checked(algolia_operation("/1/indexes/{indexName}/{objectID}", "GET"), "GET", gw.url("/1/indexes/notes/n1"), origin="local")
    missing = checked(algolia_operation("/1/indexes/{indexName}/{objectID}", "GET"), "GET", gw.url("/1/indexes/notes/zz"))
    assert missing.status_code == 404
    checked(
        algolia_operation("/1/indexes/*/objects", "POST"), "POST", gw.url("/1/indexes/*/objects"),
        {"requests": [{"indexName": "notes", "objectID": "n2"}]}, origin="local",
    )
    checked(
        algolia_operation("/1/indexes/{indexName}/facets/{facetName}/query", "POST"), "POST",
        gw.url("/1/indexes/notes/facets/title/query"), {"facetQuery": "fir"}, origin="local",
    )
    checked(
        algolia_operation("/1/indexes/{indexName}/synonyms/search", "POST"), "POST",
        gw.url("/1/indexes/notes/synonyms/search"), {}, origin="local",
    )
    denied = checked(query, "POST", gw.url("/1/indexes/products/query"), {"query": "x"},
                     headers={"X-Algolia-API-Key": "never-seen", "X-Mirrorgate-Strategy": "offlineOnly"})
    assert denied.status_code == 403
    # the NDJSON stream: each line one document of the documented shapes
    import requests

    fake_algolia.delay = 0.5
    resp = requests.post(
        gw.url("/1/indexes/products/query"), data=json.dumps({"query": "phone"}),
        headers={"X-Algolia-Application-Id": APP_ID, "X-Algolia-API-Key": API_KEY, "Accept": "application/x-ndjson"},
        timeout=20,
    )
    fake_algolia.delay = 0.0
    assert resp.status_code == 200 and resp.headers["content-type"].startswith("application/x-ndjson"), resp.headers
    assert "application/x-ndjson" in query.definition.raw["responses"]["200"]["content"]
    lines = [ln for ln in resp.content.split(b"\n") if ln]
    assert [json.loads(ln)["origin"] for ln in lines] == ["local", "remote"], resp.content[:500]
    for ln in lines:
        query.validate_response(line_response(ln))
    # nothing answers and nothing local can: the unavailable status, documented
    fake_algolia.stop()
    down = checked(query, "POST", gw.url("/1/indexes/elsewhere/query"), {"query": "x"})
    assert down.status_code == 424 and down.json()["status"] == 424


# ------------------------------------------------------------------------ OData mounts: GET {mount}/$openapi


def test_odata_mount_describes_itself_from_its_metadata(gateway_factory, odata_upstream):
    import requests
    import schemathesis as st
    from test_odata_offline import nw_config, wait_downloaded
    from upstreams.faults import refused_port

    gw = gateway_factory(nw_config(odata_upstream.root))
    wait_downloaded(gw, "nw")
    resp = requests.get(gw.url("/odata/nw/$openapi"), timeout=20)
    assert resp.status_code == 200 and resp.headers["content-type"].startswith("application/json"), resp.text[:300]
    doc = resp.json()
    assert doc["openapi"].startswith("3.0")
    assert doc["servers"][0]["url"] == gw.url("/odata/nw/")
    assert {"/Customers", "/Customers('{CustomerID}')", "/$batch"} <= set(doc["paths"]), sorted(doc["paths"])[:20]
    assert "NorthwindModel.Customer" in doc["components"]["schemas"] or any(
        k.endswith(".Customer") for k in doc["components"]["schemas"]
    )
    # a real answer of the mount conforms to the generated description, online and from the mirror
    schema = st.openapi.from_dict(doc)
    operation = schema["/Customers"]["GET"]
    online = requests.get(gw.url("/odata/nw/Customers?$top=3"), headers={"Accept": "application/json"}, timeout=20)
    assert online.status_code == 200
    operation.validate_response(online)
    one = requests.get(gw.url("/odata/nw/Customers('ALFKI')"), headers={"Accept": "application/json"}, timeout=20)
    schema["/Customers('{CustomerID}')"]["GET"].validate_response(one)
    odata_upstream.stop()
    offline = requests.get(gw.url("/odata/nw/Customers?$top=3"), headers={"Accept": "application/json"}, timeout=20)
    assert offline.status_code == 200 and offline.headers.get("X-Mirrorgate-Origin") == "local"
    operation.validate_response(offline)
    # the description still answers offline (it comes from the cached $metadata); only GET
    assert requests.get(gw.url("/odata/nw/$openapi"), timeout=20).json() == doc
    post = requests.post(gw.url("/odata/nw/$openapi"), timeout=20)
    assert post.status_code == 405 and post.headers["Allow"] == "GET, HEAD"

    # never downloaded, nothing cached: 503 with an OData error
    nowhere = gateway_factory(nw_config(f"http://127.0.0.1:{refused_port()}/nw.svc/"), name="nowhere")
    r = requests.get(nowhere.url("/odata/nw/$openapi"), timeout=20)
    assert r.status_code == 503 and "error" in r.json(), r.text
