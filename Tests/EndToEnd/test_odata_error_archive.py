"""ErrorArchive, held requests and revert (issue 6): with the upstream stopped, a write the upstream will reject
(a stale If-Match), a later write to the same entity and a write to another entity are queued; when the
upstream is back and the queue is uploaded, the rejected one is in the ErrorArchive (read under the service's
mount, and through the separate service `/_mirrorgate/odata/nw/` with its own `$metadata`, also with
python-odata), the later one is held, the other uploaded; deleting the archive entry removes the held one and
puts the upstream's entity back into the mirror. Also: `uploadIfMatch` and `uploadCredentials` as seen by the
upstream, the `mirrorgate upload` command, and the OData queue metrics.

Upstream: odatapy's Northwind V4 (ETags) with a request recorder.
"""

from __future__ import annotations

import json
import re
import time

import pytest
import requests
from harness import free_port, run_cli
from test_odata_offline import MOUNT, nw_config, wait_downloaded
from odata_helpers import JSON_HEADERS, request_upload, sap_orders_config, status_of, upstream_products

ARCHIVE = "/_mirrorgate/odata/nw/"


def wait_status(gw, done, timeout: float = 20) -> dict:
    deadline = time.time() + timeout
    s = status_of(gw)
    while time.time() < deadline and not done(s):
        time.sleep(0.1)
        s = status_of(gw)
    assert done(s), s
    return s


def upload(gw) -> None:
    st, _, body = request_upload(gw, timeout=30)
    assert st in (200, 409), body  # 409: the reachability tracker already started one


def metric(gw, name: str) -> float | None:
    r = requests.get(gw.url("/metrics"), timeout=10)
    assert r.status_code == 200
    m = re.search(r"^" + re.escape(name) + r'\{service="nw"\} (\S+)$', r.text, re.M)
    return float(m.group(1)) if m else None


def plain(entity: dict) -> dict:
    return {k: v for k, v in entity.items() if "@" not in k}


def local_get(gw, path: str):
    return requests.get(gw.url(MOUNT + path), headers={"Accept": "application/json"}, timeout=10)


def test_rejected_write_archived_later_held_other_uploaded_and_revert(gateway_factory, odata_upstream, tmp_path):
    from upstreams.odata_northwind import ODataUpstream

    up = odata_upstream
    config = nw_config(up.root)
    config["dataDir"] = str(tmp_path / "data")
    gw = gateway_factory(config)
    wait_downloaded(gw, "nw")
    original = upstream_products(up)
    up_metadata = requests.get(up.root + "$metadata", timeout=10).content
    up.stop()

    r = requests.patch(
        gw.url(MOUNT + "Products(2)"),
        json={"ProductName": "Stale Chang"},
        headers={**JSON_HEADERS, "If-Match": 'W/"stale"', "OfflineOData.CustomTag": "tag-1"},
        timeout=10,
    )
    assert r.status_code == 204, r.text
    r = requests.patch(gw.url(MOUNT + "Products(2)"), json={"UnitPrice": 99}, headers=JSON_HEADERS, timeout=10)
    assert r.status_code == 204, r.text
    r = requests.patch(gw.url(MOUNT + "Products(5)"), json={"UnitPrice": 55}, headers=JSON_HEADERS, timeout=10)
    assert r.status_code == 204, r.text

    # The queue as an entity set under the mount (the upstream has no RequestQueue).
    r = local_get(gw, "RequestQueue")
    assert r.status_code == 200, r.text
    queued = r.json()["value"]
    assert [(q["RequestMethod"], q["RequestURL"], q["Held"]) for q in queued] == [
        ("PATCH", "Products(2)", False),
        ("PATCH", "Products(2)", False),
        ("PATCH", "Products(5)", False),
    ]
    assert json.loads(queued[0]["RequestBody"]) == {"ProductName": "Stale Chang"}
    assert [q["CustomTag"] for q in queued] == ["tag-1", None, None]
    assert "authorization" not in json.dumps(queued).lower()
    r = local_get(gw, "RequestQueue?$filter=RequestURL eq 'Products(5)'&$count=true")
    assert r.json()["@odata.count"] == 1 and r.json()["value"][0]["RequestURL"] == "Products(5)"

    up2 = ODataUpstream(port=up.port, page_size=5, etags=True).start()
    try:
        upload(gw)
        s = wait_status(gw, lambda s: s["errorArchive"] == 1 and s["held"] == 1 and s["pendingRequests"] == 1)
        assert s["inDoubt"] == 0
        patches = sorted(rec.path.rsplit("/", 1)[1] for rec in up2.records if rec.method == "PATCH")
        assert patches == ["Products(2)", "Products(5)"], patches
        assert upstream_products(up2)[5]["UnitPrice"] in (55, "55", 55.0)
        assert plain(upstream_products(up2)[2]) == plain(original[2])  # the held change never reached it

        # The ErrorArchive under the mount.
        r = local_get(gw, "ErrorArchive")
        assert r.status_code == 200, r.text
        assert r.headers["X-Mirrorgate-Origin"] == "local"
        entries = r.json()["value"]
        assert len(entries) == 1, entries
        e = entries[0]
        assert e["HTTPStatusCode"] == 412, e
        assert e["RequestMethod"] == "PATCH" and e["RequestURL"] == "Products(2)"
        assert json.loads(e["RequestBody"]) == {"ProductName": "Stale Chang"}
        assert e["Domain"] == "upstream" and e["CustomTag"] == "tag-1"
        assert e["AffectedEntity@odata.navigationLink"] == gw.url(MOUNT + "Products(2)")
        request_id = e["RequestID"]
        assert local_get(gw, "ErrorArchive?$filter=HTTPStatusCode eq 412&$count=true").json()["@odata.count"] == 1
        assert local_get(gw, "ErrorArchive?$filter=HTTPStatusCode eq 400").json()["value"] == []
        assert local_get(gw, "ErrorArchive?$top=0").json()["value"] == []
        sel = local_get(gw, "ErrorArchive?$select=RequestID,HTTPStatusCode").json()["value"][0]
        assert set(sel) == {"RequestID", "HTTPStatusCode"}, sel
        assert local_get(gw, "ErrorArchive/$count").text == "1"
        one = local_get(gw, f"ErrorArchive('{request_id}')")
        assert one.status_code == 200 and one.json()["RequestID"] == request_id
        assert local_get(gw, "ErrorArchive('nope')").status_code == 404
        bad = local_get(gw, "ErrorArchive?$filter=NoSuchProperty eq 1")
        assert bad.status_code == 400 and "error" in bad.json()

        for bad_path in [
            "ErrorArchive?$top=-1",
            "ErrorArchive?$skip=x",
            "ErrorArchive('%ZZ')",
            "ErrorArchive(1)",
            "ErrorArchive/RequestID",
            "ErrorArchive?$filter=" + "(" * 300,
            "ErrorArchive?$orderby=Nope",
            "RequestQueue('x')/$value",
        ]:
            bad = local_get(gw, bad_path)
            assert 400 <= bad.status_code < 500 and "error" in bad.json(), (bad_path, bad.status_code, bad.text)
        r = requests.post(gw.url(MOUNT + "ErrorArchive"), json={}, headers=JSON_HEADERS, timeout=10)
        assert r.status_code == 405 and "error" in r.json()

        held = local_get(gw, "RequestQueue").json()["value"]
        assert [(q["RequestURL"], q["Held"], q["HeldBy"]) for q in held] == [("Products(2)", True, request_id)]

        # Online writes while a request is held: queued behind it (same entity: held too; another: uploaded).
        r = requests.patch(gw.url(MOUNT + "Products(2)"), json={"UnitPrice": 98}, headers=JSON_HEADERS, timeout=10)
        assert r.status_code == 204 and r.headers["X-Mirrorgate-Origin"] == "local", r.text
        r = requests.patch(gw.url(MOUNT + "Products(6)"), json={"UnitPrice": 66}, headers=JSON_HEADERS, timeout=10)
        assert r.status_code == 204, r.text
        s = wait_status(gw, lambda s: s["held"] == 2 and s["pendingRequests"] == 2)
        assert float(upstream_products(up2)[6]["UnitPrice"]) == 66
        assert plain(upstream_products(up2)[2]) == plain(original[2])

        # The service's own $metadata stays the upstream's.
        assert requests.get(gw.url(MOUNT + "$metadata"), timeout=10).content == up_metadata

        # The separate service with its own $metadata (admin token rules apply).
        r = requests.get(gw.url(ARCHIVE + "$metadata"), headers=gw.admin_headers(), timeout=10)
        assert r.status_code == 200 and all(t in r.text for t in ("ErrorArchiveEntry", "RequestQueueEntry", "EventLogEntry"))
        assert 'Name="HTTPStatusCode"' in r.text and 'Version="4.0"' in r.text
        r = requests.get(gw.url(ARCHIVE), headers={**gw.admin_headers(), "Accept": "application/json"}, timeout=10)
        assert {x["name"] for x in r.json()["value"]} == {"ErrorArchive", "RequestQueue", "EventLog"}
        r = requests.get(
            gw.url(ARCHIVE + "ErrorArchive"), headers={**gw.admin_headers(), "Accept": "application/json"}, timeout=10
        )
        assert [x["RequestID"] for x in r.json()["value"]] == [request_id]
        assert r.json()["@odata.context"] == gw.url(ARCHIVE + "$metadata#ErrorArchive")

        # python-odata reads the separate service from its $metadata.
        from odata import ODataService

        session = requests.Session()
        session.headers.update(gw.admin_headers())
        svc = ODataService(gw.url(ARCHIVE), session=session, reflect_entities=True, quiet_progress=True)
        Entry = svc.entities["ErrorArchive"]
        got = svc.query(Entry).all()
        assert [(x.RequestID, x.HTTPStatusCode, x.RequestURL) for x in got] == [(request_id, 412, "Products(2)")]

        # Metrics.
        assert metric(gw, "mirrorgate_odata_queue_length") == 2
        assert metric(gw, "mirrorgate_odata_held") == 2
        assert metric(gw, "mirrorgate_odata_error_archive") == 1
        assert metric(gw, "mirrorgate_odata_in_doubt") == 0
        assert metric(gw, "mirrorgate_odata_uploaded_total") == 2
        assert metric(gw, "mirrorgate_odata_upload_failures_total") == 1

        table = run_cli(["status", "--config", str(gw.config_path)], timeout=30)
        assert table.returncode == 0 and "ERROR ARCHIVE" in table.stdout, table.stderr
        row = next(line for line in table.stdout.splitlines() if line.startswith("nw "))
        # reachable, pending, held, waiting for credentials, in doubt, archived
        assert row.split()[1:7] == ["yes", "2", "2", "0", "0", "1"], row

        # Revert: the held request goes, the mirror gets the upstream's entity back.
        r = requests.delete(gw.url(MOUNT + "ErrorArchive('nope')"), timeout=10)
        assert r.status_code == 404 and "error" in r.json()
        r = requests.delete(gw.url(MOUNT + f"ErrorArchive('{request_id}')"), timeout=10)
        assert r.status_code == 204, r.text
        s = status_of(gw)
        assert (s["errorArchive"], s["held"], s["pendingRequests"]) == (0, 0, 0), s
        assert local_get(gw, "RequestQueue").json()["value"] == []
        assert local_get(gw, "ErrorArchive").json()["value"] == []
        assert metric(gw, "mirrorgate_odata_queue_length") == 0
        wait_status(gw, lambda s: not s["downloading"])
        events = local_get(gw, "EventLog?$filter=Type eq 'ErrorArchiveDeletion'").json()["value"]
        assert len(events) == 1 and request_id in events[0]["Details"], events
        uploads = local_get(gw, "EventLog?$filter=Type eq 'Upload'").json()["value"]
        assert any(json.loads(u["Details"])["failed"] == 1 for u in uploads), uploads
        assert local_get(gw, f"EventLog({events[0]['ID']})").json()["Type"] == "ErrorArchiveDeletion"
        writes = [rec.method for rec in up2.records if rec.method in ("POST", "PATCH", "PUT", "DELETE")]
        assert len(writes) == 3, writes  # nothing more was sent
    finally:
        up2.stop()
    # Offline again: the mirror answers with the upstream's state of Products(2).
    r = local_get(gw, "Products(2)")
    assert r.status_code == 200 and r.headers["X-Mirrorgate-Origin"] == "local"
    got = r.json()
    assert got["ProductName"] == original[2]["ProductName"] and float(got["UnitPrice"]) == float(
        original[2]["UnitPrice"]
    )


@pytest.mark.parametrize("if_match,credentials", [("star", "service"), ("none", "client")])
def test_upload_if_match_and_credentials(gateway_factory, odata_upstream, tmp_path, if_match, credentials):
    from upstreams.odata_northwind import ODataUpstream

    up = odata_upstream
    config = nw_config(
        up.root,
        uploadIfMatch=if_match,
        uploadCredentials=credentials,
        customHeaders={"X-Service-Key": "svc-1"},
    )
    config["dataDir"] = str(tmp_path / "data")
    gw = gateway_factory(config)
    wait_downloaded(gw, "nw")
    up.stop()
    r = requests.patch(
        gw.url(MOUNT + "Products(4)"),
        json={"UnitPrice": 44},
        headers={**JSON_HEADERS, "Authorization": "Basic d3JpdGVyOnNlY3JldA==", "Cookie": "sid=writer-1"},
        timeout=10,
    )
    assert r.status_code == 204, r.text
    from store_crypto import open_store

    db = open_store(tmp_path / "data" / "odata-nw.sqlite")
    try:
        stored = db.execute('SELECT authorization FROM "_mg_queue"').fetchall()
        cookies = db.execute('SELECT cookie FROM "_mg_cookie"').fetchall()
    finally:
        db.close()
    if credentials == "service":  # the writer's credentials are not even stored
        assert stored == [(None,)] and cookies == []
    else:
        assert stored == [("Basic d3JpdGVyOnNlY3JldA==",)] and cookies == [("sid=writer-1",)]
    up2 = ODataUpstream(port=up.port, page_size=5, etags=True).start()
    try:
        upload(gw)
        wait_status(gw, lambda s: s["pendingRequests"] == 0)
        db = open_store(tmp_path / "data" / "odata-nw.sqlite")
        try:
            assert db.execute('SELECT COUNT(*) FROM "_mg_cookie"').fetchone() == (0,)  # gone once uploaded
        finally:
            db.close()
        patches = [rec for rec in up2.records if rec.method == "PATCH"]
        assert len(patches) == 1, patches
        h = patches[0].headers
        assert h.get("X-Service-Key") == "svc-1"
        if credentials == "service":
            assert "Authorization" not in h
            assert "writer-1" not in h.get("Cookie", "")
        else:
            assert h.get("Authorization") == "Basic d3JpdGVyOnNlY3JldA=="
            assert "sid=writer-1" in h.get("Cookie", "")
        if if_match == "star":
            assert h.get("If-Match") == "*"
            assert upstream_products(up2)[4]["UnitPrice"] in (44, "44", 44.0)
        else:
            assert "If-Match" not in h
        assert "writer-1" not in gw.stderr() and "d3JpdGVy" not in gw.stderr()
    finally:
        up2.stop()


def test_upload_command(gateway_factory, odata_upstream, tmp_path):
    from upstreams.odata_northwind import ODataUpstream

    up = odata_upstream
    config = nw_config(up.root)
    config["dataDir"] = str(tmp_path / "data")
    gw = gateway_factory(config)
    wait_downloaded(gw, "nw")

    def cli(*args):
        return run_cli(["upload", "--config", str(gw.config_path), *args], timeout=60)

    done = cli()
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("nw: 0 uploaded, 0 failed, 0 in doubt, 0 remaining"), done.stdout
    bad = cli("nosuch")
    assert bad.returncode == 2 and "nosuch" in bad.stderr

    up.stop()
    r = requests.patch(gw.url(MOUNT + "Products(3)"), json={"UnitPrice": 33}, headers=JSON_HEADERS, timeout=10)
    assert r.status_code == 204, r.text
    offline = cli("nw")
    assert offline.returncode == 1 and "503" in offline.stderr, (offline.stdout, offline.stderr)

    up2 = ODataUpstream(port=up.port, page_size=5, etags=True).start()
    try:
        # The tracker may upload first (then the command finds an empty queue, or one run in progress).
        deadline = time.time() + 20
        out = cli("nw")
        while time.time() < deadline and out.returncode != 0:
            time.sleep(0.2)
            out = cli("nw")
        assert out.returncode == 0, (out.stdout, out.stderr)
        assert re.match(r"nw: [01] uploaded, 0 failed, 0 in doubt, 0 remaining", out.stdout), out.stdout
        assert upstream_products(up2)[3]["UnitPrice"] in (33, "33", 33.0)
    finally:
        up2.stop()
    # No gateway listening: exit 1 with a clear message.
    elsewhere = tmp_path / "elsewhere.yaml"
    elsewhere.write_text(gw.config_path.read_text().replace(f"127.0.0.1:{gw.port}", f"127.0.0.1:{free_port()}"))
    unreachable = run_cli(["upload", "--config", str(elsewhere)], timeout=60)
    assert unreachable.returncode == 1 and unreachable.stderr.strip(), unreachable.stderr


def test_pyodata_reads_the_v2_archive_service(gateway_factory, tmp_path):
    import pyodata
    from harness import free_port
    from test_odata_offline import SAP_ROOT
    from test_odata_writes import _mock_sap_on

    port = free_port()
    sap = _mock_sap_on(port)
    root = f"http://127.0.0.1:{port}{SAP_ROOT}"
    try:
        gw = gateway_factory(sap_orders_config(root, tmp_path))
        wait_downloaded(gw, "gw")
        order = requests.get(root + "SalesOrderSet?$top=1", headers={"Accept": "application/json"}).json()["d"][
            "results"
        ][0]["SalesOrderID"]
        sap.kill()
        sap.wait(timeout=5)
        r = requests.request(
            "MERGE",
            gw.url(f"/odata/gw/SalesOrderSet('{order}')"),
            json={"Note": "queued v2"},
            headers=JSON_HEADERS,
            timeout=10,
        )
        assert r.status_code == 204, r.text

        # Raw V2 verbose JSON under the mount.
        r = requests.get(gw.url("/odata/gw/RequestQueue?$inlinecount=allpages"), headers={"Accept": "application/json"})
        assert r.status_code == 200, r.text
        d = r.json()["d"]
        assert d["__count"] == "1"
        assert d["results"][0]["RequestMethod"] == "MERGE"
        assert d["results"][0]["__metadata"]["type"] == "Mirrorgate.RequestQueueEntry"
        assert isinstance(d["results"][0]["ID"], str)  # Edm.Int64 in V2 JSON

        # The separate service: V2 EDMX read by pyodata.
        session = requests.Session()
        session.headers.update(gw.admin_headers())
        meta = session.get(gw.url("/_mirrorgate/odata/gw/$metadata"), timeout=10)
        assert meta.status_code == 200 and 'm:DataServiceVersion="2.0"' in meta.text
        client = pyodata.Client(gw.url("/_mirrorgate/odata/gw/"), session)
        queued = client.entity_sets.RequestQueue.get_entities().execute()
        assert [(q.RequestMethod, q.RequestURL, q.Held) for q in queued] == [
            ("MERGE", f"SalesOrderSet('{order}')", False)
        ]
        assert client.entity_sets.ErrorArchive.get_entities().execute() == []
        one = client.entity_sets.RequestQueue.get_entity(queued[0].RequestID).execute()
        assert one.EntitySet == "SalesOrderSet"
    finally:
        if sap.poll() is None:
            sap.kill()
        sap.wait(timeout=5)
