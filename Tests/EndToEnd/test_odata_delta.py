"""Delta downloads (issue 16 item 5) against a change-tracking upstream of our own on loopback
(upstreams/odata_delta.py), in V4 style (`Prefer: odata.track-changes`, `@odata.deltaLink`, `@removed` or
`$deletedEntity` entries) and SAP V2 style (`__delta` with `!deltatoken`, `__metadata.deleted` tombstones or a
`d.__deleted` list).

One scenario per style: the first download is full and asks for change tracking; local changes wait in the
queue (`routing: localFirst`) while the upstream changes the same and other entities; the next download
reads only the delta link — the upstream's updates, creations and deletions arrive, the pending local
update and delete win (never hidden, never resurrected); after the upload and the download that follows,
the mirror equals the upstream; an expired link (410) falls back to a full read; after `kill -9` and a
restart the stored link is used again.
"""

from __future__ import annotations

import json
import time

import pytest
import requests
from harness import request, run_cli
from odata_helpers import JSON_HEADERS, SAP_ROOT, kill_and_restart, status_of, upload_and_wait, wait_idle
from test_odata_offline import wait_downloaded
from upstreams.odata_delta import DeltaUpstream

MOUNT = "/odata/dl/"


def config(root: str, tmp_path) -> dict:
    return {
        "dataDir": str(tmp_path / "data"),
        "odata": {
            "services": {
                "dl": {
                    "mount": MOUNT,
                    "upstream": root,
                    "timeout": "2s",
                    "routing": "localFirst",
                    "definingRequests": [{"name": "items", "query": "Items"}],
                }
            }
        },
    }


def download(gw) -> dict:
    """`POST …/download?wait=true` (again while another download runs: bounded); the download's figures."""
    deadline = time.time() + 30
    while True:
        st, _, body = request(
            "POST", gw.url("/_mirrorgate/odata/services/dl/download?wait=true"), headers=gw.admin_headers(),
            timeout=30,
        )
        if st != 409 or time.time() > deadline:
            break
        time.sleep(0.1)
    assert st == 200, body
    return json.loads(body)


def settle(gw) -> None:
    """Until no upload or download runs (the upload at start and after reconnecting starts a download when it
    leaves the queue empty): three quiet looks in a row, bounded."""
    deadline = time.time() + 30
    quiet = 0
    while quiet < 3:
        assert time.time() < deadline, status_of(gw, "dl")
        s = status_of(gw, "dl")
        quiet = quiet + 1 if not s["uploading"] and not s["downloading"] else 0
        time.sleep(0.2)


def local_items(gw) -> dict[int, dict]:
    """Every entity of the gateway's local `Items` (following its next links, bounded), by ID."""
    url = gw.url(MOUNT + "Items")
    items: dict[int, dict] = {}
    for _ in range(100):
        r = requests.get(url, headers={"Accept": "application/json"}, timeout=10)
        assert r.status_code == 200 and r.headers["X-Mirrorgate-Origin"] == "local", r.text
        doc = r.json()
        page = doc["d"]["results"] if "d" in doc else doc["value"]
        for e in page:
            items[int(e["ID"])] = {"ID": int(e["ID"]), "Name": e["Name"], "Qty": e["Qty"]}
        nxt = doc["d"].get("__next") if "d" in doc else doc.get("@odata.nextLink")
        if not nxt:
            return items
        url = nxt
    raise AssertionError("more than 100 local pages")


def write(gw, method: str, path: str, body: dict | None = None) -> requests.Response:
    return requests.request(method, gw.url(MOUNT + path), json=body, headers=JSON_HEADERS, timeout=10)


STYLES = [
    pytest.param({"version": 4}, id="v4-removed"),
    pytest.param({"version": 4, "deleted_entity_style": "4.0"}, id="v4-deletedEntity"),
    pytest.param({"version": 2}, id="v2-tombstones"),
    pytest.param({"version": 2, "v2_deleted_list": True}, id="v2-deleted-list"),
]


@pytest.mark.parametrize("style", STYLES)
def test_delta_downloads_with_pending_local_changes(gateway_factory, tmp_path, style):
    up = DeltaUpstream(**style).start()
    try:
        cfg = config(up.root, tmp_path)
        gw = gateway_factory(cfg, name="gw")
        wait_downloaded(gw, "dl")
        wait_idle(gw, service="dl")
        settle(gw)
        first = status_of(gw, "dl")["lastDownload"]
        assert first["kind"] in ("full", "delta"), first  # the start's download, maybe a delta after it
        assert first["kind"] == "delta" or first["changed"] == 8, first
        assert any("odata.track-changes" in prefer for p, prefer in up.seen() if p.startswith("/svc/Items")), up.seen()
        assert local_items(gw) == up.state()

        # Local changes queued (localFirst), then the upstream changes the same and other entities.
        update = "MERGE" if style["version"] == 2 else "PATCH"
        assert write(gw, update, "Items(4)", {"Name": "local 4"}).status_code == 204
        assert write(gw, "DELETE", "Items(5)").status_code == 204
        assert write(gw, "POST", "Items", {"ID": 20, "Name": "local 20", "Qty": 1}).status_code == 201
        up.update(2, Name="server 2")
        up.delete(3)
        up.create(9, "server 9")
        up.update(4, Qty=40)
        up.update(5, Name="server 5")
        seen = len(up.seen())
        result = download(gw)
        assert result["kind"] == "delta", result
        items = result["requests"]["items"]
        assert (items["changed"], items["removed"], items["keptLocal"]) == (2, 1, 2), result
        gets = [p for p, _ in up.seen()[seen:] if p.startswith("/svc/Items")]
        assert gets and all("deltatoken" in p for p in gets), gets  # only the delta link was read
        local = local_items(gw)
        assert local[2]["Name"] == "server 2" and 3 not in local and local[9]["Name"] == "server 9"
        assert local[4] == {"ID": 4, "Name": "local 4", "Qty": 4}  # the pending update wins
        assert 5 not in local  # the pending delete is not undone by the upstream's change
        assert local[20]["Name"] == "local 20"
        s = status_of(gw, "dl")
        assert s["pendingRequests"] == 3 and s["lastDownload"]["kind"] == "delta", s
        table = run_cli(["status", "--config", str(gw.config_path)], timeout=30)
        assert table.returncode == 0, table.stderr
        assert "dl: last download delta: 2 entities stored, 1 removed, 2 kept local" in table.stdout, table.stdout

        # Upload, then the download that follows it: the mirror equals the upstream.
        upload_and_wait(gw, "dl")
        settle(gw)
        assert up.state()[4] == {"ID": 4, "Name": "local 4", "Qty": 40} and 5 not in up.state()
        result = download(gw)
        assert result["kind"] == "delta", result
        assert local_items(gw) == up.state()
        settle(gw)

        # An expired delta link: 410, a full read instead.
        up.expire_tokens()
        up.update(1, Name="server 1")
        result = download(gw)
        assert result["kind"] == "full" and "410" in (result["requests"]["items"]["fallback"] or ""), result
        assert local_items(gw) == up.state()

        # The link survives kill -9 and a restart: changes made while the gateway is down arrive by delta.
        up.update(6, Name="server 6")
        up.delete(7)
        seen = len(up.seen())
        gw = kill_and_restart(gw, gateway_factory, cfg, name="gw-again")
        wait_idle(gw, service="dl")
        result = download(gw)
        settle(gw)
        assert result["kind"] == "delta", result
        assert local_items(gw) == up.state()
        gets = [p for p, _ in up.seen()[seen:] if p.startswith("/svc/Items")]
        assert gets and all("deltatoken" in p for p in gets), gets
    finally:
        up.stop()


def test_kill_9_during_a_delta_download_leaves_the_mirror_before_it(gateway_factory, tmp_path):
    """The delta is applied in one transaction with its new link: a gateway killed while it reads the delta
    restarts with the rows and link of before, and the next download brings the same changes."""
    up = DeltaUpstream(version=4).start()
    try:
        cfg = config(up.root, tmp_path)
        gw = gateway_factory(cfg, name="gw")
        wait_downloaded(gw, "dl")
        wait_idle(gw, service="dl")
        settle(gw)
        before = local_items(gw)
        assert before == up.state()
        up.update(2, Name="server 2")
        up.delete(3)
        up.delta_delay = 5.0
        seen = len(up.seen())
        st, _, body = request("POST", gw.url("/_mirrorgate/odata/services/dl/download"), headers=gw.admin_headers())
        assert st == 202, body
        deadline = time.time() + 10
        while not any("deltatoken" in p for p, _ in up.seen()[seen:]):
            assert time.time() < deadline, up.seen()[seen:]
            time.sleep(0.05)
        port = up.port
        up.stop()  # the restarted gateway cannot download before the mirror is looked at
        gw = kill_and_restart(gw, gateway_factory, cfg, name="gw-again")
        assert local_items(gw) == before
        up.delta_delay = 0
        up.start(port=port)
        result = download(gw)
        settle(gw)
        assert result["kind"] == "delta", result  # the stored link is the one from before the kill
        assert local_items(gw) == up.state() and 3 not in up.state()
    finally:
        up.stop()


@pytest.fixture
def mock_sap_server():
    """mock-sap in this process (V2 GWSAMPLE_BASIC: `BusinessPartnerSet` tracks changes with `!deltatoken`,
    `ContactSet` refuses change tracking with 400)."""
    import threading

    from mocksap import Config, make_server

    httpd = make_server(Config(port=0, db_path=":memory:", csrf=False, quiet=True, log_requests=False))
    t = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    t.start()
    yield httpd
    httpd.shutdown()
    httpd.server_close()
    t.join(timeout=5)


def test_mock_sap_delta_tokens_and_a_set_without_tracking(gateway_factory, tmp_path, mock_sap_server):
    root = f"http://127.0.0.1:{mock_sap_server.server_address[1]}{SAP_ROOT}"
    cfg = config(root, tmp_path)
    cfg["odata"]["services"]["dl"]["definingRequests"] = [
        {"name": "partners", "query": "BusinessPartnerSet"},
        {"name": "contacts", "query": "ContactSet"},
    ]
    gw = gateway_factory(cfg, name="gw")
    wait_downloaded(gw, "dl")
    wait_idle(gw, service="dl")
    settle(gw)

    def partners() -> dict:
        r = requests.get(gw.url(MOUNT + "BusinessPartnerSet"), headers={"Accept": "application/json"}, timeout=10)
        assert r.status_code == 200 and r.headers["X-Mirrorgate-Origin"] == "local", r.text
        return {e["BusinessPartnerID"]: e["CompanyName"] for e in r.json()["d"]["results"]}

    def upstream_partners() -> dict:
        r = requests.get(root + "BusinessPartnerSet", headers={"Accept": "application/json"}, timeout=10)
        return {e["BusinessPartnerID"]: e["CompanyName"] for e in r.json()["d"]["results"]}

    assert partners() == upstream_partners() and len(partners()) == 8
    ids = sorted(partners())
    assert requests.request(
        "MERGE", root + f"BusinessPartnerSet('{ids[0]}')", json={"CompanyName": "Changed upstream"},
        headers={"Content-Type": "application/json"}, timeout=10,
    ).status_code == 204
    assert requests.delete(root + f"BusinessPartnerSet('{ids[-1]}')", timeout=10).status_code == 204
    result = download(gw)
    assert result["kind"] == "mixed", result  # partners by delta token, contacts in full
    p, c = result["requests"]["partners"], result["requests"]["contacts"]
    assert p["kind"] == "delta" and p["changed"] >= 1 and p["removed"] == 1, result  # at-least-once: ≥ 1
    assert c["kind"] == "full" and c["changed"] > 0, result
    assert partners() == upstream_partners()
    assert partners()[ids[0]] == "Changed upstream" and ids[-1] not in partners()
    n = requests.get(gw.url(MOUNT + "ContactSet/$count"), timeout=10)
    assert n.status_code == 200 and int(n.text) == c["changed"], n.text
