"""Issue 15, writes of every kind offline against the richer V4 model (`upstreams/odata_shop.py`): with the
upstream stopped, POST/PATCH/PUT/DELETE on an entity set, PATCH of a singleton, POST into a containment
navigation, a deep insert with contained lines, a write to a set no defining request names, and a `$batch`
changeset are answered from the mirror and read back (read-your-writes); when the upstream is back the
queue is uploaded and each entity is read from the UPSTREAM itself (once, no duplicates). Also: uploads
send the ETag kept from the download as `If-Match`, and a concurrent upstream change makes the upload fail
with 412 into the ErrorArchive instead of overwriting it.
"""

from __future__ import annotations

import time

import requests
from odatapy.data import ValueType
from odata_helpers import JSON_HEADERS, request_upload, status_of, upload_and_wait
from test_odata_batch_writes import multipart_batch, multipart_statuses, part
from test_odata_fidelity import SHOP, shop_config
from test_odata_offline import wait_downloaded
from upstreams.odata_shop import ShopUpstream

ACCEPT = {"Accept": "application/json"}


def local(gw, path: str) -> requests.Response:
    r = requests.get(gw.url(SHOP + path), headers=ACCEPT, timeout=10)
    assert r.headers.get("X-Mirrorgate-Origin") == "local", (path, r.status_code, r.text)
    return r


def remote(up, path: str) -> requests.Response:
    return requests.get(up.root + path, headers=ACCEPT, timeout=10)


def write(gw, method: str, path: str, body: dict | None = None, headers: dict | None = None) -> requests.Response:
    r = requests.request(method, gw.url(SHOP + path), json=body, headers={**JSON_HEADERS, **(headers or {})}, timeout=10)
    assert r.headers.get("X-Mirrorgate-Origin") == "local", (method, path, r.status_code, r.text)
    return r


def upload(gw) -> None:
    """Asks for an upload and waits for it (a 409: the reachability tracker started one; then bounded
    polling until nothing is pending or uploading)."""
    st, _, body = request_upload(gw, "shop", timeout=30)
    assert st in (200, 409), body
    deadline = time.time() + 20
    while time.time() < deadline:
        s = status_of(gw, "shop")
        if s["pendingRequests"] == 0 and not s["uploading"]:
            return
        time.sleep(0.1)


def plain(doc: dict) -> dict:
    return {k: v for k, v in doc.items() if "@" not in k}


def writes_config(root: str, tmp_path) -> dict:
    """The Shop service with its orders' contained lines downloaded; `Suppliers` named by no defining
    request."""
    config = shop_config(root, {"products": "Products", "orders": "Orders?$expand=Lines", "company": "Company"})
    config["dataDir"] = str(tmp_path / "data")
    return config


def offline_gateway(gateway_factory, tmp_path):
    up = ShopUpstream(port=0).start()
    config = writes_config(up.root, tmp_path)
    gw = gateway_factory(config)
    wait_downloaded(gw, "shop")
    up.stop()
    return up, gw


PUT_BODY = {
    "ID": 3,
    "Name": "Put 3",
    "Description": "replaced offline",
    "Price": 3.25,
    "Tags": ["put"],
    "Status": "Closed",
    "Discontinued": True,
}


def test_every_kind_of_offline_write_is_read_back_and_uploaded_once(gateway_factory, tmp_path):
    up, gw = offline_gateway(gateway_factory, tmp_path)

    # Entity set: POST, PATCH, PUT, DELETE.
    r = write(gw, "POST", "Products", {"Name": "Offline Widget", "Price": 12.5, "Tags": ["offline"]})
    assert r.status_code == 201, r.text
    new_product = r.json()["ID"]
    assert new_product < 0
    assert write(gw, "PATCH", "Products(2)", {"Name": "Patched 2"}).status_code == 204
    r = write(gw, "PUT", "Products(3)", PUT_BODY)
    assert r.status_code == 204, r.text
    r = write(gw, "DELETE", "Products(4)")
    assert r.status_code == 204, r.text
    # Singleton.
    r = write(gw, "PATCH", "Company", {"Name": "Offline AG"})
    assert r.status_code == 204, r.text
    # Containment: into an existing order's lines, and a deep insert with contained lines.
    r = write(gw, "POST", "Orders(1)/Lines", {"LineNo": 7, "ProductID": 9, "Quantity": 4, "Amount": 8.5})
    assert r.status_code == 201, r.text
    assert plain(r.json()) == {"LineNo": 7, "ProductID": 9, "Quantity": 4, "Amount": 8.5}
    deep = {
        "Date": "2025-03-01T10:00:00Z",
        "Status": "Open",
        "CustomerID": 5,
        "Lines": [
            {"LineNo": 1, "ProductID": 11, "Quantity": 2, "Amount": 4.5},
            {"LineNo": 2, "ProductID": 12, "Quantity": 3, "Amount": 6.25},
        ],
    }
    r = write(gw, "POST", "Orders", deep)
    assert r.status_code == 201, r.text
    new_order = r.json()["ID"]
    # A set in $metadata that no defining request names: accepted, queued, readable.
    r = write(gw, "POST", "Suppliers", {"Name": "Offline Supplier", "City": "Chur"})
    assert r.status_code == 201, r.text
    new_supplier = r.json()["ID"]
    # The same rule for an update and a delete of entities of that set (the mirror holds none of them).
    r = write(gw, "PATCH", "Suppliers(2)", {"City": "Olten"})
    assert r.status_code == 204, r.text
    r = write(gw, "DELETE", "Suppliers(1)")
    assert r.status_code == 204, r.text
    # A $batch changeset.
    body = multipart_batch(
        [
            [
                part("POST", "Products", "1", {"Name": "Batch Gadget", "Price": 7.75}),
                part("PATCH", "Products(5)", "2", {"Description": "patched in a changeset"}),
            ]
        ]
    )
    r = requests.post(
        gw.url(SHOP + "$batch"),
        data=body.encode(),
        headers={"Content-Type": "multipart/mixed; boundary=batch", "OData-Version": "4.0"},
        timeout=10,
    )
    assert r.status_code == 200 and r.headers["X-Mirrorgate-Origin"] == "local", r.text
    assert multipart_statuses(r.text) == [201, 204], r.text

    # Read-your-writes, offline.
    assert local(gw, f"Products({new_product})").json()["Name"] == "Offline Widget"
    assert local(gw, "Products(2)").json()["Name"] == "Patched 2"
    got = local(gw, "Products(3)").json()
    assert {k: got.get(k) for k in PUT_BODY} == PUT_BODY
    assert got.get("ShelfLife") is None  # PUT replaces: what the body leaves out is reset
    assert local(gw, "Products(4)").status_code == 404
    assert local(gw, "Company").json()["Name"] == "Offline AG"
    lines = local(gw, "Orders(1)/Lines").json()["value"]
    assert [ln["LineNo"] for ln in lines] == [1, 7], lines
    got = local(gw, f"Orders({new_order})?$expand=Lines").json()
    assert [plain(ln) for ln in got["Lines"]] == deep["Lines"], got
    assert local(gw, f"Suppliers({new_supplier})").json()["Name"] == "Offline Supplier"
    assert plain(local(gw, "Suppliers(2)").json()) == {"City": "Olten", "ID": 2}  # as written (README)
    assert [p["Name"] for p in local(gw, "Products?$filter=Name eq 'Batch Gadget'").json()["value"]] == ["Batch Gadget"]
    assert local(gw, "Products(5)").json()["Description"] == "patched in a changeset"
    assert status_of(gw, "shop")["pendingRequests"] == 12  # 10 requests, and 2 in the changeset

    up2 = ShopUpstream(port=up.port).start()
    try:
        upload_and_wait(gw, "shop")
        products = remote(up2, "Products?$orderby=ID").json()["value"]
        by_name = {}
        for p in products:
            by_name.setdefault(p["Name"], []).append(p)
        assert len(by_name["Offline Widget"]) == 1 and by_name["Offline Widget"][0]["Tags"] == ["offline"]
        assert by_name["Offline Widget"][0]["ID"] > 30
        assert len(by_name["Batch Gadget"]) == 1 and by_name["Batch Gadget"][0]["Price"] == 7.75
        assert remote(up2, "Products(2)").json()["Name"] == "Patched 2"
        got = remote(up2, "Products(3)").json()
        assert {k: got.get(k) for k in PUT_BODY} == PUT_BODY, got
        assert remote(up2, "Products(4)").status_code == 404
        assert remote(up2, "Products(5)").json()["Description"] == "patched in a changeset"
        assert len(products) == 30 - 1 + 2
        assert remote(up2, "Company").json()["Name"] == "Offline AG"
        lines = remote(up2, "Orders(1)/Lines").json()["value"]
        assert [plain(ln) for ln in lines] == [
            {"LineNo": 1, "ProductID": 2, "Quantity": 3, "Amount": 3.05},
            {"LineNo": 7, "ProductID": 9, "Quantity": 4, "Amount": 8.5},
        ], lines
        orders = remote(up2, "Orders?$filter=CustomerID eq 5 and Date eq 2025-03-01T10:00:00Z&$expand=Lines").json()
        assert len(orders["value"]) == 1, orders
        assert [plain(ln) for ln in orders["value"][0]["Lines"]] == deep["Lines"]
        suppliers = remote(up2, "Suppliers").json()["value"]
        assert [(s["Name"], s["City"]) for s in suppliers] == [("Bolt", "Olten"), ("Offline Supplier", "Chur")]
        writes = [(r.method, r.path) for r in up2.requests() if r.method in ("POST", "PATCH", "PUT", "DELETE")]
        assert len(writes) == 11 and writes[-1] == ("POST", "/shop.svc/$batch"), writes  # each once
        # Changes to downloaded entities carry the ETag the download kept; Suppliers and Company have none.
        if_match = {(r.method, r.path): r.headers.get("If-Match") for r in up2.requests()}
        for method, path in (("PATCH", "Products(2)"), ("PUT", "Products(3)"), ("DELETE", "Products(4)")):
            assert if_match[(method, "/shop.svc/" + path)] == 'W/"1"', (method, path, if_match)
        assert if_match[("PATCH", "/shop.svc/Company")] == "*"
    finally:
        up2.stop()


def test_uploads_send_the_downloaded_etag_and_a_concurrent_change_is_archived(gateway_factory, tmp_path):
    up, gw = offline_gateway(gateway_factory, tmp_path)
    assert write(gw, "PATCH", "Products(6)", {"Name": "Mine 6"}).status_code == 204
    assert write(gw, "PATCH", "Products(7)", {"Name": "Mine 7"}).status_code == 204

    up2 = ShopUpstream(port=up.port)
    # While the gateway was offline, someone else changed Products(7) upstream: a new version.
    seven = next(p for p in up2.store.entities("Products") if p.get_value("ID") == 7)
    seven.set_property("Name", "Theirs 7", ValueType.PRIMITIVE, "Edm.String")
    seven.etag = 'W/"2"'
    up2.start()
    try:
        upload(gw)
        s = status_of(gw, "shop")
        assert s["pendingRequests"] == 0 and s["errorArchive"] == 1, s
        patches = {r.path: r for r in up2.requests("PATCH")}
        assert patches["/shop.svc/Products(6)"].headers.get("If-Match") == 'W/"1"'
        assert patches["/shop.svc/Products(7)"].headers.get("If-Match") == 'W/"1"'
        assert patches["/shop.svc/Products(7)"].status.startswith("412")
        assert remote(up2, "Products(6)").json()["Name"] == "Mine 6"
        assert remote(up2, "Products(7)").json()["Name"] == "Theirs 7"  # not overwritten
        archive = requests.get(gw.url(SHOP + "ErrorArchive"), headers=ACCEPT, timeout=10).json()["value"]
        assert len(archive) == 1 and archive[0]["HTTPStatusCode"] == 412, archive
        # The download after the upload keeps the upstream's new version of Products(6) ...
        deadline = time.time() + 20
        while time.time() < deadline:
            s = status_of(gw, "shop")
            if s["lastDownloadAt"] and s["lastUploadAt"] and s["lastDownloadAt"] > s["lastUploadAt"]:
                if not s["downloading"]:
                    break
            time.sleep(0.1)
        assert s["lastDownloadAt"] > s["lastUploadAt"] and not s["downloading"], s
    finally:
        up2.stop()
    # ... so the next offline change of it is uploaded with that version's ETag.
    assert write(gw, "PATCH", "Products(6)", {"Name": "Mine 6 again"}).status_code == 204
    up3 = ShopUpstream(port=up.port, data_of=up2).start()
    try:
        upload(gw)
        patches = [r for r in up3.requests("PATCH") if r.path == "/shop.svc/Products(6)"]
        assert len(patches) == 1 and patches[0].headers.get("If-Match") == 'W/"2"', patches
        assert patches[0].status.startswith("204"), patches[0].status
        assert remote(up3, "Products(6)").json()["Name"] == "Mine 6 again"
    finally:
        up3.stop()
