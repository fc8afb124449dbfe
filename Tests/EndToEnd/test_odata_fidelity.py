"""Issue 15: offline answers equal the upstream's. Each query is asked through the gateway while the
upstream answers (forwarded) and again with the upstream stopped (answered from the mirror); the two
parsed JSON documents must be equal. What the mirror does not answer must be a 501 OData error, never
a 200 with other data.

Upstreams: `upstreams/odata_shop.py` (odatapy V4: inheritance, singleton, enums, complex and collection
properties, Duration/Date/TimeOfDay/DateTimeOffset/Decimal/Int64/Guid) and mock-sap V2 (SAP's
GWSAMPLE_BASIC conventions: `__metadata`, `__deferred`, `$inlinecount`, `sap-client`).
"""

from __future__ import annotations

import json
import time
from urllib.parse import quote

import requests
from harness import free_port
from odata_helpers import SAP_ROOT, start_mock_sap
from test_odata_offline import wait_downloaded
from upstreams.odata_shop import ShopUpstream

SHOP = "/odata/shop/"

# Queries whose offline answer must equal the upstream's (path and query under the mount).
SHOP_QUERIES = [
    "People",
    "People(2)",
    "People(3)",
    "People/Shop.Model.Employee",
    "People/Shop.Model.Customer",
    "People(2)/Shop.Model.Employee",
    "People?$filter=isof(Shop.Model.Employee)",
    "People?$filter=isof(Shop.Model.Customer)",
    "People?$filter=Shop.Model.Employee/Salary gt 1000",
    "People?$filter=Address/City eq 'Basel'",
    "People?$orderby=Address/City,ID desc",
    "People?$select=Name",
    "People?$select=Name,Address",
    "People?$filter=Emails/any(e:e eq 'bob@example.org')",
    "People?$filter=Emails/all(e:contains(e,'example'))",
    "People?$filter=Emails/$count gt 1",
    "People?$count=true&$top=2",
    "People/$count",
    "People(1)/Address",
    "People(1)/Address/City",
    "People(2)/Emails",
    "People(2)/Name",
    "People?$search=Bob",
    "People?$search=Ann OR Eve",
    "People/Shop.Model.Employee?$filter=HiredOn gt 2020-01-01",
    "People/Shop.Model.Employee?$orderby=Salary desc",
    "Products",
    "Products(7)",
    "Products?$top=5&$skip=3",
    "Products?$orderby=Price desc&$top=5",
    "Products?$orderby=Price&$select=ID,Price",
    "Products?$filter=Price gt 100",
    "Products?$filter=Price le 9.5",
    "Products?$filter=Price eq 37.13",
    "Products?$filter=ShelfLife gt duration'P10D'",
    "Products?$filter=ShelfLife lt duration'PT30H'",
    "Products?$orderby=ShelfLife desc,ID&$top=6&$select=ID,ShelfLife",
    "Products?$filter=ReleaseDate ge 2022-06-01",
    "Products?$filter=ReleaseDate eq 2021-02-02",
    "Products?$orderby=ReleaseDate,ID&$select=ID,ReleaseDate",
    "Products?$filter=AvailableFrom lt 10:00:00",
    "Products?$filter=AvailableFrom gt 12:30:00",
    "Products?$orderby=AvailableFrom desc,ID&$select=ID,AvailableFrom",
    "Products?$filter=Created gt 2024-06-01T00:00:00Z",
    "Products?$filter=Created lt 2024-03-03T03:00:00+01:00",
    "Products?$orderby=Created,ID&$select=ID,Created",
    "Products?$filter=Rating gt 3.5",
    "Products?$filter=Stock gt 9007199254740990",
    "Products?$filter=Stock eq 9007199254741000",
    "Products?$filter=Code eq 00000000-0000-0000-0000-000000001eef",
    "Products?$filter=Colors has Shop.Model.Color'Blue'",
    "Products?$filter=Colors eq Shop.Model.Color'Red'",
    "Products?$filter=Status eq Shop.Model.Status'Closed'",
    "Products?$filter=Status ne Shop.Model.Status'Open'&$select=ID,Status",
    "Products?$filter=Tags/any(t:t eq 'eco')",
    "Products?$filter=Tags/any()",
    "Products?$filter=not Tags/any()",
    "Products?$filter=Discontinued",
    "Products?$filter=Description eq null",
    "Products?$filter=contains(Name,'Widget')",
    "Products?$filter=startswith(Name,'G') and Price lt 100",
    "Products?$filter=length(Name) gt 8",
    "Products?$filter=tolower(Name) eq 'gizmo 2'",
    "Products?$filter=year(ReleaseDate) eq 2023",
    "Products?$filter=Price mul 2 gt 300",
    "Products?$filter=ID in (1,3,5)",
    "Products?$search=widget",
    "Products?$search=widget OR gizmo",
    "Products?$search=widget AND NOT pro",
    "Products?$search=\"fine blue\"",
    # Local $search looks in string properties only (README); odatapy also searches enum member
    # names, string collections and Guids, so a term such as `blue` (a Color) is asked as `fine` here.
    "Products?$search=fine&$count=true",
    "Products?$compute=Price mul 2 as DoublePrice&$select=ID,DoublePrice",
    "Products?$compute=Price mul 2 as DoublePrice&$filter=DoublePrice gt 300&$select=ID,DoublePrice",
    "Products?$count=true&$filter=Price gt 50",
    "Products/$count",
    "Products/$count?$filter=Discontinued",
    "Products(3)/Name",
    "Products(3)/Name/$value",
    "Products(3)/Tags",
    "Products(3)/Price",
    "Products(3)/ShelfLife",
    "Orders",
    "Orders(3)",
    "Orders?$filter=Status eq Shop.Model.Status'Open'",
    "Orders?$filter=Date gt 2025-01-03T00:00:00Z",
    "Orders?$expand=Customer",
    "Orders?$expand=Customer($select=Name)",
    "Orders(1)/Customer",
    "Orders?$filter=Customer/Name eq 'Cid'",
    "Company",
]

# Compared without `@odata.context`: odatapy names the singleton `Company(1)/…` in the context of its
# properties, where the context URL rules (and the gateway) say `Company/Headquarters`.
SHOP_QUERIES_NO_CONTEXT = [
    "Company/Headquarters",
    "Company/Name",
]

# Offline, these are answered 501 (not silently): the mirror cannot tell.
SHOP_501 = [
    "Products?$index=1",
    "People?$expand=Shop.Model.Employee/Manager($levels=max)",
]

# $apply: compared by value (the gateway writes the aggregation extension's `@odata.id: null` and
# `Set(Columns)` context; odatapy writes neither).
SHOP_APPLY = [
    "Products?$apply=aggregate(Price with sum as Total)",
    "Products?$apply=groupby((Status),aggregate($count as Count))",
    "Products?$apply=groupby((Discontinued),aggregate(Price with max as Top))",
    "Products?$apply=filter(Price gt 100)/aggregate($count as N)",
    "Products?$apply=groupby((Status,Discontinued))",
]


SHOP_DEFINING = {"people": "People", "products": "Products", "orders": "Orders", "company": "Company"}


def shop_config(root: str, defining: dict[str, str] = SHOP_DEFINING) -> dict:
    """The Shop service under `SHOP`, with `defining` requests (name: query)."""
    return {
        "odata": {
            "services": {
                "shop": {
                    "mount": SHOP,
                    "upstream": root,
                    "timeout": "3s",
                    "definingRequests": [{"name": n, "query": q} for n, q in defining.items()],
                }
            }
        }
    }


def ask(gw, target: str, headers: dict | None = None, mount: str = SHOP):
    path, _, query = target.partition("?")
    # `$count` and `$value` are text/plain (odatapy answers 406 to them under Accept: application/json).
    h = {"Accept": "text/plain" if path.endswith(("/$count", "/$value")) else "application/json"}
    h.update(headers or {})
    url = gw.url(mount + quote(path, safe="/()',=$")) + ("?" + quote(query, safe="=&$/(),'*:") if query else "")
    return requests.get(url, headers=h, timeout=10)


def parsed(r):
    if r.headers.get("Content-Type", "").startswith("application/json"):
        return r.json()
    return r.text


def sorted_values(doc):
    items = doc.get("value", []) if isinstance(doc, dict) else []
    return sorted((json.dumps({k: v for k, v in i.items() if k != "@odata.id"}, sort_keys=True) for i in items))


def test_v4_offline_answers_equal_the_upstreams(gateway_factory):
    up = ShopUpstream(port=0).start()
    try:
        # odatapy gives an entity its ETag the first time it is read alone: read every query once
        # before the gateway downloads, so that the mirror holds the ETags the online answers carry.
        for q in SHOP_QUERIES:
            path, _, query = q.partition("?")
            requests.get(up.root.rstrip("/") + "/" + path, params=query or None, timeout=10)
        gw = gateway_factory(shop_config(up.root))
        wait_downloaded(gw, "shop")
        online = {}
        for q in SHOP_QUERIES + SHOP_QUERIES_NO_CONTEXT + SHOP_APPLY:
            r = ask(gw, q)
            assert r.status_code == 200, (q, r.status_code, r.text)
            assert r.headers["X-Mirrorgate-Origin"] == "remote", q
            online[q] = parsed(r)
    finally:
        up.stop()
    mismatches = []
    for q in SHOP_QUERIES:
        r = ask(gw, q)
        if r.status_code != 200 or r.headers.get("X-Mirrorgate-Origin") != "local":
            mismatches.append((q, r.status_code, r.text[:300]))
            continue
        if parsed(r) != online[q]:
            mismatches.append((q, "online", online[q], "offline", parsed(r)))
    for q in SHOP_QUERIES_NO_CONTEXT:
        r = ask(gw, q)
        expected = {k: v for k, v in online[q].items() if k != "@odata.context"}
        if r.status_code != 200 or {k: v for k, v in r.json().items() if k != "@odata.context"} != expected:
            mismatches.append((q, r.status_code, r.text[:300], online[q]))
    for q in SHOP_APPLY:
        r = ask(gw, q)
        if r.status_code != 200 or sorted_values(r.json()) != sorted_values(online[q]):
            mismatches.append((q, r.status_code, r.text[:300], online[q]))
    for q in SHOP_501:
        r = ask(gw, q)
        if r.status_code != 501 or "error" not in r.json():
            mismatches.append((q, "expected 501", r.status_code, r.text[:200]))
    assert not mismatches, "\n".join(map(str, mismatches))
    assert len(SHOP_QUERIES) + len(SHOP_QUERIES_NO_CONTEXT) + len(SHOP_APPLY) >= 80


SO = "/odata/so/"
BP = "/odata/bp/"
SAP_SO_ROOT = "/sap/opu/odata/sap/API_SALES_ORDER_SRV/"
SAP_BP_ROOT = "/sap/opu/odata/sap/API_BUSINESS_PARTNER_SRV/"

SO_QUERIES = [
    "A_SalesOrder",
    "A_SalesOrder('0000004712')",
    "A_SalesOrder?$top=3&$skip=2",
    "A_SalesOrder?$inlinecount=allpages&$top=2",
    "A_SalesOrder?$select=SalesOrderType,TotalNetAmount",
    "A_SalesOrder?$select=SoldToParty,to_Item",
    "A_SalesOrder('0000004712')?$select=TransactionCurrency",
    "A_SalesOrder?$filter=TotalNetAmount gt 10000M",
    "A_SalesOrder?$filter=TotalNetAmount le 5000.5M&$orderby=TotalNetAmount desc",
    "A_SalesOrder?$orderby=TotalNetAmount,SalesOrder",
    "A_SalesOrder?$filter=SalesOrderDate ge datetime'2025-08-01T00:00:00'",
    "A_SalesOrder?$filter=SalesOrderDate lt datetime'2025-06-01T00:00'&$select=SalesOrder,SalesOrderDate",
    "A_SalesOrder?$filter=OverallSDProcessStatus eq 'A' and TransactionCurrency eq 'EUR'",
    "A_SalesOrder?$filter=substringof('PO-5',PurchaseOrderByCustomer)",
    "A_SalesOrder?$filter=startswith(SoldToParty,'100') eq true",
    "A_SalesOrder?$filter=CustomerPurchaseOrderDate eq null",
    "A_SalesOrder?$expand=to_Item",
    "A_SalesOrder('0000004712')?$expand=to_Item",
    "A_SalesOrder('0000004712')/to_Item",
    "A_SalesOrder('0000004712')/to_Item/$count",
    "A_SalesOrder/$count",
    "A_SalesOrder/$count?$filter=TotalNetAmount gt 10000M",
    "A_SalesOrder('0000004712')/TotalNetAmount",
    "A_SalesOrder('0000004712')/SalesOrderDate/$value",
    "A_SalesOrderItem",
    "A_SalesOrderItem(SalesOrder='0000004712',SalesOrderItem='000010')",
    "A_SalesOrderItem?$select=Material",
    "A_SalesOrderItem?$select=Material,RequestedQuantity&$filter=RequestedQuantity gt 5M",
    "A_SalesOrderItem?$orderby=NetAmount desc,SalesOrder,SalesOrderItem&$top=5",
    "A_SalesOrderItem?$inlinecount=allpages&$filter=SalesOrder eq '0000004712'",
]

BP_QUERIES = [
    "A_BusinessPartner",
    "A_BusinessPartner('1000001')",
    "A_BusinessPartner?$filter=BusinessPartnerCategory eq '2'",
    "A_BusinessPartner?$filter=BusinessPartnerIsBlocked eq false&$select=BusinessPartner,BusinessPartnerFullName",
    "A_BusinessPartner?$orderby=BusinessPartnerFullName desc",
    "A_BusinessPartner?$filter=CreationDate gt datetime'2021-01-01T00:00:00'",
    "A_BusinessPartner?$inlinecount=allpages&$top=1",
    "A_BusinessPartner?$select=SearchTerm1",
    "A_BusinessPartner/$count",
    "A_BusinessPartnerAddress",
    "A_BusinessPartnerAddress?$filter=Country eq 'DE'",
]


def sap_config(port: int) -> dict:
    origin = f"http://127.0.0.1:{port}"
    return {
        "odata": {
            "services": {
                "so": {
                    "mount": SO,
                    "upstream": origin + SAP_SO_ROOT,
                    "timeout": "3s",
                    "urlSuffix": "sap-client=100",
                    "definingRequests": [
                        {"name": "orders", "query": "A_SalesOrder"},
                        {"name": "items", "query": "A_SalesOrderItem"},
                    ],
                },
                "bp": {
                    "mount": BP,
                    "upstream": origin + SAP_BP_ROOT,
                    "timeout": "3s",
                    "definingRequests": [
                        {"name": "partners", "query": "A_BusinessPartner"},
                        {"name": "addresses", "query": "A_BusinessPartnerAddress"},
                    ],
                },
            }
        }
    }


def ask_sap(gw, mount: str, target: str, headers: dict | None = None):
    return ask(gw, target, headers, mount=mount)


def test_sap_v2_offline_answers_equal_the_upstreams(gateway_factory):
    port = free_port()
    proc = start_mock_sap(port, csrf=False)
    try:
        gw = gateway_factory(sap_config(port))
        wait_downloaded(gw, "so")
        wait_downloaded(gw, "bp")
        online = {}
        for mount, queries in ((SO, SO_QUERIES), (BP, BP_QUERIES)):
            for q in queries:
                r = ask_sap(gw, mount, q)
                assert r.status_code == 200, (q, r.status_code, r.text[:300])
                online[(mount, q)] = parsed(r)
        r = ask_sap(gw, SO, "A_SalesOrder?$top=1&sap-client=200")
        assert r.status_code == 400 and r.headers["X-Mirrorgate-Origin"] == "remote"
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    mismatches = []
    for (mount, q), expected in online.items():
        r = ask_sap(gw, mount, q)
        if r.status_code != 200 or r.headers.get("X-Mirrorgate-Origin") != "local":
            mismatches.append((mount, q, r.status_code, r.text[:300]))
        elif parsed(r) != expected:
            mismatches.append((mount, q, "online", expected, "offline", parsed(r)))
    assert not mismatches, "\n".join(map(str, mismatches))
    # Another client's request never gets the mirrored client's data.
    r = ask_sap(gw, SO, "A_SalesOrder?$top=1&sap-client=200")
    assert r.status_code == 503 and r.json()["error"]["code"] == "ClientNotMirrored", r.text
    r = ask_sap(gw, SO, "A_SalesOrder?$top=1", headers={"sap-client": "200"})
    assert r.status_code == 503
    r = ask_sap(gw, SO, "A_SalesOrder?$top=1&sap-client=100")
    assert r.status_code == 200 and len(r.json()["d"]["results"]) == 1
    assert len(SO_QUERIES) + len(BP_QUERIES) >= 40


ATOM = "{http://www.w3.org/2005/Atom}"
META = "{http://schemas.microsoft.com/ado/2007/08/dataservices/metadata}"
DATA = "{http://schemas.microsoft.com/ado/2007/08/dataservices}"


def test_sap_v2_atom_offline_reads_and_writes(gateway_factory):
    """mock-sap answers entity data in JSON only, so the offline Atom answers are checked against the
    offline JSON answers of the same mirror (same entities, same values), and an Atom MERGE made offline
    is read back in JSON."""
    from xml.etree import ElementTree as ET

    port = free_port()
    proc = start_mock_sap(port, csrf=False)
    try:
        gw = gateway_factory(sap_config(port))
        wait_downloaded(gw, "so")
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    as_json = ask_sap(gw, SO, "A_SalesOrder?$top=3&$select=SalesOrder,PurchaseOrderByCustomer")
    assert as_json.status_code == 200 and as_json.headers["X-Mirrorgate-Origin"] == "local", as_json.text
    rows = as_json.json()["d"]["results"]
    r = ask_sap(gw, SO, "A_SalesOrder?$top=3&$select=SalesOrder,PurchaseOrderByCustomer", {"Accept": "application/atom+xml"})
    assert r.status_code == 200 and r.headers["Content-Type"].startswith("application/atom+xml"), r.text[:300]
    feed = ET.fromstring(r.content)
    assert feed.tag == ATOM + "feed"
    entries = feed.findall(ATOM + "entry")
    assert len(entries) == len(rows) == 3
    for entry, row in zip(entries, rows):
        props = entry.find(ATOM + "content").find(META + "properties")
        assert props.find(DATA + "SalesOrder").text == row["SalesOrder"]
        assert (props.find(DATA + "PurchaseOrderByCustomer").text or "") == (row["PurchaseOrderByCustomer"] or "")
        assert entry.find(ATOM + "id").text == row["__metadata"]["id"]

    key = rows[0]["SalesOrder"]
    body = (
        '<?xml version="1.0" encoding="utf-8"?>'
        '<entry xmlns="http://www.w3.org/2005/Atom" '
        'xmlns:m="http://schemas.microsoft.com/ado/2007/08/dataservices/metadata" '
        'xmlns:d="http://schemas.microsoft.com/ado/2007/08/dataservices">'
        "<content type=\"application/xml\"><m:properties>"
        "<d:PurchaseOrderByCustomer>PO-ATOM-1</d:PurchaseOrderByCustomer>"
        "</m:properties></content></entry>"
    )
    url = gw.url(SO + f"A_SalesOrder('{key}')")
    r = requests.request("MERGE", url, data=body.encode(), headers={"Content-Type": "application/atom+xml"}, timeout=10)
    assert r.status_code == 204 and r.headers["X-Mirrorgate-Origin"] == "local", r.text
    r = ask_sap(gw, SO, f"A_SalesOrder('{key}')")
    assert r.json()["d"]["PurchaseOrderByCustomer"] == "PO-ATOM-1", r.text
    r = requests.request(
        "MERGE", url, data=b"<entry><unclosed", headers={"Content-Type": "application/atom+xml"}, timeout=10
    )
    assert r.status_code == 400 and "error" in r.json(), r.text
