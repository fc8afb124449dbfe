"""OData writes while the upstream answers (SPEC §4, issue 6): with the queue empty they are forwarded, and
then reflected in the mirror, so that a read answered locally later (the upstream gone) sees them without
waiting for the next download.

Upstream: odatapy's Northwind V4 (server-generated integer keys for Products).
"""

from __future__ import annotations

import json
import time

import requests
from odata_helpers import JSON_HEADERS
from store_crypto import open_store
from test_odata_offline import MOUNT, nw_config, wait_downloaded



def mirrored_products(db_path) -> dict:
    """ID → (name, price) of the mirrored rows, read from `_json` (the entity as received: typed columns
    hold ODataCore's sortable encodings, e.g. a Decimal as key text)."""
    con = open_store(db_path)
    try:
        out = {}
        for key, document in con.execute('SELECT "ProductID", "_json" FROM "Products"'):
            entity = json.loads(document)
            out[key] = (entity.get("ProductName"), entity.get("UnitPrice"))
        return out
    finally:
        con.close()


def test_forwarded_writes_are_reflected_in_the_mirror(gateway_factory, odata_upstream_no_etags, tmp_path):
    up = odata_upstream_no_etags
    config = nw_config(up.root)
    config["dataDir"] = str(tmp_path / "data")
    gw = gateway_factory(config)
    wait_downloaded(gw, "nw")

    r = requests.post(
        gw.url(MOUNT + "Products"),
        json={"ProductName": "Online Coffee", "UnitPrice": 7.25, "Discontinued": False},
        headers=JSON_HEADERS,
        timeout=10,
    )
    assert r.status_code == 201, r.text
    assert r.headers["X-Mirrorgate-Origin"] == "remote"
    created = r.json()["ProductID"]
    assert created > 0  # the server's key
    r = requests.patch(gw.url(MOUNT + "Products(2)"), json={"UnitPrice": 33}, headers=JSON_HEADERS, timeout=10)
    assert r.status_code == 204, r.text
    assert r.headers["X-Mirrorgate-Origin"] == "remote"
    r = requests.delete(gw.url(MOUNT + "Products(3)"), headers=JSON_HEADERS, timeout=10)
    assert r.status_code == 204, r.text

    # The mirror follows (the reflection runs after the answer): bounded wait on the mirror file itself.
    db = tmp_path / "data" / "odata-nw.sqlite"
    deadline = time.time() + 10
    rows = mirrored_products(db)
    while time.time() < deadline and not (created in rows and 3 not in rows and float(rows[2][1]) == 33):
        time.sleep(0.05)
        rows = mirrored_products(db)
    assert rows.get(created, (None,))[0] == "Online Coffee", rows
    assert float(rows[2][1]) == 33, rows
    assert 3 not in rows, rows

    up.stop()
    r = requests.get(gw.url(MOUNT + f"Products({created})"), headers={"Accept": "application/json"}, timeout=10)
    assert r.status_code == 200, r.text
    assert r.headers["X-Mirrorgate-Origin"] == "local"
    assert r.json()["ProductName"] == "Online Coffee" and float(r.json()["UnitPrice"]) == 7.25
    r = requests.get(gw.url(MOUNT + "Products(2)"), headers={"Accept": "application/json"}, timeout=10)
    assert r.headers["X-Mirrorgate-Origin"] == "local"
    assert float(r.json()["UnitPrice"]) == 33
    r = requests.get(gw.url(MOUNT + "Products(3)"), headers={"Accept": "application/json"}, timeout=10)
    assert r.status_code == 404
    r = requests.get(gw.url(MOUNT + "Products/$count"), timeout=10)
    assert r.text == "7"  # seven, one created, one deleted
    r = requests.get(
        gw.url(MOUNT + "Products?$filter=ProductName eq 'Online Coffee'"), headers={"Accept": "application/json"}, timeout=10
    )
    assert [p["ProductID"] for p in r.json()["value"]] == [created]
