"""Issue 15, item 4: V2 Atom entry bodies (`Content-Type: application/atom+xml`, SAP Gateway's default
format) written offline — POST and PUT of an entry, and POST/MERGE inside a `$batch` changeset — against
mock-sap's GWSAMPLE_BASIC, read back from the mirror, then uploaded when mock-sap is back and read from
mock-sap itself (each once). mock-sap takes JSON bodies only; the gateway uploads an Atom write as the V2
JSON it applied to the mirror, which SAP Gateway accepts as well.
"""

from __future__ import annotations

from xml.etree import ElementTree
from xml.sax.saxutils import escape

import requests
from harness import free_port
from odata_helpers import SAP_ROOT, sap_orders_config, start_mock_sap, status_of, upload_and_wait
from test_odata_offline import wait_downloaded

ACCEPT = {"Accept": "application/json"}
ATOM = {"Content-Type": "application/atom+xml", "Accept": "application/json"}
MOUNT = "/odata/gw/"


def entry(**props: str) -> str:
    body = "".join(f"<d:{k}>{escape(v)}</d:{k}>" for k, v in props.items())
    return (
        '<?xml version="1.0" encoding="utf-8"?>'
        '<entry xmlns="http://www.w3.org/2005/Atom" '
        'xmlns:m="http://schemas.microsoft.com/ado/2007/08/dataservices/metadata" '
        'xmlns:d="http://schemas.microsoft.com/ado/2007/08/dataservices">'
        '<category term="GWSAMPLE_BASIC.SalesOrder" scheme="http://schemas.microsoft.com/ado/2007/08/dataservices/scheme"/>'
        f'<content type="application/xml"><m:properties>{body}</m:properties></content></entry>'
    )


def atom_part(method: str, url: str, cid: str, body: str) -> str:
    return (
        "Content-Type: application/http\r\nContent-Transfer-Encoding: binary\r\n"
        f"Content-ID: {cid}\r\n\r\n{method} {url} HTTP/1.1\r\nContent-Type: application/atom+xml\r\n"
        f"Accept: application/json\r\n\r\n{body}\r\n"
    )


def test_v2_atom_writes_offline_are_read_back_and_uploaded(gateway_factory, tmp_path):
    port = free_port()
    sap = start_mock_sap(port, csrf=False)
    root = f"http://127.0.0.1:{port}{SAP_ROOT}"
    try:
        gw = gateway_factory(sap_orders_config(root, tmp_path))
        wait_downloaded(gw, "gw")
        orders = requests.get(root + "SalesOrderSet?$orderby=SalesOrderID", headers=ACCEPT, timeout=10).json()
        ids = [o["SalesOrderID"] for o in orders["d"]["results"]]
        sap.kill()
        sap.wait(timeout=5)
        url = gw.url(MOUNT)

        r = requests.post(
            url + "SalesOrderSet",
            data=entry(CustomerID="0100000000", CurrencyCode="EUR", Note="atom post").encode(),
            headers=ATOM,
            timeout=10,
        )
        assert r.status_code == 201 and r.headers["X-Mirrorgate-Origin"] == "local", r.text
        local_id = r.json()["d"]["SalesOrderID"]
        assert local_id.startswith("local-")
        # A client that sends Atom and asks for Atom (SAP Gateway's default) gets the created entry in Atom.
        r = requests.post(
            url + "SalesOrderSet",
            data=entry(CustomerID="0100000003", CurrencyCode="CHF", Note="atom post 2").encode(),
            headers={"Content-Type": "application/atom+xml", "Accept": "application/atom+xml"},
            timeout=10,
        )
        assert r.status_code == 201 and r.headers["Content-Type"].startswith("application/atom+xml"), r.text
        created = ElementTree.fromstring(r.content)
        assert created.tag == "{http://www.w3.org/2005/Atom}entry", r.text
        assert created.find("{http://www.w3.org/2005/Atom}id").text == r.headers["Location"]
        assert "<d:Note>atom post 2</d:Note>" in r.text, r.text
        r = requests.put(
            url + f"SalesOrderSet('{ids[0]}')",
            data=entry(CustomerID="0100000001", CurrencyCode="USD", Note="atom put").encode(),
            headers=ATOM,
            timeout=10,
        )
        assert r.status_code == 204, r.text
        batch = (
            "--batch\r\nContent-Type: multipart/mixed; boundary=cs\r\n\r\n"
            + "--cs\r\n"
            + atom_part("POST", "SalesOrderSet", "1", entry(CustomerID="0100000002", CurrencyCode="EUR", Note="atom batch"))
            + "--cs\r\n"
            + atom_part("MERGE", f"SalesOrderSet('{ids[2]}')", "2", entry(Note="atom merge"))
            + "--cs--\r\n--batch--\r\n"
        )
        r = requests.post(
            url + "$batch", data=batch.encode(), headers={"Content-Type": "multipart/mixed; boundary=batch"}, timeout=10
        )
        assert r.status_code == 202 and r.headers["X-Mirrorgate-Origin"] == "local", r.text
        assert "HTTP/1.1 201" in r.text and "HTTP/1.1 204" in r.text, r.text

        # Read-your-writes (JSON and Atom).
        def note(key: str) -> str:
            r = requests.get(url + f"SalesOrderSet('{key}')", headers=ACCEPT, timeout=10)
            assert r.status_code == 200 and r.headers["X-Mirrorgate-Origin"] == "local", r.text
            return r.json()["d"]["Note"]

        assert note(local_id) == "atom post"
        assert note(ids[0]) == "atom put"
        assert note(ids[2]) == "atom merge"
        r = requests.get(url + f"SalesOrderSet('{ids[0]}')", headers={"Accept": "application/atom+xml"}, timeout=10)
        assert r.status_code == 200 and "<d:Note>atom put</d:Note>" in r.text, r.text
        r = requests.get(url + "SalesOrderSet?$filter=Note eq 'atom batch'", headers=ACCEPT, timeout=10)
        assert len(r.json()["d"]["results"]) == 1, r.text
        assert status_of(gw, "gw")["pendingRequests"] == 5

        sap = start_mock_sap(port, csrf=False)  # fresh data, same port
        upload_and_wait(gw, "gw")

        def upstream(path: str) -> dict:
            r = requests.get(root + path, headers=ACCEPT, timeout=10)
            assert r.status_code == 200, r.text
            return r.json()["d"]

        for text in ("atom post", "atom post 2", "atom batch"):
            found = upstream(f"SalesOrderSet?$filter=Note eq '{text}'")["results"]
            assert len(found) == 1 and not found[0]["SalesOrderID"].startswith("local-"), found
        put = upstream(f"SalesOrderSet('{ids[0]}')")
        assert (put["Note"], put["CustomerID"], put["CurrencyCode"]) == ("atom put", "0100000001", "USD")
        assert upstream(f"SalesOrderSet('{ids[2]}')")["Note"] == "atom merge"
    finally:
        if sap.poll() is None:
            sap.kill()
        sap.wait(timeout=5)
