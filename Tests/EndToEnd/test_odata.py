"""OData forwarding through an OData mount (SPEC §4 URL map, issue 2 Done means).

Upstream: odatapy's in-memory Northwind at http://127.0.0.1:P/nw.svc/ (absolute URLs always built
from its own origin). Gateway mount: /odata/nw/.
"""

from __future__ import annotations

import json
import threading
import time

import pytest
import requests
from harness import request
from upstreams.faults import refused_port

MOUNT = "/odata/nw/"


def odata_config(upstream_root: str, **extra) -> dict:
    svc = {"mount": MOUNT, "upstream": upstream_root, "version": "v4", "timeout": "2s"}
    svc.update(extra)
    return {"odata": {"services": {"nw": svc}}}


@pytest.fixture
def wire(monkeypatch):
    sent: list[tuple[str, str]] = []
    orig = requests.adapters.HTTPAdapter.send

    def send(self, req, *a, **kw):
        sent.append((req.method, req.url))
        return orig(self, req, *a, **kw)

    monkeypatch.setattr(requests.adapters.HTTPAdapter, "send", send)
    return sent


def assert_only_gateway(sent, gw):
    stray = [u for _, u in sent if not u.startswith(gw.origin + MOUNT)]
    assert not stray, f"the client was sent to URLs outside the gateway: {stray}"


def assert_no_upstream_urls(text: str, upstream):
    assert upstream.origin not in text, f"upstream origin leaked: {text[:500]}"


def test_python_odata_metadata_query_create(gateway_factory, odata_upstream_no_etags, wire):
    from odata import ODataService

    up = odata_upstream_no_etags
    gw = gateway_factory(odata_config(up.root))
    svc = ODataService(gw.url(MOUNT), reflect_entities=True, quiet_progress=True)
    Product, Order, Customer = (svc.entities[n] for n in ("Products", "Orders", "Customers"))

    cheap = svc.query(Product).filter(Product.UnitPrice > 15).order_by(Product.UnitPrice.desc()).limit(3)
    names = [p.ProductName for p in cheap]
    assert names == ["Uncle Bob's Organic Dried Pears", "Grandma's Boysenberry Spread", "Chef Anton's Cajun Seasoning"]

    # all 7 products: the upstream pages by 5, so the client must follow a rewritten @odata.nextLink
    everything = list(svc.query(Product))
    assert len(everything) == 7

    alfki = svc.query(Customer).get("ALFKI")
    assert alfki.CompanyName == "Alfreds Futterkiste"

    o = Order()
    o.Freight = 12.5
    svc.save(o)
    assert o.OrderID is not None
    assert any(r.method == "POST" and r.path == "/nw.svc/Orders" for r in up.requests())
    o.Freight = 13.0
    svc.save(o)  # PATCH
    svc.delete(o)

    assert any(r.path == "/nw.svc/$metadata" for r in up.requests("GET"))
    assert_only_gateway(wire, gw)


def test_odatapy_client_crud_with_etags(gateway_factory, odata_upstream):
    from odatapy.client import ODataClient
    from odatapy.client.filters import Field
    from odatapy.client.transport import HttpxTransport

    gw = gateway_factory(odata_config(odata_upstream.root))
    c = ODataClient(gw.url(MOUNT).rstrip("/"), HttpxTransport())
    uri = c.entity_set_uri("Products").filter(Field("UnitPrice").gt(15)).select("ProductID", "ProductName").top(3)
    rows = c.get_entity_set(uri).entities
    assert len(rows) == 3
    o = c.create_entity("Orders", {"CustomerID": "ALFKI", "Freight": 4.5})
    oid = o.get_value("OrderID")
    assert oid is not None
    c.update_entity(c.entity_uri("Orders", oid), {"Freight": 5.5}, etag=o.etag)
    patch = [r for r in odata_upstream.requests("PATCH")][-1]
    assert patch.headers.get("If-Match") == o.etag, "If-Match must reach the upstream unchanged"
    assert patch.headers.get("Odata-Version") == "4.01"


def test_urls_in_responses_are_rewritten(gateway_factory, odata_upstream):
    up = odata_upstream
    gw = gateway_factory(odata_config(up.root))
    base = gw.url(MOUNT)

    st, hdrs, body = request("GET", base + "Products", headers={"Accept": "application/json"})
    assert st == 200, body[:300]
    doc = json.loads(body)
    assert doc["@odata.context"] == base + "$metadata#Products"
    assert doc["@odata.nextLink"].startswith(base + "Products?"), doc["@odata.nextLink"]
    assert_no_upstream_urls(body.decode(), up)
    assert "/nw.svc/Products" in [r.path for r in up.requests()]  # beside the gateway's own probes

    # the rewritten next link works through the gateway
    nxt = doc["@odata.nextLink"][len(gw.origin) :]
    st, _, body2 = request("GET", gw.url(nxt), headers={"Accept": "application/json"})
    assert st == 200
    assert len(json.loads(body2)["value"]) == 2

    st, hdrs, body = request(
        "POST",
        base + "Orders",
        body=json.dumps({"CustomerID": "BONAP", "Freight": 3.25}).encode(),
        headers={"Content-Type": "application/json", "Accept": "application/json"},
    )
    assert st == 201, body[:300]
    assert hdrs["location"].startswith(base + "Orders("), hdrs["location"]
    if "odata-entityid" in hdrs:
        assert hdrs["odata-entityid"].startswith(base)
    created = json.loads(body)
    assert created["@odata.context"].startswith(base + "$metadata#Orders")
    assert up.requests("POST")[-1].path == "/nw.svc/Orders"
    assert json.loads(up.requests("POST")[-1].body) == {"CustomerID": "BONAP", "Freight": 3.25}


def test_metadata_and_service_document(gateway_factory, odata_upstream):
    gw = gateway_factory(odata_config(odata_upstream.root))
    st, hdrs, body = request("GET", gw.url(MOUNT + "$metadata"))
    assert st == 200
    direct = requests.get(odata_upstream.root + "$metadata", timeout=10).content
    assert body == direct, "$metadata must be relayed byte-identical"
    st, _, body = request("GET", gw.url(MOUNT), headers={"Accept": "application/json"})
    assert st == 200
    doc = json.loads(body)
    assert doc["@odata.context"] == gw.url(MOUNT + "$metadata")
    assert {e["name"] for e in doc["value"]} >= {"Customers", "Products", "Orders"}


def test_query_options_forwarded_unchanged(gateway_factory, odata_upstream):
    gw = gateway_factory(odata_config(odata_upstream.root))
    q = "%24filter=contains%28CompanyName%2C%27app%27%29&%24select=CustomerID&$top=2"
    st, _, body = request("GET", gw.url(MOUNT + "Customers?" + q), headers={"Accept": "application/json"})
    assert st == 200, body[:300]
    assert [c["CustomerID"] for c in json.loads(body)["value"]] == ["BONAP"]
    # The client's request arrived with its query as sent (the service's own downloads, which the scheduler
    # may start at any time, are other requests to the same upstream).
    client_reads = [r for r in odata_upstream.requests() if "CompanyName" in r.query]
    assert [r.query for r in client_reads] == [q], [r.query for r in odata_upstream.requests()]
    st, _, body = request("GET", gw.url(MOUNT + "Customers('BONAP')"), headers={"Accept": "application/json"})
    assert st == 200
    assert json.loads(body)["CompanyName"] == "Bon app'"


def test_upstream_error_relayed(gateway_factory, odata_upstream):
    gw = gateway_factory(odata_config(odata_upstream.root))
    st, _, body = request("GET", gw.url(MOUNT + "Customers('NOPE')"), headers={"Accept": "application/json"})
    assert st == 404
    assert "error" in json.loads(body)


def assert_odata_error(st, hdrs, body, want):
    assert st == want, f"expected {want}, got {st}: {body[:300]!r}"
    assert "json" in hdrs.get("content-type", "")
    err = json.loads(body)["error"]
    assert isinstance(err["code"], str) and err["code"]
    assert isinstance(err["message"], (str, dict)) and err["message"]


def test_refused_upstream_gives_502(gateway_factory):
    gw = gateway_factory(odata_config(f"http://127.0.0.1:{refused_port()}/nw.svc/"))
    t0 = time.monotonic()
    st, hdrs, body = request("GET", gw.url(MOUNT + "Products"), headers={"Accept": "application/json"}, timeout=15)
    assert_odata_error(st, hdrs, body, 502)
    assert time.monotonic() - t0 < 1.5


def test_blackholed_upstream_gives_504_within_timeout(gateway_factory, blackhole):
    gw = gateway_factory(odata_config(f"{blackhole.url}/nw.svc/", timeout="1500ms"))
    t0 = time.monotonic()
    st, hdrs, body = request("GET", gw.url(MOUNT + "Products"), headers={"Accept": "application/json"}, timeout=15)
    secs = time.monotonic() - t0
    assert_odata_error(st, hdrs, body, 504)
    assert secs < 1.5 + 1.0, f"took {secs:.2f}s with a 1.5 s timeout"


def test_outside_mount_is_not_forwarded(gateway_factory, odata_upstream):
    gw = gateway_factory(odata_config(odata_upstream.root))
    st, _, _ = request("GET", gw.url("/odata/other/Products"))
    assert st == 404
    assert not [r for r in odata_upstream.requests() if "other" in r.path or "Products" in r.path]


def test_concurrent_requests(gateway_factory, odata_upstream):
    gw = gateway_factory(odata_config(odata_upstream.root))
    results: list[int] = []
    lock = threading.Lock()

    def worker():
        for _ in range(10):
            st, _, _ = request("GET", gw.url(MOUNT + "Customers"), headers={"Accept": "application/json"})
            with lock:
                results.append(st)

    ts = [threading.Thread(target=worker, daemon=True) for _ in range(8)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(timeout=60)
    assert results == [200] * 80


SAP_ROOT = "/sap/opu/odata/IWBEP/GWSAMPLE_BASIC/"


@pytest.fixture
def mock_sap():
    from mocksap import Config, make_server

    httpd = make_server(Config(port=0, db_path=":memory:", csrf=False, quiet=True, log_requests=False))
    t = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    t.start()
    yield httpd
    httpd.shutdown()
    httpd.server_close()
    t.join(timeout=5)


def test_pyodata_v2_against_mock_sap(gateway_factory, mock_sap):
    import pyodata

    port = mock_sap.server_address[1]
    gw = gateway_factory(
        {
            "odata": {
                "services": {
                    "gw": {
                        "mount": "/odata/gw/",
                        "upstream": f"http://127.0.0.1:{port}{SAP_ROOT}",
                        "version": "v2",
                        "timeout": "5s",
                    }
                }
            }
        }
    )
    s = requests.Session()
    client = pyodata.Client(gw.url("/odata/gw/"), s)
    SO = client.entity_sets.SalesOrderSet
    page = SO.get_entities().select("SalesOrderID,Note").order_by("SalesOrderID").top(3).count(inline=True).execute()
    assert len(page) == 3
    assert page.total_count >= 3
    so = SO.create_entity().set(CustomerID="0100000000", CurrencyCode="EUR", Note="via gateway").execute()
    again = SO.get_entity(so.SalesOrderID).execute()
    assert again.Note == "via gateway"
    raw = s.get(gw.url(f"/odata/gw/SalesOrderSet('{so.SalesOrderID}')"), headers={"Accept": "application/json"}, timeout=10)
    assert raw.status_code == 200
    meta = raw.json()["d"]["__metadata"]
    assert meta["uri"].startswith(gw.url("/odata/gw/")), meta
    assert f"127.0.0.1:{port}" not in raw.text


def test_gateway_urls_in_request_bodies_are_mapped_to_the_upstream(gateway_factory, odata_upstream_no_etags):
    up = odata_upstream_no_etags
    gw = gateway_factory(odata_config(up.root))
    body = {"Freight": 7.5, "Customer@odata.bind": gw.url(MOUNT + "Customers('ALFKI')")}
    st, hdrs, data = request(
        "POST",
        gw.url(MOUNT + "Orders"),
        body=json.dumps(body).encode(),
        headers={"Content-Type": "application/json", "Accept": "application/json"},
    )
    assert st == 201, data[:300]
    sent = json.loads(up.requests("POST")[-1].body)
    assert sent["Customer@odata.bind"] == up.root + "Customers('ALFKI')", sent
    assert sent["Freight"] == 7.5


def test_odatapy_multipart_batch(gateway_factory, odata_upstream):
    from odatapy.client import ODataClient
    from odatapy.client.transport import HttpxTransport

    gw = gateway_factory(odata_config(odata_upstream.root))
    c = ODataClient(gw.url(MOUNT).rstrip("/"), HttpxTransport())
    b = c.batch(format="multipart")
    cs = b.add_changeset()
    cs.create("Orders", {"CustomerID": "BONAP", "Freight": 1.0})
    cs.update("$1", {"Freight": 2.0}, etag="*")
    result = c.execute_batch(b)
    assert result is not None
    batch = [r for r in odata_upstream.requests("POST") if r.path.endswith("$batch")]
    assert batch, "the $batch must reach the upstream"
    assert gw.origin.encode() not in batch[-1].body, "gateway URLs inside the batch must be mapped"
    # odatapy writes absolute request lines: they must now name the upstream
    assert f"POST {odata_upstream.root}Orders HTTP/1.1".encode() in batch[-1].body, batch[-1].body[:600]
    # the order exists upstream with the updated freight
    st, _, body = request(
        "GET", gw.url(MOUNT + "Orders?$filter=CustomerID%20eq%20'BONAP'"), headers={"Accept": "application/json"}
    )
    assert st == 200
    assert 2.0 in [float(o["Freight"]) for o in json.loads(body)["value"]]
