"""OData `$batch` changesets offline (SPEC §4, issue 6): with the upstream stopped, a changeset is
applied to the mirror in one transaction and queued (all of its requests under one changeset id) before
it is answered; `Content-ID` references (`$1/Orders`, `@odata.bind: "$a"`) resolve to the local
entities; a changeset with one bad request is rejected whole and nothing is queued. After `kill -9` and
a restart, the upload sends each queued changeset as ONE `$batch` changeset (local keys of entities
created in it become `$N` references again) and the upstream holds exactly the expected state.

Also here: create through a navigation (`POST Customers('X')/Orders`) and deep insert, queued as the
original request and uploaded once.

Upstreams: odatapy's Northwind V4 (multipart and JSON `$batch`, changesets, `$N` references, deep
insert; it keeps links in its own relation table, so the tests read them through navigation, not through
the `CustomerID` property), and mock-sap V2 (multipart changesets, atomic; no `Content-ID` references,
so its changeset test has none).
"""

from __future__ import annotations

import json
import re
import time

import requests
from odata_helpers import (
    ACCEPT,
    JSON_HEADERS,
    csrf_session,
    kill_9,
    request_upload,
    sap_orders_config,
    status_of,
    upload_and_wait,
    upstream_products,
    wait_idle,
)
from test_odata_offline import MOUNT, nw_config, wait_downloaded
from test_odata_writes import _mock_sap_on


def multipart_statuses(text: str) -> list[int]:
    return [int(s) for s in re.findall(r"^HTTP/1\.1 (\d{3})", text, re.M)]


def part(method: str, url: str, cid: str, body: dict | None = None, headers: dict | None = None) -> str:
    lines = [
        "Content-Type: application/http",
        "Content-Transfer-Encoding: binary",
        f"Content-ID: {cid}",
        "",
        f"{method} {url} HTTP/1.1",
        "Accept: application/json",
    ]
    for k, v in (headers or {}).items():
        lines.append(f"{k}: {v}")
    if body is not None:
        lines.append("Content-Type: application/json")
    lines.append("")
    lines.append(json.dumps(body) if body is not None else "")
    return "\r\n".join(lines) + "\r\n"


def multipart_batch(changesets: list[list[str]], reads: list[str] = ()) -> str:
    out = ""
    for i, cs in enumerate(changesets):
        out += f"--batch\r\nContent-Type: multipart/mixed; boundary=cs{i}\r\n\r\n"
        for p in cs:
            out += f"--cs{i}\r\n" + p
        out += f"--cs{i}--\r\n"
    for url in reads:
        out += (
            "--batch\r\nContent-Type: application/http\r\nContent-Transfer-Encoding: binary\r\n\r\n"
            f"GET {url} HTTP/1.1\r\nAccept: application/json\r\n\r\n\r\n"
        )
    return out + "--batch--\r\n"


def post_batch(gw, body: str) -> requests.Response:
    return requests.post(
        gw.url(MOUNT + "$batch"),
        data=body.encode(),
        headers={"Content-Type": "multipart/mixed; boundary=batch", "OData-Version": "4.0"},
        timeout=10,
    )


def upload(gw, name: str = "nw") -> None:
    upload_and_wait(gw, name)


def upstream_orders_of(up, customer: str) -> list[dict]:
    r = requests.get(up.root + f"Customers('{customer}')/Orders", headers=ACCEPT, timeout=10)
    assert r.status_code == 200, r.text
    return r.json()["value"]


def queue_rows(gw) -> int:
    return status_of(gw)["pendingRequests"]


def test_v4_multipart_changeset_offline_survives_kill_and_is_uploaded_as_one_changeset(
    gateway_factory, odata_upstream, tmp_path
):
    from upstreams.odata_northwind import ODataUpstream

    up = odata_upstream
    config = nw_config(up.root)
    config["dataDir"] = str(tmp_path / "data")
    gw = gateway_factory(config)
    wait_downloaded(gw, "nw")
    before = upstream_products(up)
    up.stop()

    changeset = [
        part("POST", "Customers", "1", {"CustomerID": "NEWCO", "CompanyName": "New Co", "Country": "Peru"}),
        part("POST", "$1/Orders", "2", {"Freight": 7.25}),
        part("PATCH", "Products(2)", "3", {"UnitPrice": 20}),
        part("DELETE", "Products(3)", "4"),
        part("POST", "Products", "5", {"ProductName": "Batch Tea", "UnitPrice": 5, "Discontinued": False}),
        part("PATCH", "$5", "6", {"UnitPrice": 9}),
    ]
    r = post_batch(gw, multipart_batch([changeset], reads=["Customers('NEWCO')/Orders"]))
    assert r.status_code == 200, r.text
    assert r.headers["X-Mirrorgate-Origin"] == "local"
    assert r.headers["Content-Type"].startswith("multipart/mixed; boundary=")
    assert multipart_statuses(r.text) == [201, 201, 204, 204, 201, 204, 200], r.text
    for cid in "123456":
        assert f"Content-ID: {cid}\r\n" in r.text
    assert '"Freight":7.25' in r.text  # the read after the changeset sees the order made through $1

    # A changeset whose last request is invalid is rejected whole: nothing applied, nothing queued.
    bad = [
        part("POST", "Customers", "1", {"CustomerID": "NOPE1", "CompanyName": "Never"}),
        part("PATCH", "Products(999)", "2", {"UnitPrice": 1}),
    ]
    r = post_batch(gw, multipart_batch([bad]))
    assert r.status_code == 200, r.text
    assert multipart_statuses(r.text) == [404], r.text
    assert queue_rows(gw) == 6
    assert requests.get(gw.url(MOUNT + "Customers('NOPE1')"), headers=ACCEPT, timeout=10).status_code == 404

    def read_back(g):
        r = requests.get(g.url(MOUNT + "Products?$filter=ProductName eq 'Batch Tea'"), headers=ACCEPT, timeout=10)
        teas = r.json()["value"]
        assert [(p["ProductID"], float(p["UnitPrice"])) for p in teas] == [(-2, 9.0)], teas  # -1: the order
        r = requests.get(g.url(MOUNT + "Customers('NEWCO')?$expand=Orders"), headers=ACCEPT, timeout=10)
        assert r.status_code == 200, r.text
        assert [float(o["Freight"]) for o in r.json()["Orders"]] == [7.25]
        assert requests.get(g.url(MOUNT + "Products/$count"), timeout=10).text == "7"
        assert requests.get(g.url(MOUNT + "Customers/$count"), timeout=10).text == "4"
        assert requests.get(g.url(MOUNT + "Products(3)"), headers=ACCEPT, timeout=10).status_code == 404
        assert float(requests.get(g.url(MOUNT + "Products(2)"), headers=ACCEPT, timeout=10).json()["UnitPrice"]) == 20
        r = requests.get(g.url(MOUNT + "Orders?$filter=CustomerID eq 'NEWCO'&$count=true"), headers=ACCEPT, timeout=10)
        assert r.json()["@odata.count"] == 1

    read_back(gw)
    kill_9(gw)
    gw2 = gateway_factory(config, name="gw2")
    assert queue_rows(gw2) == 6
    read_back(gw2)

    up2 = ODataUpstream(port=up.port, page_size=5, etags=True).start()
    try:
        upload(gw2)
        writes = [r for r in up2.records if r.method in ("POST", "PATCH", "PUT", "DELETE", "MERGE")]
        assert [(r.method, r.path) for r in writes] == [("POST", "/nw.svc/$batch")]  # one changeset, once
        sent = writes[0]
        # Repeatability: SAP's headers on the $batch; OASIS's on each request of the changeset, one ID for all
        # (OASIS: a $batch carrying them must be rejected).
        assert sent.headers.get("Requestid") and sent.headers.get("Repeatabilitycreation")
        assert "Repeatability-Request-Id" not in sent.headers
        text = sent.body.decode()
        ids = re.findall(r"^Repeatability-Request-ID: (\S+)\r$", text, re.M)
        assert len(ids) == 6 and len(set(ids)) == 1 and ids[0] == sent.headers["Requestid"], text
        assert text.count("Repeatability-First-Sent: ") == 6
        # A gateway-minted key of an entity created in the changeset travels as its Content-ID; a key the
        # client chose travels as itself (the upstream applies the changeset's requests in order).
        assert "PATCH $5 HTTP/1.1" in text and "(-2)" not in text
        assert "POST Customers('NEWCO')/Orders HTTP/1.1" in text
        assert text.count("Content-Type: multipart/mixed") == 1

        after = upstream_products(up2)
        teas = [p for p in after.values() if p["ProductName"] == "Batch Tea"]
        assert len(teas) == 1 and teas[0]["ProductID"] > 0 and float(teas[0]["UnitPrice"]) == 9
        assert 3 not in after and float(after[2]["UnitPrice"]) == 20
        assert set(after) == (set(before) - {3}) | {teas[0]["ProductID"]}
        assert [float(o["Freight"]) for o in upstream_orders_of(up2, "NEWCO")] == [7.25]
        r = requests.get(up2.root + "Customers('NEWCO')", headers=ACCEPT, timeout=10)
        assert r.json()["Country"] == "Peru"

        # The server key replaced the local one; the local URL keeps answering.
        deadline = time.time() + 20
        ids: list = []
        while time.time() < deadline:
            r = requests.get(
                gw2.url(MOUNT + "Products?$filter=ProductName eq 'Batch Tea'"), headers=ACCEPT, timeout=10
            )
            ids = [p["ProductID"] for p in r.json()["value"]]
            if ids == [teas[0]["ProductID"]]:
                break
            time.sleep(0.1)
        assert ids == [teas[0]["ProductID"]]
        r = requests.get(gw2.url(MOUNT + "Products(-2)"), headers=ACCEPT, timeout=10)
        assert r.status_code == 200 and r.json()["ProductID"] == teas[0]["ProductID"], r.text
    finally:
        up2.stop()


def test_v4_json_batch_with_atomicity_groups_and_references(gateway_factory, odata_upstream):
    from upstreams.odata_northwind import ODataUpstream

    up = odata_upstream
    gw = gateway_factory(nw_config(up.root))
    wait_downloaded(gw, "nw")
    up.stop()

    batch = {
        "requests": [
            {
                "id": "a",
                "atomicityGroup": "g1",
                "method": "POST",
                "url": "Customers",
                "headers": {"content-type": "application/json"},
                "body": {"CustomerID": "JSONC", "CompanyName": "Json Co"},
            },
            {
                "id": "b",
                "atomicityGroup": "g1",
                "method": "POST",
                "url": "Orders",
                "headers": {"content-type": "application/json"},
                "body": {"Freight": 2.5, "Customer@odata.bind": "$a"},
            },
            {"id": "c", "method": "GET", "url": "Customers('JSONC')/Orders", "dependsOn": ["g1"]},
            {
                "id": "d",
                "atomicityGroup": "g2",
                "method": "POST",
                "url": "Products",
                "headers": {"content-type": "application/json"},
                "body": {"ProductName": "Never", "Discontinued": False},
            },
            {
                "id": "e",
                "atomicityGroup": "g2",
                "method": "DELETE",
                "url": "Products(12345)",
            },
            {"id": "f", "method": "GET", "url": "Products/$count", "dependsOn": ["g2"]},
        ]
    }
    r = requests.post(
        gw.url(MOUNT + "$batch"),
        json=batch,
        headers={"Accept": "application/json", "OData-Version": "4.0"},
        timeout=10,
    )
    assert r.status_code == 200, r.text
    assert r.headers["X-Mirrorgate-Origin"] == "local"
    responses = {x["id"]: x for x in r.json()["responses"]}
    assert [responses[i]["status"] for i in "abcdef"] == [201, 201, 200, 404, 404, 424], r.text
    assert responses["b"]["body"]["CustomerID"] == "JSONC"  # bound through $a
    assert [o["OrderID"] for o in responses["c"]["body"]["value"]] == [responses["b"]["body"]["OrderID"]]
    assert status_of(gw)["pendingRequests"] == 2  # g2 failed whole: nothing of it queued
    r = requests.get(gw.url(MOUNT + "Products?$filter=ProductName eq 'Never'"), headers=ACCEPT, timeout=10)
    assert r.json()["value"] == []

    up2 = ODataUpstream(port=up.port, page_size=5, etags=True).start()
    try:
        upload(gw)
        batches = [r for r in up2.records if r.method == "POST"]
        assert [r.path for r in batches] == ["/nw.svc/$batch"]
        assert '"Customer@odata.bind":"Customers(\'JSONC\')"' in batches[0].body.decode()
        # odatapy keeps a bind on the side it was made (Orders → Customer), not on the partner.
        made = requests.get(up2.root + "Orders?$filter=Freight eq 2.5", headers=ACCEPT, timeout=10).json()["value"]
        assert len(made) == 1 and made[0]["OrderID"] > 0
        r = requests.get(up2.root + f"Orders({made[0]['OrderID']})/Customer", headers=ACCEPT, timeout=10)
        assert r.json()["CustomerID"] == "JSONC" and r.json()["CompanyName"] == "Json Co"
    finally:
        up2.stop()


def test_create_through_navigation_and_deep_insert_offline(gateway_factory, odata_upstream):
    from upstreams.odata_northwind import ODataUpstream

    up = odata_upstream
    gw = gateway_factory(nw_config(up.root))
    wait_downloaded(gw, "nw")
    alfki_before = len(upstream_orders_of(up, "ALFKI"))
    up.stop()

    r = requests.post(gw.url(MOUNT + "Customers('ALFKI')/Orders"), json={"Freight": 5.5}, headers=JSON_HEADERS, timeout=10)
    assert r.status_code == 201, r.text
    assert r.json()["CustomerID"] == "ALFKI" and r.json()["OrderID"] < 0
    r = requests.post(
        gw.url(MOUNT + "Customers"),
        json={"CustomerID": "DEEPC", "CompanyName": "Deep Co", "Orders": [{"Freight": 1}, {"Freight": 2}]},
        headers=JSON_HEADERS,
        timeout=10,
    )
    assert r.status_code == 201, r.text
    r = requests.get(gw.url(MOUNT + "Customers('DEEPC')?$expand=Orders"), headers=ACCEPT, timeout=10)
    assert sorted(float(o["Freight"]) for o in r.json()["Orders"]) == [1, 2]
    assert requests.get(gw.url(MOUNT + "Customers('ALFKI')/Orders/$count"), timeout=10).text == str(alfki_before + 1)
    # A deep insert whose nested entity collides is rejected whole.
    r = requests.post(
        gw.url(MOUNT + "Customers"),
        json={"CustomerID": "DEEPX", "CompanyName": "X", "Orders": [{"OrderID": 10248, "Freight": 1}]},
        headers=JSON_HEADERS,
        timeout=10,
    )
    assert r.status_code == 409, r.text
    assert requests.get(gw.url(MOUNT + "Customers('DEEPX')"), headers=ACCEPT, timeout=10).status_code == 404
    assert status_of(gw)["pendingRequests"] == 2  # each client request queued once

    up2 = ODataUpstream(port=up.port, page_size=5, etags=True).start()
    try:
        upload(gw)
        posts = [(r.method, r.path) for r in up2.records if r.method == "POST"]
        assert posts == [("POST", "/nw.svc/Customers('ALFKI')/Orders"), ("POST", "/nw.svc/Customers")]
        freights = sorted(float(o["Freight"]) for o in upstream_orders_of(up2, "ALFKI"))
        assert len(freights) == alfki_before + 1 and 5.5 in freights
        assert sorted(float(o["Freight"]) for o in upstream_orders_of(up2, "DEEPC")) == [1, 2]
        # After the upload the mirror is downloaded again: no local-key rows are left behind.
        deadline = time.time() + 20
        while time.time() < deadline:
            r = requests.get(gw.url(MOUNT + "Orders?$filter=OrderID lt 0"), headers=ACCEPT, timeout=10)
            if r.status_code == 200 and r.json()["value"] == []:
                break
            time.sleep(0.1)
        assert r.json()["value"] == [], r.text
    finally:
        up2.stop()


def test_pyodata_v2_changeset_offline_uploaded_atomically(gateway_factory, tmp_path):
    import pyodata
    from harness import free_port
    from test_odata_offline import SAP_ROOT

    port = free_port()
    sap = _mock_sap_on(port)
    root = f"http://127.0.0.1:{port}{SAP_ROOT}"
    try:
        gw = gateway_factory(sap_orders_config(root, tmp_path))
        wait_downloaded(gw, "gw")
        ids = [
            o["SalesOrderID"]
            for o in requests.get(root + "SalesOrderSet?$orderby=SalesOrderID", headers=ACCEPT).json()["d"]["results"]
        ]
        sap.kill()
        sap.wait(timeout=5)

        url = gw.url("/odata/gw/")
        client = pyodata.Client(url, csrf_session(url))
        SO = client.entity_sets.SalesOrderSet
        batch = client.create_batch()
        changeset = client.create_changeset()
        changeset.add_request(
            SO.create_entity().set(CustomerID="0100000000", CurrencyCode="EUR", Note="batch v2")
        )
        changeset.add_request(SO.update_entity(ids[0], method="MERGE").set(Note="merged in a changeset"))
        changeset.add_request(SO.delete_entity(ids[1]))
        batch.add_request(changeset)
        results = batch.execute()
        created = results[0][0]
        assert created.SalesOrderID.startswith("local-")
        assert SO.get_entity(created.SalesOrderID).execute().Note == "batch v2"
        assert SO.get_entity(ids[0]).execute().Note == "merged in a changeset"
        assert requests.get(url + f"SalesOrderSet('{ids[1]}')", timeout=10).status_code == 404

        # One request of the changeset fails locally: the whole changeset is refused, nothing queued.
        assert status_of(gw, "gw")["pendingRequests"] == 3
        batch = client.create_batch()
        changeset = client.create_changeset()
        changeset.add_request(SO.update_entity(ids[2], method="MERGE").set(Note="never"))
        changeset.add_request(SO.delete_entity("NOSUCHORDER"))
        batch.add_request(changeset)
        try:
            batch.execute()
            raise AssertionError("the failing changeset was accepted")
        except pyodata.exceptions.HttpError as e:
            assert "single response" in str(e)
        assert SO.get_entity(ids[2]).execute().Note != "never"
        assert status_of(gw, "gw")["pendingRequests"] == 3

        sap = _mock_sap_on(port)  # fresh data, same port
        upload(gw, "gw")
        h = ACCEPT
        made = requests.get(root + "SalesOrderSet?$filter=Note eq 'batch v2'", headers=h).json()["d"]["results"]
        assert len(made) == 1 and not made[0]["SalesOrderID"].startswith("local-")
        assert requests.get(root + f"SalesOrderSet('{ids[0]}')", headers=h).json()["d"]["Note"] == "merged in a changeset"
        assert requests.get(root + f"SalesOrderSet('{ids[1]}')", headers=h).status_code == 404
    finally:
        if sap.poll() is None:
            sap.kill()
        sap.wait(timeout=5)


def test_a_changeset_the_upstream_rejects_goes_to_the_error_archive_whole(gateway_factory, odata_upstream):
    up = odata_upstream
    gw = gateway_factory(nw_config(up.root, routing="localFirst"))
    wait_downloaded(gw, "nw")
    wait_idle(gw)
    changeset = [
        part("POST", "Products", "1", {"ProductName": "Good in bad company", "Discontinued": False}),
        part("PATCH", "Products(4)", "2", {"ProductName": "Renamed in bad company"}),
        # A valid payload (a wrong type is refused at once: issue 19 D2) whose key is taken upstream meanwhile.
        part("POST", "Products", "3", {"ProductID": 9999, "ProductName": "Bad", "Discontinued": False}),
    ]
    r = post_batch(gw, multipart_batch([changeset]))
    assert r.status_code == 200 and multipart_statuses(r.text) == [201, 204, 201], r.text
    assert r.headers["X-Mirrorgate-Origin"] == "local"
    taken = {"ProductID": 9999, "ProductName": "Taken", "Discontinued": False}
    assert requests.post(up.root + "Products", json=taken, headers=JSON_HEADERS, timeout=10).status_code == 201
    good = {"ProductName": "Good alone", "Discontinued": False}
    assert requests.post(gw.url(MOUNT + "Products"), json=good, headers=JSON_HEADERS, timeout=10).status_code == 201
    assert status_of(gw)["pendingRequests"] == 4
    st, _, body = request_upload(gw, timeout=30)
    assert st == 200, body
    result = json.loads(body)
    assert (result["uploaded"], result["failed"], result["remaining"]) == (1, 3, 0), result
    s = status_of(gw)
    assert s["errorArchive"] == 3 and s["pendingRequests"] == 0, s
    names = [p["ProductName"] for p in upstream_products(up).values()]
    assert "Good alone" in names
    assert "Good in bad company" not in names and "Renamed in bad company" not in names and "Bad" not in names
    posts = [r.path for r in up.records if r.method == "POST"]
    assert posts == ["/nw.svc/Products", "/nw.svc/$batch", "/nw.svc/Products"]  # "Taken", then the upload


def test_a_changeset_whose_response_is_lost_is_held_in_doubt(gateway_factory, odata_upstream):
    from test_odata_writes import DroppingProxy

    up = odata_upstream
    proxy = DroppingProxy(up.origin)
    try:
        gw = gateway_factory(nw_config(f"http://127.0.0.1:{proxy.port}/nw.svc/", routing="localFirst"))
        wait_downloaded(gw, "nw")
        changeset = [
            part("POST", "Products", "1", {"ProductName": "Doubtful Batch", "Discontinued": False}),
            part("DELETE", "Products(5)", "2"),
        ]
        proxy.drop_posts = 1
        r = post_batch(gw, multipart_batch([changeset]))
        assert r.status_code == 200 and multipart_statuses(r.text) == [201, 204], r.text
        st, _, out = request_upload(gw, timeout=30)
        assert st in (200, 409), out
        deadline = time.time() + 20
        while time.time() < deadline and not (status_of(gw)["pendingRequests"] == 0 and proxy.dropped == 1):
            time.sleep(0.1)
        assert proxy.dropped == 1
        s = status_of(gw)
        assert s["pendingRequests"] == 0 and s["inDoubt"] == 2 and s["errorArchive"] == 2, s
        after = upstream_products(up)
        assert [p["ProductName"] for p in after.values()].count("Doubtful Batch") == 1  # applied once, not re-sent
        assert 5 not in after
        assert len([r for r in up.records if r.method == "POST"]) == 1
    finally:
        proxy.stop()


def test_reference_writes_offline_are_uploaded(gateway_factory, odata_upstream):
    from upstreams.odata_northwind import ODataUpstream

    up = odata_upstream
    gw = gateway_factory(nw_config(up.root))
    wait_downloaded(gw, "nw")
    up.stop()
    r = requests.put(
        gw.url(MOUNT + "Orders(10248)/Customer/$ref"),
        json={"@odata.id": gw.url(MOUNT + "Customers('BONAP')")},
        headers=JSON_HEADERS,
        timeout=10,
    )
    assert r.status_code == 204, r.text
    assert r.headers["X-Mirrorgate-Origin"] == "local"
    r = requests.get(gw.url(MOUNT + "Orders(10248)"), headers=ACCEPT, timeout=10)
    assert r.json()["CustomerID"] == "BONAP"
    r = requests.get(gw.url(MOUNT + "Customers('BONAP')/Orders?$orderby=OrderID"), headers=ACCEPT, timeout=10)
    assert [o["OrderID"] for o in r.json()["value"]] == [10248, 10250]
    r = requests.put(
        gw.url(MOUNT + "Orders(10248)/Customer/$ref"), json={"@odata.id": "Customers('ZZZZZ')"}, headers=JSON_HEADERS
    )
    assert r.status_code == 404
    assert status_of(gw)["pendingRequests"] == 1

    up2 = ODataUpstream(port=up.port, page_size=5, etags=True).start()
    try:
        upload(gw)
        puts = [r for r in up2.records if r.method == "PUT"]
        assert [r.path for r in puts] == ["/nw.svc/Orders(10248)/Customer/$ref"]
        assert json.loads(puts[0].body)["@odata.id"] == up2.root + "Customers('BONAP')"  # mapped to the upstream
        r = requests.get(up2.root + "Orders(10248)/Customer", headers=ACCEPT, timeout=10)
        assert r.json()["CustomerID"] == "BONAP"
    finally:
        up2.stop()


def test_v2_changeset_with_content_id_reference_is_uploaded_in_two_steps(gateway_factory, tmp_path):
    """mock-sap (like SAP Gateway V2) resolves no `$1`: the gateway sends the create first, learns the
    server key, and sends the dependent request in a second changeset rewritten with that key."""
    from harness import free_port
    from test_odata_offline import SAP_ROOT

    port = free_port()
    sap = _mock_sap_on(port)
    root = f"http://127.0.0.1:{port}{SAP_ROOT}"
    try:
        gw = gateway_factory(
            {
                "dataDir": str(tmp_path / "data"),
                "odata": {
                    "services": {
                        "gw": {
                            "mount": "/odata/gw/",
                            "upstream": root,
                            "timeout": "3s",
                            "definingRequests": [
                                {"name": "orders", "query": "SalesOrderSet"},
                                {"name": "items", "query": "SalesOrderLineItemSet"},
                            ],
                        }
                    }
                },
            }
        )
        wait_downloaded(gw, "gw")
        sap.kill()
        sap.wait(timeout=5)
        url = gw.url("/odata/gw/")
        body = (
            "--batch\r\nContent-Type: multipart/mixed; boundary=cs\r\n\r\n"
            + "--cs\r\n"
            + part("POST", "SalesOrderSet", "1", {"CustomerID": "0100000000", "CurrencyCode": "EUR", "Note": "v2 parent"})
            + "--cs\r\n"
            + part(
                "POST",
                "$1/ToLineItems",
                "2",
                {"ItemPosition": "0000000010", "ProductID": "HT-1000", "Quantity": "2", "QuantityUnit": "EA"},
            )
            + "--cs--\r\n--batch--\r\n"
        )
        r = requests.post(
            url + "$batch", data=body.encode(), headers={"Content-Type": "multipart/mixed; boundary=batch"}, timeout=10
        )
        assert r.status_code == 202, r.text
        assert multipart_statuses(r.text) == [201, 201], r.text
        local_id = re.search(r'"SalesOrderID":"(local-[^"]+)"', r.text).group(1)
        r = requests.get(url + f"SalesOrderSet('{local_id}')/ToLineItems", headers=ACCEPT, timeout=10)
        assert [i["ProductID"] for i in r.json()["d"]["results"]] == ["HT-1000"], r.text

        sap = _mock_sap_on(port)  # fresh data, same port
        upload(gw, "gw")
        made = requests.get(root + "SalesOrderSet?$filter=Note eq 'v2 parent'", headers=ACCEPT).json()["d"]["results"]
        assert len(made) == 1 and not made[0]["SalesOrderID"].startswith("local-")
        server_id = made[0]["SalesOrderID"]
        items = requests.get(root + f"SalesOrderSet('{server_id}')/ToLineItems", headers=ACCEPT).json()["d"]["results"]
        assert [(i["ItemPosition"], i["ProductID"]) for i in items] == [("0000000010", "HT-1000")]
        # After the upload and the download, the mirror holds the server's rows only.
        deadline = time.time() + 20
        while time.time() < deadline:
            r = requests.get(url + f"SalesOrderSet('{server_id}')/ToLineItems", headers=ACCEPT, timeout=10)
            left = requests.get(url + "SalesOrderLineItemSet?$filter=startswith(SalesOrderID,'local-')", headers=ACCEPT)
            if r.status_code == 200 and len(r.json()["d"]["results"]) == 1 and left.json()["d"]["results"] == []:
                break
            time.sleep(0.1)
        assert [i["ProductID"] for i in r.json()["d"]["results"]] == ["HT-1000"], r.text
        assert left.json()["d"]["results"] == [], left.text
    finally:
        if sap.poll() is None:
            sap.kill()
        sap.wait(timeout=5)
