"""The offline write scenario of issue 6 with unmodified clients: odatapy's client and python-odata against
odatapy's Northwind (V4), pyodata against mock-sap (V2, number-range keys, CSRF). With the upstream stopped:
create a parent and a child bound to it, update and delete other entities, run a batch changeset; read them
back locally ($filter, $expand, $count); kill -9 the gateway and restart it; start the upstream; the queue
drains in order and the upstream holds exactly the expected state, server keys replacing local ones.
"""

from __future__ import annotations

import requests
from odata_helpers import (
    ACCEPT,
    SAP_ROOT,
    csrf_session,
    kill_and_restart,
    sap_orders_config,
    start_mock_sap,
    status_of,
    upload_and_wait,
    upstream_products,
)
from test_odata_offline import MOUNT, nw_config, wait_downloaded


def upstream_get(up, path: str) -> dict:
    r = requests.get(up.root + path, headers=ACCEPT, timeout=10)
    assert r.status_code == 200, (path, r.status_code, r.text)
    return r.json()


def upload_all(gw) -> None:
    upload_and_wait(gw, timeout=60, wait=30)


def test_odatapy_client_offline_parent_child_update_delete_changeset(gateway_factory, odata_upstream, tmp_path):
    from odatapy.client import ODataClient
    from odatapy.client.filters import Field
    from odatapy.client.transport import HttpxTransport
    from upstreams.odata_northwind import ODataUpstream

    up = odata_upstream
    config = nw_config(up.root)
    config["dataDir"] = str(tmp_path / "data")
    gw = gateway_factory(config)
    wait_downloaded(gw, "nw")
    before = upstream_products(up)
    up.stop()

    c = ODataClient(gw.url(MOUNT).rstrip("/"), HttpxTransport())
    parent = c.create_entity_result("Customers", {"CustomerID": "NEWCO", "CompanyName": "New Co", "City": "Oslo", "Country": "Norway"})
    assert parent.status_code == 201
    child = c.create_entity_result("Orders", {"Freight": 12.5, "Customer@odata.bind": "Customers('NEWCO')"})
    assert child.status_code == 201
    local_order = child.entity.get_value("OrderID")
    assert local_order < 0  # a gateway-minted key, never a server one
    assert c.update_entity(c.entity_uri("Products", 2), {"UnitPrice": 21}).status_code == 204
    assert c.delete_entity(c.entity_uri("Products", 5)).status_code == 204
    batch = c.batch()
    cs = batch.add_changeset()
    cs.create("Products", {"ProductName": "Batch Jam", "UnitPrice": 4.5, "Discontinued": False})
    cs.update(c.entity_uri("Products", 4), {"ProductName": "Renamed in a changeset"})
    result = c.execute_batch(batch)
    assert [r.status_code for r in result.responses] == [201, 204], result.responses

    def read_back(client):
        orders = client.get_entity_set(client.entity_set_uri("Orders").filter(Field("CustomerID").eq("NEWCO")))
        assert [o.get_value("OrderID") for o in orders.entities] == [local_order]
        r = requests.get(gw_now.url(MOUNT + "Customers('NEWCO')?$expand=Orders"), headers=ACCEPT, timeout=10)
        assert r.status_code == 200 and r.headers["X-Mirrorgate-Origin"] == "local", r.text
        assert [o["OrderID"] for o in r.json()["Orders"]] == [local_order]
        products = client.get_entity_set(client.entity_set_uri("Products").count(True).orderby("ProductID"))
        assert products.count == len(before)  # one deleted, one created
        names = {e.get_value("ProductID"): e.get_value("ProductName") for e in products.entities}
        assert 5 not in names and names[4] == "Renamed in a changeset" and "Batch Jam" in names.values()
        assert float(client.get_entity(client.entity_uri("Products", 2)).get_value("UnitPrice")) == 21

    gw_now = gw
    read_back(c)
    assert status_of(gw)["pendingRequests"] == 6

    gw_now = kill_and_restart(gw, gateway_factory, config, "gw2")
    c2 = ODataClient(gw_now.url(MOUNT).rstrip("/"), HttpxTransport())
    assert status_of(gw_now)["pendingRequests"] == 6
    read_back(c2)

    up2 = ODataUpstream(port=up.port, page_size=5, etags=True).start()
    try:
        upload_all(gw_now)
        writes = [(r.method, r.path.rsplit("/", 1)[-1]) for r in up2.records if r.method != "GET"]
        assert [m for m, _ in writes] == ["POST", "POST", "PATCH", "DELETE", "POST"], writes  # FIFO, one $batch
        assert writes[-1][1] == "$batch"
        # odatapy keeps a bind on the side it was made: the new order names its customer.
        new_orders = upstream_get(up2, "Orders?$filter=Freight eq 12.5")["value"]
        assert len(new_orders) == 1, new_orders
        server_order = new_orders[0]["OrderID"]
        assert server_order > 0
        assert upstream_get(up2, f"Orders({server_order})/Customer")["CustomerID"] == "NEWCO"
        after = upstream_products(up2)
        assert float(after[2]["UnitPrice"]) == 21 and 5 not in after
        assert after[4]["ProductName"] == "Renamed in a changeset"
        assert [p["ProductName"] for p in after.values()].count("Batch Jam") == 1
        assert len(after) == len(before)
        # The local URL of the uploaded create still answers, with the server's key.
        r = requests.get(gw_now.url(MOUNT + f"Orders({local_order})"), headers=ACCEPT, timeout=10)
        assert r.status_code == 200 and r.json()["OrderID"] == server_order, r.text
    finally:
        up2.stop()


def test_python_odata_offline_parent_child_update_delete(gateway_factory, odata_upstream_no_etags, tmp_path):
    from odata import ODataService
    from upstreams.odata_northwind import ODataUpstream

    up = odata_upstream_no_etags
    config = nw_config(up.root)
    config["dataDir"] = str(tmp_path / "data")
    gw = gateway_factory(config)
    wait_downloaded(gw, "nw")
    svc = ODataService(gw.url(MOUNT), reflect_entities=True, quiet_progress=True)
    up.stop()

    Customer, Order, Product = svc.entities["Customers"], svc.entities["Orders"], svc.entities["Products"]
    parent = Customer()
    parent.CustomerID = "PYCO"
    parent.CompanyName = "Py Co"
    parent.City = "Turku"
    svc.save(parent)
    child = Order()
    child.Freight = 3.5
    child.Customer = parent
    svc.save(child)
    local_order = child.OrderID
    assert local_order is not None and local_order < 0
    p2 = svc.query(Product).get(2)
    p2.UnitPrice = 42
    svc.save(p2)
    svc.delete(svc.query(Product).get(6))

    def read_back(service):
        C, P = service.entities["Customers"], service.entities["Products"]
        pyco = service.query(C).get("PYCO")
        assert pyco.CompanyName == "Py Co"
        assert [o.OrderID for o in pyco.Orders] == [local_order]
        names = {p.ProductID: float(p.UnitPrice) for p in service.query(P)}
        assert 6 not in names and names[2] == 42

    read_back(svc)
    gw2 = kill_and_restart(gw, gateway_factory, config, "gw2")
    read_back(ODataService(gw2.url(MOUNT), reflect_entities=True, quiet_progress=True))

    up2 = ODataUpstream(port=up.port, page_size=5, etags=False).start()
    try:
        upload_all(gw2)
        assert upstream_get(up2, "Customers('PYCO')")["CompanyName"] == "Py Co"
        orders = upstream_get(up2, "Orders?$filter=Freight eq 3.5")["value"]
        assert len(orders) == 1 and orders[0]["OrderID"] > 0, orders
        assert upstream_get(up2, f"Orders({orders[0]['OrderID']})/Customer")["CustomerID"] == "PYCO"
        after = upstream_products(up2)
        assert float(after[2]["UnitPrice"]) == 42 and 6 not in after
    finally:
        up2.stop()


def test_pyodata_v2_offline_parent_child_update_delete_changeset(gateway_factory, tmp_path):
    """The same scenario against mock-sap (V2, number-range keys, CSRF) with pyodata; the child is created
    through the parent's navigation (pyodata has no call for that: raw request)."""
    import pyodata
    from harness import free_port

    port = free_port()
    sap = start_mock_sap(port)
    root = f"http://127.0.0.1:{port}{SAP_ROOT}"
    config = sap_orders_config(root, tmp_path)
    config["odata"]["services"]["gw"]["definingRequests"].append({"name": "items", "query": "SalesOrderLineItemSet"})
    try:
        gw = gateway_factory(config)
        wait_downloaded(gw, "gw")
        ids = [o["SalesOrderID"] for o in requests.get(root + "SalesOrderSet?$orderby=SalesOrderID", headers=ACCEPT).json()["d"]["results"]]
        count_before = len(ids)
        sap.kill()
        sap.wait(timeout=5)

        def client_for(g):
            url = g.url("/odata/gw/")
            s = csrf_session(url)
            return pyodata.Client(url, s), s, url

        client, s, url = client_for(gw)
        SO = client.entity_sets.SalesOrderSet
        parent = SO.create_entity().set(CustomerID="0100000000", CurrencyCode="EUR", Note="v2 scenario parent").execute()
        local_id = parent.SalesOrderID
        assert local_id.startswith("local-")
        r = s.post(
            url + f"SalesOrderSet('{local_id}')/ToLineItems",
            json={"ItemPosition": "0000000010", "ProductID": "HT-1000", "Quantity": "3", "QuantityUnit": "EA"},
            headers=ACCEPT,
            timeout=10,
        )
        assert r.status_code == 201, r.text
        SO.update_entity(ids[0], method="MERGE").set(Note="v2 scenario merged").execute()
        SO.delete_entity(ids[1]).execute()
        batch = client.create_batch()
        changeset = client.create_changeset()
        changeset.add_request(SO.create_entity().set(CustomerID="0100000000", CurrencyCode="EUR", Note="v2 scenario batch"))
        changeset.add_request(SO.update_entity(ids[2], method="MERGE").set(Note="v2 scenario batch merge"))
        batch.add_request(changeset)
        assert batch.execute()[0][0].SalesOrderID.startswith("local-")

        def read_back(c, sess, u):
            so = c.entity_sets.SalesOrderSet
            assert [e.SalesOrderID for e in so.get_entities().filter("Note eq 'v2 scenario parent'").execute()] == [local_id]
            r = sess.get(u + f"SalesOrderSet('{local_id}')?$expand=ToLineItems", headers=ACCEPT, timeout=10)
            assert [i["ProductID"] for i in r.json()["d"]["ToLineItems"]["results"]] == ["HT-1000"], r.text
            assert so.get_entities().count().execute() == count_before + 1  # two created, one deleted
            assert so.get_entity(ids[0]).execute().Note == "v2 scenario merged"
            assert so.get_entity(ids[2]).execute().Note == "v2 scenario batch merge"
            assert sess.get(u + f"SalesOrderSet('{ids[1]}')", headers=ACCEPT, timeout=10).status_code == 404

        read_back(client, s, url)
        gw2 = kill_and_restart(gw, gateway_factory, config, "gw2")
        read_back(*client_for(gw2))

        sap = start_mock_sap(port)  # fresh data, same port
        upload_and_wait(gw2, "gw")
        assert status_of(gw2, "gw")["inDoubt"] == 0

        def upstream(q):
            return requests.get(root + q, headers=ACCEPT, timeout=10).json()["d"]

        made = upstream("SalesOrderSet?$filter=Note eq 'v2 scenario parent'")["results"]
        assert len(made) == 1 and not made[0]["SalesOrderID"].startswith("local-")
        items = upstream(f"SalesOrderSet('{made[0]['SalesOrderID']}')/ToLineItems")["results"]
        assert [(i["ProductID"], float(i["Quantity"])) for i in items] == [("HT-1000", 3.0)], items
        assert len(upstream("SalesOrderSet?$filter=Note eq 'v2 scenario batch'")["results"]) == 1
        assert upstream(f"SalesOrderSet('{ids[0]}')")["Note"] == "v2 scenario merged"
        assert upstream(f"SalesOrderSet('{ids[2]}')")["Note"] == "v2 scenario batch merge"
        assert requests.get(root + f"SalesOrderSet('{ids[1]}')", headers=ACCEPT, timeout=10).status_code == 404
        # The parent's local URL still answers, with the server's key.
        r = requests.get(gw2.url(f"/odata/gw/SalesOrderSet('{local_id}')"), headers=ACCEPT, timeout=10)
        assert r.status_code == 200 and r.json()["d"]["SalesOrderID"] == made[0]["SalesOrderID"], r.text
    finally:
        if sap.poll() is None:
            sap.kill()
        sap.wait(timeout=5)
