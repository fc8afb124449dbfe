"""OData navigation offline without referential constraints (SPEC §4, issue 5).

The odatapy Northwind V4 upstream is started with ``constraints=False``: ``Order.Customer`` declares no
ReferentialConstraint, so the gateway can only learn the relationships from the links that ``$expand``
shows in the defining requests (``Customers?$expand=Orders``, ``Orders?$expand=Customer``). The same read
scenario — navigation paths, ``/$count``, ``$expand`` (with nested options), ``$filter`` through
navigation (single-valued path, ``any``/``all``, ``$count``), ``$ref`` — runs online, then with the
upstream stopped, and must give the same entities, counts and order. The odatapy client does what it
supports (navigation segments, expand with options, ``get_count``, ``get_references``), python-odata its
navigation attributes and ``expand``; raw ``requests`` compare whole bodies. V2 ``$links``
(constraint-based) is checked the same way against mock-sap.
"""

from __future__ import annotations

import pytest
import requests
from test_odata_offline import SAP_ROOT, _start_mock_sap, get, wait_downloaded

MOUNT = "/odata/nw/"


@pytest.fixture
def upstream_without_constraints():
    from upstreams.odata_northwind import ODataUpstream

    u = ODataUpstream(page_size=None, etags=False, constraints=False).start()
    state = {"up": u, "stopped": False}
    yield state
    if not state["stopped"]:
        u.stop()


def config(root: str, defining: list[dict]) -> dict:
    svc = {"mount": MOUNT, "upstream": root, "timeout": "2s", "definingRequests": defining}
    return {"odata": {"services": {"nw": svc}}}


EXPANDING = [
    {"name": "customers", "query": "Customers?$expand=Orders"},
    {"name": "orders", "query": "Orders?$expand=Customer"},
    {"name": "products", "query": "Products"},
]

RAW = [
    "Customers('ALFKI')/Orders",
    "Customers('ANATR')/Orders",
    "Customers('ALFKI')/Orders?$orderby=Freight desc&$select=OrderID,Freight",
    "Orders(10250)/Customer",
    "Orders?$filter=Customer/Country eq 'Germany'&$select=OrderID",
    "Orders?$filter=Customer/City eq 'Marseille' or Freight lt 12&$orderby=OrderID desc",
    "Customers?$filter=Orders/any(o:o/Freight gt 20)&$select=CustomerID",
    "Customers?$filter=Orders/all(o:o/Freight gt 20)&$select=CustomerID",
    "Customers?$filter=Orders/any()&$select=CustomerID",
    "Customers?$filter=Orders/$count ge 2&$select=CustomerID",
    "Customers('ALFKI')/Orders?$count=true&$top=1",
    "Customers?$expand=Orders($count=true;$top=1)&$select=CustomerID",
    "Customers?$orderby=CustomerID desc&$expand=Orders($filter=Freight gt 20)",
    "Customers?$expand=Orders($select=OrderID,Freight)&$select=CustomerID",
    "Orders?$expand=Customer($select=CustomerID,CompanyName)&$select=OrderID",
    "Customers('ALFKI')/Orders/$ref",
    "Orders(10248)/Customer/$ref",
    "Customers('ALFKI')/Orders(10249)/$ref",
]


def raw_scenario(gw) -> dict:
    out = {}
    for path in RAW:
        r = get(gw, MOUNT + path)
        assert r.status_code == 200, (path, r.status_code, r.text)
        body = r.json()
        if "$expand" in path:
            # The context URL's select/expand list is the only part allowed to differ.
            body.pop("@odata.context", None)
        out[path] = body
    for path in ["Customers('NOPE')/Orders", "Customers('NOPE')/Orders/$ref", "Orders(99999)/Customer"]:
        out[path] = get(gw, MOUNT + path).status_code
    for path in ["Customers('ALFKI')/Orders/$count", "Customers('ANATR')/Orders/$count"]:
        r = get(gw, MOUNT + path, headers={"Accept": "text/plain"})
        assert r.status_code == 200, (path, r.text)
        out[path] = r.text
    return out


def client_scenario(gw) -> dict:
    from odatapy.client import ODataClient
    from odatapy.client.transport import HttpxTransport

    c = ODataClient(gw.url(MOUNT).rstrip("/"), HttpxTransport())
    out = {}
    nav = c.entity_uri("Customers", "ALFKI").append_navigation_segment("Orders")
    out["alfki_orders"] = [(e.get_value("OrderID"), str(e.get_value("Freight"))) for e in c.iter_entities(nav)]
    out["alfki_count"] = c.get_count(c.entity_uri("Customers", "ALFKI").append_navigation_segment("Orders"))
    one = c.get_entity(c.entity_uri("Orders", 10250).append_navigation_segment("Customer"))
    out["order_customer"] = one.get_value("CompanyName")
    uri = c.entity_set_uri("Customers").expand_with_options("Orders", select=["OrderID"], orderby="OrderID desc")
    expanded = []
    for e in c.get_entity_set(uri).entities:
        # odatapy's client reads an inline collection as a list of values with properties.
        inline = e.get_value("Orders") or []
        ids = [next(p.value for p in o.properties if p.name == "OrderID") for o in inline]
        expanded.append((e.get_value("CustomerID"), ids))
    out["expanded"] = expanded
    out["refs"] = c.get_references(c.entity_uri("Customers", "BONAP").append_navigation_segment("Orders"))
    return out


def python_odata_scenario(gw) -> dict:
    from odata import ODataService

    svc = ODataService(gw.url(MOUNT), reflect_entities=True, quiet_progress=True)
    Customer, Order = svc.entities["Customers"], svc.entities["Orders"]
    out = {}
    out["alfki_orders"] = [o.OrderID for o in svc.query(Customer).get("ALFKI").Orders]
    out["order_customer"] = svc.query(Order).get(10250).Customer.CompanyName
    expanded = svc.query(Customer).expand(Customer.Orders).order_by(Customer.CustomerID.asc())
    out["expanded"] = [(c.CustomerID, [o.OrderID for o in c.Orders]) for c in expanded]
    return out


def test_navigation_without_constraints_same_answers_online_and_offline(gateway_factory, upstream_without_constraints):
    up = upstream_without_constraints["up"]
    gw = gateway_factory(config(up.root, EXPANDING))
    status = wait_downloaded(gw, "nw")
    assert status["entitySets"] == {"Customers": 3, "Orders": 3, "Products": 7}, status
    online_raw = raw_scenario(gw)
    online_client = client_scenario(gw)
    online_python_odata = python_odata_scenario(gw)
    assert get(gw, MOUNT + "Customers('ALFKI')/Orders").headers["X-Mirrorgate-Origin"] == "remote"
    # The scenario is not vacuous: the answers hold what the upstream serves.
    assert [o["OrderID"] for o in online_raw["Customers('ALFKI')/Orders"]["value"]] == [10248, 10249]
    assert online_raw["Customers('ANATR')/Orders"]["value"] == []
    every = online_raw["Customers?$filter=Orders/all(o:o/Freight gt 20)&$select=CustomerID"]["value"]
    assert [c["CustomerID"] for c in every] == ["ANATR", "BONAP"]
    assert online_raw["Customers('ALFKI')/Orders/$count"] == "2"
    assert online_raw["Customers('NOPE')/Orders"] == 404
    assert online_raw["Orders(10248)/Customer/$ref"]["@odata.id"] == gw.url(MOUNT + "Customers('ALFKI')")
    assert online_client["expanded"] == [("ALFKI", [10249, 10248]), ("ANATR", []), ("BONAP", [10250])]
    assert online_client["refs"] == [gw.url(MOUNT + "Orders(10250)")]
    assert online_python_odata["expanded"] == [("ALFKI", [10248, 10249]), ("ANATR", []), ("BONAP", [10250])]

    up.stop()
    upstream_without_constraints["stopped"] = True
    r = get(gw, MOUNT + "Customers('ALFKI')/Orders")
    assert r.headers["X-Mirrorgate-Origin"] == "local"
    offline_raw = raw_scenario(gw)
    for path in online_raw:
        assert offline_raw[path] == online_raw[path], path
    assert client_scenario(gw) == online_client
    assert python_odata_scenario(gw) == online_python_odata


def test_links_never_downloaded_are_an_honest_501(gateway_factory, upstream_without_constraints):
    up = upstream_without_constraints["up"]
    # Orders are mirrored with their Customer but not whole (a filter): the reverse direction is unknown.
    gw = gateway_factory(
        config(
            up.root,
            [
                {"name": "customers", "query": "Customers"},
                {"name": "orders", "query": "Orders?$expand=Customer&$filter=OrderID gt 0"},
            ],
        )
    )
    wait_downloaded(gw, "nw")
    up.stop()
    upstream_without_constraints["stopped"] = True
    # Customers were mirrored without $expand=Orders: their orders are unknown, not "none".
    for path in [
        "Customers('ALFKI')/Orders",
        "Customers('ALFKI')/Orders/$count",
        "Customers?$expand=Orders",
        "Customers?$filter=Orders/any()",
        "Customers('ALFKI')/Orders/$ref",
    ]:
        r = get(gw, MOUNT + path)
        assert r.status_code == 501, (path, r.status_code, r.text)
        assert r.headers["X-Mirrorgate-Origin"] == "local"
        assert "$expand=Orders" in r.json()["error"]["message"]
    # The other direction was expanded: answered.
    r = get(gw, MOUNT + "Orders(10250)/Customer/$ref")
    assert r.status_code == 200 and r.json()["@odata.id"] == gw.url(MOUNT + "Customers('BONAP')")


def test_collection_known_from_its_single_valued_partner_downloaded_whole(gateway_factory, upstream_without_constraints):
    # Issue 24 item 4: Customers plain, Orders whole with $expand=Customer. Customer.Orders has no constraint,
    # but its partner Order.Customer is known for every order, so Customers('X')/Orders is exactly the orders
    # whose Customer is X.
    up = upstream_without_constraints["up"]
    gw = gateway_factory(
        config(
            up.root,
            [{"name": "customers", "query": "Customers"}, {"name": "orders", "query": "Orders?$expand=Customer"}],
        )
    )
    wait_downloaded(gw, "nw")
    paths = [
        "Customers('ALFKI')/Orders",
        "Customers('BONAP')/Orders?$orderby=Freight desc&$select=OrderID,Freight",
        "Customers('ANATR')/Orders",
        "Customers('ALFKI')/Orders/$count",
        "Customers?$expand=Orders&$orderby=CustomerID",
        "Customers('BONAP')?$expand=Orders($select=OrderID)",
        "Customers('ALFKI')/Orders/$ref",
    ]

    def scenario():
        out = {}
        for p in paths:
            r = get(gw, MOUNT + p, headers={"Accept": "text/plain"} if p.endswith("$count") else None)
            assert r.status_code == 200, (p, r.status_code, r.text)
            out[p] = (r.headers["X-Mirrorgate-Origin"], r.text if p.endswith("$count") else r.json())
        return out

    online = scenario()
    assert online[paths[0]][1]["value"], online[paths[0]]
    up.stop()
    upstream_without_constraints["stopped"] = True
    offline = scenario()
    for p in paths:
        assert online[p][0] == "remote" and offline[p][0] == "local", p
        assert offline[p][1] == online[p][1], (p, online[p][1], offline[p][1])
    # A filter through the navigation still needs the links themselves.
    r = get(gw, MOUNT + "Customers?$filter=Orders/any()")
    assert r.status_code == 501, r.text


def test_single_valued_partner_known_from_the_other_side(gateway_factory, upstream_without_constraints):
    # Only Customers are expanded; Orders are mirrored plain. Each order an expanded customer showed has
    # that customer as its Customer (the partner is single-valued), so Order.Customer is answered too.
    up = upstream_without_constraints["up"]
    gw = gateway_factory(
        config(
            up.root,
            [{"name": "customers", "query": "Customers?$expand=Orders"}, {"name": "orders", "query": "Orders"}],
        )
    )
    wait_downloaded(gw, "nw")
    paths = [
        "Orders(10250)/Customer",
        "Orders(10248)/Customer/$ref",
        "Orders?$filter=Customer/Country eq 'France' or Customer/City eq 'Berlin'&$select=OrderID",
    ]

    def scenario():
        out = {}
        for p in paths:
            r = get(gw, MOUNT + p)
            assert r.status_code == 200, (p, r.status_code, r.text)
            out[p] = (r.headers["X-Mirrorgate-Origin"], r.json())
        return out

    online = scenario()
    assert online[paths[0]][1]["CustomerID"] == "BONAP"
    assert [o["OrderID"] for o in online[paths[2]][1]["value"]] == [10248, 10249, 10250]
    up.stop()
    upstream_without_constraints["stopped"] = True
    offline = scenario()
    for p in paths:
        assert online[p][0] == "remote" and offline[p][0] == "local"
        assert offline[p][1] == online[p][1], p


def test_v2_links_online_and_offline(gateway_factory):
    sap = _start_mock_sap(csrf=False)
    try:
        gw = gateway_factory(
            {
                "odata": {
                    "services": {
                        "gw": {
                            "mount": "/odata/gw/",
                            "upstream": f"http://127.0.0.1:{sap['port']}{SAP_ROOT}",
                            "timeout": "3s",
                            "definingRequests": [
                                {"name": "orders", "query": "SalesOrderSet"},
                                {"name": "items", "query": "SalesOrderLineItemSet"},
                                {"name": "partners", "query": "BusinessPartnerSet"},
                            ],
                        }
                    }
                }
            }
        )
        wait_downloaded(gw, "gw")
        head = get(gw, "/odata/gw/SalesOrderSet?$top=1&$orderby=SalesOrderID").json()
        first = head["d"]["results"][0]["SalesOrderID"]
        paths = [
            f"SalesOrderSet('{first}')/$links/ToLineItems",
            f"SalesOrderSet('{first}')/$links/ToLineItems?$inlinecount=allpages",
            f"SalesOrderSet('{first}')/$links/ToBusinessPartner",
        ]

        def scenario():
            out = {}
            for p in paths:
                r = get(gw, "/odata/gw/" + p)
                assert r.status_code == 200, (p, r.text)
                out[p] = r.json()
            return out

        online = scenario()
        assert online[paths[0]]["d"]["results"], online
        assert online[paths[2]]["d"]["uri"].startswith(gw.url("/odata/gw/BusinessPartnerSet('"))
        sap["proc"].kill()
        sap["proc"].wait(timeout=5)
        offline = scenario()
        assert get(gw, "/odata/gw/" + paths[0]).headers["X-Mirrorgate-Origin"] == "local"
        assert offline == online
    finally:
        if sap["proc"].poll() is None:
            sap["proc"].kill()
        sap["proc"].wait(timeout=5)


def test_links_made_offline_by_a_deep_insert_are_answered(gateway_factory, upstream_without_constraints):
    # Issue 24 item 4: an offline deep insert makes the links of Customer.Orders (no constraint) itself, so
    # $expand and navigation answer them; a later offline bind to a customer makes its list unknown (501),
    # never a list that misses the bound order.
    up = upstream_without_constraints["up"]
    gw = gateway_factory(config(up.root, EXPANDING))
    wait_downloaded(gw, "nw")
    up.stop()
    upstream_without_constraints["stopped"] = True
    body = {"CustomerID": "NEWCU", "CompanyName": "New Co", "Orders": [{"Freight": 1.5}, {"Freight": 2.5}]}
    r = requests.post(gw.url(MOUNT + "Customers"), json=body, headers={"Accept": "application/json"}, timeout=10)
    assert r.status_code == 201, r.text
    r = get(gw, MOUNT + "Customers('NEWCU')?$expand=Orders($orderby=Freight)")
    assert r.status_code == 200 and r.headers["X-Mirrorgate-Origin"] == "local", r.text
    orders = r.json()["Orders"]
    assert [float(o["Freight"]) for o in orders] == [1.5, 2.5], orders
    r = get(gw, MOUNT + "Customers('NEWCU')/Orders/$count", headers={"Accept": "text/plain"})
    assert (r.status_code, r.text) == (200, "2"), r.text
    r = get(gw, MOUNT + f"Orders({orders[0]['OrderID']})/Customer")
    assert r.status_code == 200 and r.json()["CustomerID"] == "NEWCU", r.text
    # A bind made offline to customers whose orders were known (downloaded, or made by the deep insert).
    for customer in ["NEWCU", "ALFKI"]:
        assert get(gw, MOUNT + f"Customers('{customer}')/Orders").status_code == 200
        r = requests.post(
            gw.url(MOUNT + "Orders"),
            json={"Freight": 3.5, "Customer@odata.bind": f"Customers('{customer}')"},
            headers={"Accept": "application/json"},
            timeout=10,
        )
        assert r.status_code == 201, r.text
        r = get(gw, MOUNT + f"Customers('{customer}')/Orders")
        assert r.status_code == 501, (customer, r.status_code, r.text)
