"""OData read path offline (SPEC §4, issue 5): unmodified clients read through the gateway while the
upstream answers, then the upstream is stopped and the same read scenario, answered from the SQLite
mirror filled by the defining requests, gives the same entities, counts and order (paging followed).

Upstreams: odatapy's Northwind V4 (pages by 5, ETags) and mock-sap GWSAMPLE_BASIC (V2).
"""

from __future__ import annotations

import json
import time

import pytest
import requests
from harness import free_port, request
from odata_helpers import SAP_ROOT, start_mock_sap, status_of

MOUNT = "/odata/nw/"


def nw_config(root: str, **extra) -> dict:
    svc = {
        "mount": MOUNT,
        "upstream": root,
        "timeout": "2s",
        "definingRequests": [
            {"name": "customers", "query": "Customers"},
            {"name": "products", "query": "Products"},
            {"name": "orders", "query": "Orders"},
        ],
    }
    svc.update(extra)
    return {"odata": {"services": {"nw": svc}}}


def wait_downloaded(gw, service: str, timeout: float = 20) -> dict:
    deadline = time.time() + timeout
    last = None
    while time.time() < deadline:
        last = status_of(gw, service)
        if last.get("lastDownloadAt") and not last.get("downloading"):
            return last
        time.sleep(0.1)
    raise AssertionError(f"no download finished: {last}")


def get(gw, path, headers=None):
    h = {"Accept": "application/json"}
    h.update(headers or {})
    r = requests.get(gw.url(path), headers=h, timeout=10)
    return r


# ---------------------------------------------------------------- python-odata (V4)


def python_odata_scenario(gw):
    from odata import ODataService

    svc = ODataService(gw.url(MOUNT), reflect_entities=True, quiet_progress=True)
    Product, Customer = svc.entities["Products"], svc.entities["Customers"]
    out = {}
    cheap = svc.query(Product).filter(Product.UnitPrice > 15).order_by(Product.UnitPrice.desc()).limit(3)
    out["cheap"] = [(p.ProductID, p.ProductName, str(p.UnitPrice)) for p in cheap]
    out["all"] = [(p.ProductID, p.ProductName, str(p.UnitPrice), p.Discontinued) for p in svc.query(Product)]
    out["sorted"] = [p.ProductName for p in svc.query(Product).order_by(Product.ProductName.asc())]
    alfki = svc.query(Customer).get("ALFKI")
    out["alfki"] = (alfki.CompanyName, alfki.City)
    out["alfki_orders"] = sorted(o.OrderID for o in alfki.Orders)
    out["bonap"] = svc.query(Customer).filter(Customer.CompanyName == "Bon app'").first().CustomerID
    return out


def test_python_odata_same_answers_online_and_offline(gateway_factory, odata_upstream_no_etags):
    up = odata_upstream_no_etags
    gw = gateway_factory(nw_config(up.root))
    status = wait_downloaded(gw, "nw")
    assert status["entitySets"] == {"Customers": 3, "Orders": 3, "Products": 7}
    online = python_odata_scenario(gw)
    assert len(online["all"]) == 7  # the upstream pages by 5: nextLink followed
    assert get(gw, MOUNT + "Products").headers["X-Mirrorgate-Origin"] == "remote"

    up.stop()
    offline = python_odata_scenario(gw)
    assert offline == online
    r = get(gw, MOUNT + "Products")
    assert r.headers["X-Mirrorgate-Origin"] == "local"
    assert r.status_code == 200


# ---------------------------------------------------------------- odatapy client (V4)


def odatapy_scenario(gw):
    from odatapy.client import ODataClient
    from odatapy.client.filters import Field
    from odatapy.client.transport import HttpxTransport

    c = ODataClient(gw.url(MOUNT).rstrip("/"), HttpxTransport())
    out = {}
    uri = c.entity_set_uri("Products").filter(Field("UnitPrice").gt(15)).select("ProductID", "ProductName").top(3)
    out["top3"] = [(e.get_value("ProductID"), e.get_value("ProductName")) for e in c.get_entity_set(uri).entities]
    everything = list(c.iter_entities(c.entity_set_uri("Products").orderby("ProductID desc")))
    out["all_desc"] = [(e.get_value("ProductID"), str(e.get_value("UnitPrice"))) for e in everything]
    counted = c.get_entity_set(c.entity_set_uri("Orders").count(True).filter(Field("CustomerID").eq("ALFKI")))
    out["orders_alfki"] = (counted.count, [e.get_value("OrderID") for e in counted.entities])
    one = c.get_entity(c.entity_uri("Customers", "BONAP"))
    out["bonap"] = one.get_value("CompanyName")
    out["etag"] = one.etag
    out["order_freight"] = [
        str(e.get_value("Freight")) for e in c.iter_entities(c.entity_set_uri("Orders").orderby("Freight"))
    ]
    return out


def test_odatapy_client_same_answers_online_and_offline(gateway_factory, odata_upstream):
    up = odata_upstream
    gw = gateway_factory(nw_config(up.root))
    wait_downloaded(gw, "nw")
    online = odatapy_scenario(gw)
    assert len(online["all_desc"]) == 7
    assert online.pop("etag")  # ETag present online
    up.stop()
    offline = odatapy_scenario(gw)
    # odatapy puts no ETags in collection payloads, so the mirror (filled by collection reads) has none.
    offline.pop("etag")
    assert offline == online


# ---------------------------------------------------------------- raw protocol checks offline


def test_local_protocol_details(gateway_factory, odata_upstream):
    up = odata_upstream
    gw = gateway_factory(nw_config(up.root, pageSize=2, routing="localFirst"))
    wait_downloaded(gw, "nw")
    # localFirst: local even while the upstream answers
    r = get(gw, MOUNT + "Products?$count=true&$orderby=ProductID")
    assert r.headers["X-Mirrorgate-Origin"] == "local"
    body = r.json()
    assert body["@odata.count"] == 7
    assert [p["ProductID"] for p in body["value"]] == [1, 2]
    assert body["@odata.context"] == gw.url(MOUNT) + "$metadata#Products"
    # follow our own paging to the end
    ids = [p["ProductID"] for p in body["value"]]
    nxt = body.get("@odata.nextLink")
    while nxt:
        assert nxt.startswith(gw.url(MOUNT))
        page = requests.get(nxt, timeout=10).json()
        ids += [p["ProductID"] for p in page["value"]]
        nxt = page.get("@odata.nextLink")
    assert ids == [1, 2, 3, 4, 5, 6, 7]
    # Prefer: odata.maxpagesize
    r = get(gw, MOUNT + "Products?$top=5", {"Prefer": "odata.maxpagesize=1"})
    assert len(r.json()["value"]) == 1 and "@odata.nextLink" in r.json()
    # decimals exact, key, property, $value, $count
    r = get(gw, MOUNT + "Products(5)")
    assert r.status_code == 200 and r.json()["ProductName"] == "Chef Anton's Gumbo Mix"
    assert '"UnitPrice":21.35' in r.text.replace(" ", "")
    assert get(gw, MOUNT + "Products(5)/ProductName").json()["value"] == "Chef Anton's Gumbo Mix"
    assert get(gw, MOUNT + "Products(5)/ProductName/$value").text == "Chef Anton's Gumbo Mix"
    assert get(gw, MOUNT + "Products/$count").text == "7"
    assert get(gw, MOUNT + "Customers('ALFKI')/Orders/$count").text == "2"
    assert get(gw, MOUNT + "Customers(%27BONAP%27)").json()["CompanyName"] == "Bon app'"
    # IEEE754Compatible
    r = get(gw, MOUNT + "Products(5)", {"Accept": "application/json;IEEE754Compatible=true"})
    assert r.json()["UnitPrice"] == "21.35"
    # $expand and $select
    r = get(gw, MOUNT + "Customers('ALFKI')?$expand=Orders($select=OrderID;$orderby=OrderID desc)&$select=CompanyName")
    b = r.json()
    assert [o["OrderID"] for o in b["Orders"]] == [10249, 10248]
    assert "City" not in b and b["CompanyName"] == "Alfreds Futterkiste"
    # $filter functions, percent-encoded options, + for spaces
    r = get(gw, MOUNT + "Products?%24filter=startswith(ProductName,%27Chef%27)+and+UnitPrice+lt+22&%24select=ProductID")
    assert [p["ProductID"] for p in r.json()["value"]] == [5]
    # not found, bad filter
    r = get(gw, MOUNT + "Products(999)")
    assert r.status_code == 404 and "error" in r.json()
    r = get(gw, MOUNT + "Products?$filter=UnitPrice gt")
    assert r.status_code == 400
    assert r.json()["error"]["code"] and r.json()["error"]["message"]
    # $metadata byte-identical to the upstream's
    up_meta = requests.get(up.root + "$metadata", timeout=10).content
    assert requests.get(gw.url(MOUNT + "$metadata"), timeout=10).content == up_meta


def test_offline_errors(gateway_factory, odata_upstream):
    up = odata_upstream
    gw = gateway_factory(nw_config(up.root))
    wait_downloaded(gw, "nw")
    first = get(gw, MOUNT + "Products").json()
    upstream_next = first["@odata.nextLink"]
    assert upstream_next.startswith(gw.url(MOUNT))
    up_meta = requests.get(up.root + "$metadata", timeout=10).content
    up.stop()
    # the upstream's own $skiptoken while it is down: 400 telling the client to restart
    r = requests.get(upstream_next, headers={"Accept": "application/json"}, timeout=10)
    assert r.status_code == 400, r.text
    assert "restart" in r.json()["error"]["message"]
    r = get(gw, MOUNT + "Products?$filter=ProductName eq")
    assert r.status_code == 400 and r.headers["X-Mirrorgate-Origin"] == "local"
    assert "error" in r.json()
    r = get(gw, MOUNT + "Nope")
    assert r.status_code in (400, 404) and "error" in r.json()
    assert requests.get(gw.url(MOUNT + "$metadata"), timeout=10).content == up_meta
    sd = get(gw, MOUNT).json()
    assert {e["name"] for e in sd["value"]} == {"Customers", "Products", "Orders"}
    # read-only $batch answered locally (multipart and JSON)
    body = (
        "--b1\r\nContent-Type: application/http\r\nContent-Transfer-Encoding: binary\r\n\r\n"
        "GET Products(1) HTTP/1.1\r\nAccept: application/json\r\n\r\n\r\n"
        "--b1\r\nContent-Type: application/http\r\nContent-Transfer-Encoding: binary\r\n\r\n"
        f"GET {MOUNT}Customers/$count HTTP/1.1\r\n\r\n\r\n--b1--\r\n"
    )
    r = requests.post(
        gw.url(MOUNT + "$batch"), data=body, headers={"Content-Type": "multipart/mixed; boundary=b1"}, timeout=10
    )
    assert r.status_code == 200 and r.headers["X-Mirrorgate-Origin"] == "local"
    assert r.text.count("HTTP/1.1 200 OK") == 2 and '"ProductName":"Chai"' in r.text
    r = requests.post(
        gw.url(MOUNT + "$batch"),
        json={"requests": [{"id": "a", "method": "GET", "url": "Orders?$top=1&$orderby=OrderID"}]},
        timeout=10,
    )
    assert r.status_code == 200
    assert r.json()["responses"][0]["body"]["value"][0]["OrderID"] == 10248
    r = requests.post(
        gw.url(MOUNT + "$batch"),
        json={"requests": [{"id": "a", "method": "POST", "url": "Orders", "body": {}}]},
        timeout=10,
    )
    # a batch with changes is applied to the mirror and queued (test_odata_batch_writes.py)
    assert r.status_code == 200 and r.json()["responses"][0]["status"] == 201, r.text


def test_scope_and_admin_download(gateway_factory, odata_upstream):
    up = odata_upstream
    gw = gateway_factory(
        nw_config(
            up.root,
            definingRequests=[{"name": "german", "query": "Customers?$filter=Country eq 'Germany'"}],
        )
    )
    wait_downloaded(gw, "nw")
    st, _, body = request(
        "POST", gw.url("/_mirrorgate/odata/services/nw/download?wait=true"), headers=gw.admin_headers()
    )
    assert st == 200, body
    stats = json.loads(body)
    assert stats["entitySets"] == {"Customers": 1} and "durationMs" in stats
    st, _, _ = request("POST", gw.url("/_mirrorgate/odata/services/zz/download"), headers=gw.admin_headers())
    assert st == 404
    up.stop()
    # outside the defining requests' scope: no entities
    assert get(gw, MOUNT + "Customers?$filter=City eq 'Marseille'").json()["value"] == []
    assert get(gw, MOUNT + "Products").json()["value"] == []
    assert [c["CustomerID"] for c in get(gw, MOUNT + "Customers").json()["value"]] == ["ALFKI"]


# ---------------------------------------------------------------- pyodata against mock-sap (V2)


def _start_mock_sap(csrf: bool):
    port = free_port()
    return {"port": port, "proc": start_mock_sap(port, csrf=csrf)}


@pytest.fixture
def mock_sap():
    """mock-sap in its own process (stopping it closes kept-alive connections too)."""
    state = _start_mock_sap(csrf=False)
    yield state
    if state["proc"].poll() is None:
        state["proc"].kill()
    state["proc"].wait(timeout=5)


@pytest.fixture
def mock_sap_csrf():
    state = _start_mock_sap(csrf=True)
    yield state
    if state["proc"].poll() is None:
        state["proc"].kill()
    state["proc"].wait(timeout=5)


def pyodata_scenario(gw):
    import pyodata

    s = requests.Session()
    client = pyodata.Client(gw.url("/odata/gw/"), s)
    SO = client.entity_sets.SalesOrderSet
    out = {}
    page = SO.get_entities().select("SalesOrderID,Note").order_by("SalesOrderID").top(3).count(inline=True).execute()
    out["page"] = ([(e.SalesOrderID, e.Note) for e in page], page.total_count)
    eur = SO.get_entities().filter("CurrencyCode eq 'EUR'").order_by("GrossAmount desc").execute()
    out["eur"] = [(e.SalesOrderID, str(e.GrossAmount)) for e in eur]
    out["count"] = SO.get_entities().count().execute()
    everything = SO.get_entities().order_by("SalesOrderID").execute()
    out["all"] = [(e.SalesOrderID, e.CustomerID, str(e.GrossAmount), str(e.CreatedAt)) for e in everything]
    first = everything[0].SalesOrderID
    one = SO.get_entity(first).execute()
    out["one"] = (one.SalesOrderID, one.CurrencyCode, str(one.NetAmount))
    items = SO.get_entity(first).nav("ToLineItems").get_entities().execute()
    out["items"] = sorted((i.SalesOrderID, i.ItemPosition, str(i.Quantity)) for i in items)
    return out


def test_pyodata_v2_same_answers_online_and_offline(gateway_factory, mock_sap):
    port = mock_sap["port"]
    gw = gateway_factory(
        {
            "odata": {
                "services": {
                    "gw": {
                        "mount": "/odata/gw/",
                        "upstream": f"http://127.0.0.1:{port}{SAP_ROOT}",
                        "timeout": "3s",
                        "definingRequests": [
                            {"name": "orders", "query": "SalesOrderSet"},
                            {"name": "items", "query": "SalesOrderLineItemSet"},
                        ],
                    }
                }
            }
        }
    )
    status = wait_downloaded(gw, "gw")
    assert status["version"] == "v2"
    online = pyodata_scenario(gw)
    assert online["count"] == len(online["all"]) > 3
    mock_sap["proc"].kill()
    mock_sap["proc"].wait(timeout=5)
    offline = pyodata_scenario(gw)
    assert offline == online
    r = get(gw, "/odata/gw/SalesOrderSet?$top=1&$inlinecount=allpages")
    assert r.headers["X-Mirrorgate-Origin"] == "local"
    d = r.json()["d"]
    assert isinstance(d["__count"], str)
    meta = d["results"][0]["__metadata"]
    assert meta["uri"].startswith(gw.url("/odata/gw/SalesOrderSet("))
    assert d["results"][0]["ToLineItems"]["__deferred"]["uri"].endswith("/ToLineItems")
    assert d["results"][0]["CreatedAt"].startswith("/Date(")
    r = get(gw, "/odata/gw/SalesOrderSet?$filter=substringof('x',Note) eq")
    assert r.status_code == 400 and r.json()["error"]["message"]["value"]


def test_csrf_handled_by_the_gateway(gateway_factory, mock_sap_csrf):
    """The gateway answers X-CSRF-Token: Fetch itself (online and offline) and does the upstream handshake."""
    import pyodata

    port = mock_sap_csrf["port"]
    gw = gateway_factory(
        {
            "odata": {
                "services": {
                    "gw": {
                        "mount": "/odata/gw/",
                        "upstream": f"http://127.0.0.1:{port}{SAP_ROOT}",
                        "timeout": "3s",
                        "definingRequests": [{"name": "orders", "query": "SalesOrderSet"}],
                    }
                }
            }
        }
    )
    wait_downloaded(gw, "gw")
    url = gw.url("/odata/gw/")
    s = requests.Session()
    fetched = s.get(url, headers={"X-CSRF-Token": "Fetch", "Accept": "application/json"}, timeout=10)
    token = fetched.headers["X-CSRF-Token"]
    assert token and token.lower() != "required"
    s.headers["X-CSRF-Token"] = token
    client = pyodata.Client(url, s)
    SO = client.entity_sets.SalesOrderSet
    so = SO.create_entity().set(CustomerID="0100000000", CurrencyCode="EUR", Note="csrf via gateway").execute()
    assert SO.get_entity(so.SalesOrderID).execute().Note == "csrf via gateway"
    # a token the gateway did not issue is refused before reaching the upstream
    bad = requests.post(
        url + "SalesOrderSet",
        json={"CustomerID": "0100000000", "CurrencyCode": "EUR"},
        headers={"X-CSRF-Token": "forged", "Accept": "application/json"},
        timeout=10,
    )
    assert bad.status_code == 403 and bad.headers["X-CSRF-Token"] == "Required"
    mock_sap_csrf["proc"].kill()
    mock_sap_csrf["proc"].wait(timeout=5)
    # offline: the same token keeps being handed out, reads come from the mirror
    again = requests.get(url, headers={"X-CSRF-Token": "Fetch", "Accept": "application/json"}, timeout=10)
    assert again.headers["X-CSRF-Token"] == token and again.headers["X-Mirrorgate-Origin"] == "local"
    assert "SalesOrderSet" in again.json()["d"]["EntitySets"]


def test_bootstrap_then_download_when_the_upstream_comes_back(gateway_factory, tmp_path):
    from upstreams.odata_northwind import ODataUpstream

    probe = ODataUpstream(page_size=5).start()
    try:
        metadata = requests.get(probe.root + "$metadata", timeout=10).content
    finally:
        probe.stop()
    (tmp_path / "metadata.xml").write_bytes(metadata)
    (tmp_path / "products.json").write_text(
        '{"value":[{"ProductID":99,"ProductName":"Bootstrapped","UnitPrice":1.5,"Discontinued":false}]}'
    )
    port = free_port()
    gw = gateway_factory(
        nw_config(
            f"http://127.0.0.1:{port}/nw.svc/",
            bootstrap={"metadata": str(tmp_path / "metadata.xml"), "data": {"Products": str(tmp_path / "products.json")}},
        )
    )
    wait_downloaded(gw, "nw")
    r = get(gw, MOUNT + "Products")
    assert r.headers["X-Mirrorgate-Origin"] == "local"
    assert [p["ProductName"] for p in r.json()["value"]] == ["Bootstrapped"]
    assert r.json()["value"][0]["UnitPrice"] == 1.5
    first = wait_downloaded(gw, "nw")["lastDownloadAt"]
    up = ODataUpstream(port=port, page_size=5).start()
    try:
        deadline = time.time() + 40
        while time.time() < deadline:
            st = wait_downloaded(gw, "nw")
            if st["lastDownloadAt"] != first and st["entitySets"].get("Products") == 7:
                break
            time.sleep(0.2)
        assert st["entitySets"]["Products"] == 7, st  # the bootstrap rows are gone
    finally:
        up.stop()
    # Offline answers page as the upstream did (5 per page): follow the gateway's next links.
    page = get(gw, MOUNT + "Products").json()
    ids = [p["ProductID"] for p in page["value"]]
    for _ in range(10):
        if "@odata.nextLink" not in page:
            break
        page = requests.get(page["@odata.nextLink"], timeout=10).json()
        ids += [p["ProductID"] for p in page["value"]]
    assert ids == [1, 2, 3, 4, 5, 6, 7]


def test_download_when_the_upstream_comes_back(gateway_factory):
    from upstreams.odata_northwind import ODataUpstream

    port = free_port()
    gw = gateway_factory(nw_config(f"http://127.0.0.1:{port}/nw.svc/"))
    time.sleep(0.5)
    # nothing mirrored yet: reads are forwarded and fail as before
    assert get(gw, MOUNT + "Products").status_code == 502
    up = ODataUpstream(port=port, page_size=5).start()
    try:
        status = wait_downloaded(gw, "nw", timeout=40)
        assert status["entitySets"]["Products"] == 7
    finally:
        up.stop()
    r = get(gw, MOUNT + "Products?$count=true")
    assert r.headers["X-Mirrorgate-Origin"] == "local" and r.json()["@odata.count"] == 7
