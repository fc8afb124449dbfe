"""The rest of SAP's offline store (issue 16 items 1-4, 6; seed 002 `OfflineODataParameters`): request-queue
optimisation, undo local creation, the transaction builder and the per-request `OfflineOData.*` headers,
end to end with real upstreams (odatapy's Northwind V4, mock-sap V2) and `routing: localFirst` (writes are
only ever sent by the upload, after the queue was prepared).

- The seed's Customer 1 / Customer 2 example: six requests, the upstream receives three (one create with the
  final name, the changeset with one create, one update) and ends in the same state.
- The seed's transaction-builder example: six requests, the upstream receives a changeset of three, a
  single create, a changeset of two; no `OfflineOData.*` header reaches it.
- Undo local creation: a created, updated and deleted entity, and one deleted with its cascading order,
  never reach the upstream; a customer created with an existing order linked to it is sent (the seed's
  motherboard/CPU).
- The headers online: a forwarded write and a forwarded `$batch` lose their `OfflineOData.*` headers (and
  nothing else); offline they are recorded and shown in the RequestQueue.
- mock-sap V2 (CSRF, MERGE, `d` bodies): optimisation and undo together.
"""

from __future__ import annotations

import json
import time
from urllib.parse import unquote

import requests
from harness import request
from odata_helpers import ACCEPT, JSON_HEADERS, csrf_session, request_upload, status_of, wait_idle
from test_odata_offline import MOUNT, nw_config, wait_downloaded


def ready(gateway_factory, up, name: str = "gw", **options):
    """A gateway for Northwind `up` with `options`, its first download done and idle; and how many requests
    the upstream had seen by then."""
    gw = gateway_factory(nw_config(up.root, **options), name=name)
    wait_downloaded(gw, "nw")
    wait_idle(gw)
    return gw, len(up.requests())


def writes_since(up, start: int) -> list:
    """The upstream's modifications after the first `start` recorded requests."""
    return [r for r in up.requests()[start:] if r.method != "GET"]


def upload(gw, service: str = "nw") -> dict:
    st, _, body = request_upload(gw, service, timeout=60)
    assert st == 200, body
    return json.loads(body)


def send(gw, method: str, path: str, body=None, headers=None) -> requests.Response:
    h = dict(JSON_HEADERS)
    h.update(headers or {})
    r = requests.request(method, gw.url(MOUNT + path), json=body, headers=h, timeout=10)
    assert r.status_code in (200, 201, 204) and r.headers["X-Mirrorgate-Origin"] == "local", (method, path, r.text)
    return r


def upstream_customer(up, key: str):
    return requests.get(up.root + f"Customers('{key}')", headers=ACCEPT, timeout=10)


def test_request_queue_optimization_sends_the_seeds_three_requests(gateway_factory, odata_upstream):
    up = odata_upstream
    gw, start = ready(gateway_factory, up, routing="localFirst", enableRequestQueueOptimization=True)
    send(gw, "POST", "Customers", {"CustomerID": "CUST1", "CompanyName": "John"})
    batch = {
        "requests": [
            {"id": "1", "atomicityGroup": "g", "method": "POST", "url": "Customers",
             "headers": {"Content-Type": "application/json"}, "body": {"CustomerID": "CUST2", "CompanyName": "Jan"}},
            {"id": "2", "atomicityGroup": "g", "method": "PATCH", "url": "Customers('CUST2')",
             "headers": {"Content-Type": "application/json"}, "body": {"CompanyName": "Jane"}},
        ]
    }
    r = requests.post(gw.url(MOUNT + "$batch"), json=batch, headers={"OData-Version": "4.0"}, timeout=10)
    assert r.status_code == 200 and all(x["status"] < 300 for x in r.json()["responses"]), r.text
    send(gw, "PATCH", "Customers('CUST1')", {"CompanyName": "John Doe"})
    send(gw, "PATCH", "Customers('CUST2')", {"CompanyName": "Jane Do"})
    send(gw, "PATCH", "Customers('CUST2')", {"CompanyName": "Jane Doe"})
    assert status_of(gw)["pendingRequests"] == 6

    result = upload(gw)
    assert result["uploaded"] == 3 and result["failed"] == 0, result
    assert result["requestsBefore"] == 6 and result["requestsAfter"] == 3, result
    writes = writes_since(up, start)
    assert [(w.method, unquote(w.path)) for w in writes] == [
        ("POST", "/nw.svc/Customers"),
        ("POST", "/nw.svc/$batch"),
        ("PATCH", "/nw.svc/Customers('CUST2')"),
    ], writes
    assert json.loads(writes[0].body)["CompanyName"] == "John Doe"
    text = writes[1].body.decode()
    assert '"Jane"' in text and '"Jan"' not in text and "PATCH" not in text, text
    assert json.loads(writes[2].body)["CompanyName"] == "Jane Doe"
    assert upstream_customer(up, "CUST1").json()["CompanyName"] == "John Doe"
    assert upstream_customer(up, "CUST2").json()["CompanyName"] == "Jane Doe"
    # Status and metrics keep the last upload's counts before and after the preparation.
    last = status_of(gw)["lastUpload"]
    assert last["requestsBefore"] == 6 and last["requestsAfter"] == 3 and last["preparation"]["combined"] == 3
    st, _, metrics = request("GET", gw.url("/metrics"))
    assert st == 200
    text = metrics.decode()
    assert 'mirrorgate_odata_last_upload_requests{service="nw",stage="before"} 6' in text, text[-3000:]
    assert 'mirrorgate_odata_last_upload_requests{service="nw",stage="after"} 3' in text


def test_transaction_builder_sends_the_seeds_changesets(gateway_factory, odata_upstream):
    up = odata_upstream
    gw, start = ready(gateway_factory, up, routing="localFirst", enableTransactionBuilder=True)

    def tx(t):
        return {"OfflineOData.TransactionID": t} if t else {}

    send(gw, "POST", "Customers", {"CustomerID": "TXC1", "CompanyName": "Customer 1"}, tx("1"))
    send(gw, "POST", "Orders", {"CustomerID": "TXC1", "Freight": 1.5}, tx("1"))
    send(gw, "POST", "Products", {"ProductName": "Product 1", "UnitPrice": 1, "Discontinued": False}, tx(None))
    send(gw, "POST", "Customers", {"CustomerID": "TXC2", "CompanyName": "Customer 2"}, tx("2"))
    send(gw, "PATCH", "Customers('TXC1')", {"CompanyName": "Customer One"}, tx("1"))
    send(gw, "PATCH", "Customers('TXC2')", {"CompanyName": "Customer Two"}, tx("2"))
    # The RequestQueue shows each request's transaction.
    rq = requests.get(gw.url("/_mirrorgate/odata/nw/RequestQueue?$orderby=ID"), headers=ACCEPT, timeout=10).json()
    assert [e["TransactionID"] for e in rq["value"]] == ["1", "1", None, "2", "1", "2"]

    result = upload(gw)
    assert result["uploaded"] == 6 and result["failed"] == 0, result
    writes = writes_since(up, start)
    assert [(w.method, w.path) for w in writes] == [
        ("POST", "/nw.svc/$batch"),
        ("POST", "/nw.svc/Products"),
        ("POST", "/nw.svc/$batch"),
    ], writes
    first, second = writes[0].body.decode(), writes[2].body.decode()
    assert first.count("POST Customers") == 1 and first.count("POST Orders") == 1, first
    assert "PATCH Customers('TXC1')" in first and "TXC2" not in first, first
    assert second.count("POST Customers") == 1 and "PATCH Customers('TXC2')" in second, second
    for w in writes:
        assert not any(k.lower().startswith("offlineodata") for k in w.headers), w.headers
        assert b"OfflineOData" not in w.body
    assert upstream_customer(up, "TXC1").json()["CompanyName"] == "Customer One"
    assert upstream_customer(up, "TXC2").json()["CompanyName"] == "Customer Two"
    orders = requests.get(up.root + "Orders?$filter=CustomerID eq 'TXC1'", headers=ACCEPT, timeout=10).json()["value"]
    assert len(orders) == 1 and orders[0]["Freight"] == 1.5
    assert status_of(gw)["lastUpload"]["preparation"]["transactions"] == 2


def test_undo_local_creation_sends_nothing_unless_an_upstream_entity_would_change(gateway_factory):
    from upstreams.odata_northwind import ODataUpstream

    up = ODataUpstream(page_size=None, etags=True, cascade=True).start()
    try:
        gw, start = ready(gateway_factory, up, routing="localFirst", enableUndoLocalCreation=True)
        # Seed example 1: create, update, delete.
        created = send(gw, "POST", "Products", {"ProductName": "customer101", "UnitPrice": 1, "Discontinued": False})
        key = created.headers["Location"].rsplit("Products", 1)[1]
        send(gw, "PATCH", "Products" + key, {"ProductName": "customer 101"})
        send(gw, "DELETE", "Products" + key)
        # Seed example 2: the order goes with its customer (OnDelete Cascade).
        send(gw, "POST", "Customers", {"CustomerID": "C101", "CompanyName": "customer101"})
        send(gw, "POST", "Customers('C101')/Orders", {"Freight": 5})
        send(gw, "DELETE", "Customers('C101')")
        assert status_of(gw)["pendingRequests"] == 6
        result = upload(gw)
        assert result["requestsBefore"] == 6 and result["requestsAfter"] == 0, result
        assert result["uploaded"] == 0 and status_of(gw)["pendingRequests"] == 0
        assert writes_since(up, start) == []
        assert upstream_customer(up, "C101").status_code == 404

        # Seed example 3 (motherboard/CPU): the new customer took the existing order 10248; deleting it
        # upstream would delete that order, so both requests are sent.
        send(gw, "POST", "Customers", {"CustomerID": "C102", "CompanyName": "mb", "Orders@odata.bind": ["Orders(10248)"]})
        send(gw, "DELETE", "Customers('C102')")
        result = upload(gw)
        assert result["requestsBefore"] == 2 and result["requestsAfter"] == 2, result
        sent = [(w.method, unquote(w.path)) for w in writes_since(up, start)]
        assert sent[0] == ("POST", "/nw.svc/Customers"), sent
        assert b"Orders(10248)" in writes_since(up, start)[0].body
    finally:
        up.stop()


def test_offline_odata_headers_are_stripped_online_and_recorded_offline(gateway_factory, odata_upstream_no_etags):
    # Without ETags: the forwarded PATCH carries no If-Match (odatapy with ETags answers 428 to it).
    up = odata_upstream_no_etags
    gw, start = ready(gateway_factory, up)
    options = {
        "OfflineOData.TransactionID": "T9", "OfflineOData.NonMergeable": "true",
        "OfflineOData.RemoveAfterUpload": "false", "OfflineOData.CustomTag": "online",
    }
    h = dict(JSON_HEADERS)
    h.update(options)
    r = requests.patch(gw.url(MOUNT + "Products(1)"), json={"ProductName": "Chai online"}, headers=h, timeout=10)
    assert r.status_code == 204 and r.headers["X-Mirrorgate-Origin"] == "remote", r.text
    batch = (
        "--b\r\nContent-Type: multipart/mixed; boundary=c\r\n\r\n--c\r\nContent-Type: application/http\r\n"
        "Content-ID: 1\r\n\r\nPATCH Products(2) HTTP/1.1\r\nContent-Type: application/json\r\n"
        "OfflineOData.CustomTag: part\r\nOfflineOData.NonMergeable: true\r\n\r\n"
        '{"ProductName":"Chang online"}\r\n--c--\r\n--b--\r\n'
    )
    r = requests.post(
        gw.url(MOUNT + "$batch"), data=batch, timeout=10,
        headers={"Content-Type": "multipart/mixed; boundary=b", "OData-Version": "4.0", **options},
    )
    assert r.status_code == 200 and r.headers["X-Mirrorgate-Origin"] == "remote", r.text
    writes = writes_since(up, start)
    assert [w.method for w in writes] == ["PATCH", "POST"], writes
    for w in writes:
        assert not [k for k in w.headers if k.lower().startswith("offlineodata")], w.headers
    assert b"OfflineOData" not in writes[1].body and b'{"ProductName":"Chang online"}' in writes[1].body
    assert b"Content-Type: application/json" in writes[1].body
    products = requests.get(up.root + "Products?$filter=ProductID le 2", headers=ACCEPT, timeout=10).json()["value"]
    assert sorted(p["ProductName"] for p in products) == ["Chai online", "Chang online"]

    # Offline (localFirst): recorded with the queued request and shown in the RequestQueue.
    local, _ = ready(gateway_factory, up, name="local", routing="localFirst")
    h = dict(JSON_HEADERS)
    h.update({**options, "OfflineOData.RemoveAfterUpload": "true", "OfflineOData.CustomTag": "offline"})
    r = requests.patch(local.url(MOUNT + "Products(3)"), json={"ProductName": "Syrup"}, headers=h, timeout=10)
    assert r.status_code == 204 and r.headers["X-Mirrorgate-Origin"] == "local", r.text
    rq = requests.get(local.url("/_mirrorgate/odata/nw/RequestQueue"), headers=ACCEPT, timeout=10).json()["value"]
    assert len(rq) == 1
    entry = rq[0]
    assert (entry["TransactionID"], entry["NonMergeable"], entry["RemoveAfterUpload"], entry["CustomTag"]) == (
        "T9", True, True, "offline"), entry
    bad = requests.patch(
        local.url(MOUNT + "Products(3)"), json={"ProductName": "x"}, timeout=10,
        headers={**JSON_HEADERS, "OfflineOData.NonMergeable": "maybe"},
    )
    assert bad.status_code == 400 and "NonMergeable" in bad.text
    # RemoveAfterUpload: once uploaded, the entity leaves the mirror (until a download brings it back).
    start = len(up.requests())
    result = upload(local)
    assert result["uploaded"] == 1, result
    assert not [k for w in writes_since(up, start) for k in w.headers if k.lower().startswith("offlineodata")]


def test_mock_sap_v2_optimization_and_undo_together(gateway_factory, tmp_path):
    from harness import free_port
    from odata_helpers import SAP_ROOT, sap_orders_config, start_mock_sap

    port = free_port()
    sap = start_mock_sap(port)
    root = f"http://127.0.0.1:{port}{SAP_ROOT}"
    try:
        config = sap_orders_config(root, tmp_path)
        config["odata"]["services"]["gw"].update(
            {"routing": "localFirst", "enableRequestQueueOptimization": True, "enableUndoLocalCreation": True}
        )
        gw = gateway_factory(config)
        wait_downloaded(gw, "gw")
        wait_idle(gw, service="gw")
        existing = requests.get(root + "SalesOrderSet?$top=1", headers=ACCEPT, timeout=10).json()["d"]["results"][0]
        url = gw.url("/odata/gw/")
        s = csrf_session(url)
        h = {"Content-Type": "application/json", "Accept": "application/json"}

        def ok(r):
            assert r.status_code in (201, 204), r.text
            return r

        created = ok(s.post(url + "SalesOrderSet", json={"CustomerID": "0100000000", "CurrencyCode": "EUR", "Note": "a1"},
                            headers=h, timeout=10)).json()["d"]
        local = f"SalesOrderSet('{created['SalesOrderID']}')"
        for note in ("a2", "a3"):
            ok(s.post(url + local, json={"Note": note}, headers={**h, "X-HTTP-Method": "MERGE"}, timeout=10))
        other = ok(s.post(url + "SalesOrderSet", json={"CustomerID": "0100000000", "CurrencyCode": "EUR", "Note": "gone"},
                          headers=h, timeout=10)).json()["d"]
        ok(s.delete(url + f"SalesOrderSet('{other['SalesOrderID']}')", timeout=10))
        target = f"SalesOrderSet('{existing['SalesOrderID']}')"
        for note in ("x", "y"):
            ok(s.post(url + target, json={"Note": note}, headers={**h, "X-HTTP-Method": "MERGE"}, timeout=10))
        assert status_of(gw, "gw")["pendingRequests"] == 7
        result = upload(gw, "gw")
        assert result["requestsBefore"] == 7 and result["requestsAfter"] == 2, result
        assert result["uploaded"] == 2 and result["failed"] == 0, result
        made = requests.get(root + "SalesOrderSet?$filter=Note eq 'a3'", headers=ACCEPT, timeout=10).json()["d"]["results"]
        assert len(made) == 1 and not made[0]["SalesOrderID"].startswith("local-")
        for note in ("a1", "a2", "gone"):
            assert requests.get(root + f"SalesOrderSet?$filter=Note eq '{note}'", headers=ACCEPT,
                                timeout=10).json()["d"]["results"] == []
        assert requests.get(root + target, headers=ACCEPT, timeout=10).json()["d"]["Note"] == "y"
        # The old local URL keeps answering with the uploaded order.
        deadline = time.time() + 10
        while time.time() < deadline and status_of(gw, "gw").get("downloading"):
            time.sleep(0.1)
        assert requests.get(url + local, headers=ACCEPT, timeout=10).json()["d"]["Note"] == "a3"
    finally:
        sap.kill()
        sap.wait(timeout=5)
