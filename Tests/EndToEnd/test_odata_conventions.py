"""Issue 24: real services' conventions, through the release binary.

- An offline create on SAP's A2X V4 sales order service (mock-sap's `api_salesorder`, whose entity types
  declare `SAP__Messages` as a non-nullable collection) is accepted without it (OData 4.01 Protocol §11.4.2:
  an omitted collection is an empty one), read back offline and uploaded once.
- onlineFirst reads relay the upstream's own final answer (mock-sap's 501 for `$search`, a 4xx, a 500
  carrying an OData error); the mirror answers only for failures (429, 502, 503, 504, a 500 whose body is
  no OData error, no answer, or a body still arriving when the budget ends — never a truncated answer).
- `$select` with a malformed item (`*,sqlite_version()`) is a 400 in the OData error format.
"""

from __future__ import annotations

import pytest
import requests
from harness import free_port
from odata_helpers import ACCEPT, JSON_HEADERS, csrf_session, start_mock_sap, status_of, upload_and_wait
from test_odata_offline import MOUNT, nw_config, wait_downloaded
from upstreams.faults import FaultInjector

A2X_SALES_ORDER = "/sap/opu/odata4/sap/api_salesorder/srvd_a2x/sap/api_salesorder/0001/"
SO_MOUNT = "/odata/so/"


@pytest.fixture
def mock_sap_v4():
    """mock-sap (with SAP's CSRF handshake) in its own process; `restart()` starts it again on its port."""
    port = free_port()
    state = {"port": port, "proc": start_mock_sap(port)}

    def stop():
        if state["proc"].poll() is None:
            state["proc"].kill()
        state["proc"].wait(timeout=5)

    def restart():
        stop()
        state["proc"] = start_mock_sap(port)

    state["stop"] = stop
    state["restart"] = restart
    state["root"] = f"http://127.0.0.1:{port}{A2X_SALES_ORDER}"
    yield state
    stop()


def a2x_config(root: str, tmp_path) -> dict:
    return {
        "dataDir": str(tmp_path / "data"),
        "odata": {
            "services": {
                "so": {
                    "mount": SO_MOUNT,
                    "upstream": root,
                    "timeout": "3s",
                    "definingRequests": [
                        {"name": "orders", "query": "SalesOrder"},
                        {"name": "items", "query": "SalesOrderItem"},
                    ],
                }
            }
        },
    }


def upstream_orders(root: str, reference: str) -> list:
    r = requests.get(
        root + f"SalesOrder?$filter=PurchaseOrderByCustomer eq '{reference}'", headers=ACCEPT, timeout=10
    )
    assert r.status_code == 200, r.text
    return r.json()["value"]


def test_an_a2x_create_without_sap_messages_is_accepted_offline_and_uploaded(gateway_factory, mock_sap_v4, tmp_path):
    root = mock_sap_v4["root"]
    # The upstream itself accepts the create without SAP__Messages (the payload a client sends).
    payload = {"SalesOrderType": "OR", "SalesOrganization": "1710", "SoldToParty": "17100001"}
    direct = csrf_session(root).post(root + "SalesOrder", json={**payload, "PurchaseOrderByCustomer": "MG24-DIRECT"},
                                     headers=JSON_HEADERS, timeout=10)
    assert direct.status_code == 201, direct.text
    gw = gateway_factory(a2x_config(root, tmp_path))
    wait_downloaded(gw, "so")
    mock_sap_v4["stop"]()

    r = requests.post(gw.url(SO_MOUNT + "SalesOrder"), json={**payload, "PurchaseOrderByCustomer": "MG24-OFFLINE"},
                      headers=JSON_HEADERS, timeout=10)
    assert r.status_code == 201, r.text
    assert r.headers["X-Mirrorgate-Origin"] == "local"
    # An item of an existing order too (its type declares SAP__Messages the same way).
    item = {"SalesOrder": "0000004712", "SalesOrderItem": "900", "Material": "MG24", "RequestedQuantity": 2}
    r = requests.post(gw.url(SO_MOUNT + "SalesOrderItem"), json=item, headers=JSON_HEADERS, timeout=10)
    assert r.status_code == 201, r.text
    # A collection given is still checked against its type.
    r = requests.post(gw.url(SO_MOUNT + "SalesOrder"), json={**payload, "SAP__Messages": "none"},
                      headers=JSON_HEADERS, timeout=10)
    assert r.status_code == 400 and "SAP__Messages" in r.json()["error"]["message"], r.text

    r = requests.get(gw.url(SO_MOUNT + "SalesOrder?$filter=PurchaseOrderByCustomer eq 'MG24-OFFLINE'"),
                     headers=ACCEPT, timeout=10)
    assert r.status_code == 200 and len(r.json()["value"]) == 1, r.text
    assert status_of(gw, "so")["pendingRequests"] == 2

    mock_sap_v4["restart"]()
    upload_and_wait(gw, "so", timeout=60, wait=30)
    created = upstream_orders(root, "MG24-OFFLINE")
    assert len(created) == 1 and created[0]["SoldToParty"] == "17100001", created
    r = requests.get(root + "SalesOrderItem(SalesOrder='0000004712',SalesOrderItem='900')", headers=ACCEPT, timeout=10)
    assert r.status_code == 200 and r.json()["Material"] == "MG24", r.text


def test_the_upstreams_final_answer_is_relayed_not_replaced_by_the_mirror(gateway_factory, mock_sap_v4, tmp_path):
    root = mock_sap_v4["root"]
    gw = gateway_factory(a2x_config(root, tmp_path))
    wait_downloaded(gw, "so")
    for target in ["SalesOrder?$search=PO&$select=SalesOrder", "SalesOrder('nope')", "SalesOrder?$filter=Nope eq 1"]:
        direct = requests.get(root + target, headers=ACCEPT, timeout=10)
        assert direct.status_code >= 400, (target, direct.status_code)
        r = requests.get(gw.url(SO_MOUNT + target), headers=ACCEPT, timeout=10)
        assert (r.status_code, r.headers["X-Mirrorgate-Origin"]) == (direct.status_code, "remote"), (target, r.text)
        assert r.json()["error"]["code"] == direct.json()["error"]["code"], target


@pytest.fixture
def injected(odata_upstream):
    proxy = FaultInjector(odata_upstream.origin).start()
    yield odata_upstream, proxy
    proxy.stop()


def test_a_500_is_relayed_when_it_is_the_services_odata_error_and_failed_over_when_not(gateway_factory, injected):
    up, proxy = injected
    gw = gateway_factory(nw_config(proxy.url + "/nw.svc/"))
    wait_downloaded(gw, "nw")
    proxy.status_for["GET"] = 500  # the injector's body is an OData error
    r = requests.get(gw.url(MOUNT + "Products(3)"), headers=ACCEPT, timeout=10)
    assert (r.status_code, r.headers["X-Mirrorgate-Origin"]) == (500, "remote"), r.text
    assert r.json()["error"]["code"] == "Injected"
    proxy.body_for[500] = ("text/html", b"<html><body>Internal Server Error</body></html>")
    r = requests.get(gw.url(MOUNT + "Products(3)"), headers=ACCEPT, timeout=10)
    assert (r.status_code, r.headers["X-Mirrorgate-Origin"]) == (200, "local"), r.text
    assert r.json()["ProductID"] == 3
    for status in (501, 404, 400):
        proxy.status_for["GET"] = status
        r = requests.get(gw.url(MOUNT + "Products(3)"), headers=ACCEPT, timeout=10)
        assert (r.status_code, r.headers["X-Mirrorgate-Origin"]) == (status, "remote"), r.text


def test_a_body_still_arriving_when_the_budget_ends_is_answered_by_the_mirror(gateway_factory, injected):
    up, proxy = injected
    gw = gateway_factory(nw_config(proxy.url + "/nw.svc/", timeout="1s"))
    wait_downloaded(gw, "nw")
    online = requests.get(gw.url(MOUNT + "Products?$orderby=ProductID"), headers=ACCEPT, timeout=10)
    assert online.headers["X-Mirrorgate-Origin"] == "remote"
    # The head at once, then the body in four pieces 0.6 s apart: past the 1-s budget.
    proxy.trickle_for["GET"] = 0.6
    r = requests.get(gw.url(MOUNT + "Products?$orderby=ProductID"), headers=ACCEPT, timeout=15)
    assert r.status_code == 200, r.text
    assert r.headers["X-Mirrorgate-Origin"] == "local"
    assert r.json()["value"] == online.json()["value"]
    assert proxy.forwarded.get("GET", 0) >= 2  # it was tried upstream first


def test_a_malformed_select_item_is_a_400_in_the_odata_error_format(gateway_factory, odata_upstream):
    gw = gateway_factory(nw_config(odata_upstream.root, routing="localFirst"))
    wait_downloaded(gw, "nw")
    for query in ["$select=*,sqlite_version()", "$select=ProductName()", "$select=ProductID,(x)"]:
        r = requests.get(gw.url(MOUNT + "Products?" + query), headers=ACCEPT, timeout=10)
        assert r.status_code == 400, (query, r.status_code, r.text)
        assert r.headers["X-Mirrorgate-Origin"] == "local"
        error = r.json()["error"]
        assert error["code"] and "$select" in error["message"], (query, error)
