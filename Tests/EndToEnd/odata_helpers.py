"""Helpers shared by the OData end-to-end tests (test_odata_*.py): the gateway's status per service, the
upstream's products, asking for an upload, `kill -9` of a gateway, and the mock-sap service config."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import requests
from harness import request

SAP_ROOT = "/sap/opu/odata/IWBEP/GWSAMPLE_BASIC/"
JSON_HEADERS = {"Accept": "application/json", "Content-Type": "application/json"}
ACCEPT = {"Accept": "application/json"}


def status_of(gw, service: str = "nw") -> dict:
    """The OData status of `service` from `/_mirrorgate/status`."""
    st, _, body = request("GET", gw.url("/_mirrorgate/status"), headers=gw.admin_headers())
    assert st == 200, body
    return json.loads(body)["odata"]["services"][service]


def wait_idle(gw, seconds: float = 10, service: str = "nw") -> None:
    """localFirst: until the upstream is seen reachable and the upload the tracker starts on seeing it
    (empty queue) is over."""
    deadline = time.time() + seconds
    while time.time() < deadline:
        s = status_of(gw, service)
        if s["reachable"] and not s["uploading"]:
            break
        time.sleep(0.05)
    time.sleep(0.3)


def upstream_products(up) -> dict:
    """The upstream's Products (every page), by ProductID."""
    r = requests.get(up.root + "Products?$orderby=ProductID", headers=ACCEPT, timeout=10)
    assert r.status_code == 200, r.text
    doc = r.json()
    items = list(doc["value"])
    while doc.get("@odata.nextLink"):
        doc = requests.get(doc["@odata.nextLink"], headers=ACCEPT, timeout=10).json()
        items += doc["value"]
    return {p["ProductID"]: p for p in items}


def request_upload(gw, service: str = "nw", timeout: float = 10):
    """`POST /_mirrorgate/odata/services/<service>/upload?wait=true`: (status, headers, body)."""
    return request(
        "POST",
        gw.url(f"/_mirrorgate/odata/services/{service}/upload?wait=true"),
        headers=gw.admin_headers(),
        timeout=timeout,
    )


def upload_and_wait(gw, service: str = "nw", timeout: float = 30, wait: float = 20) -> None:
    """Asks for an upload (a 409: the reachability tracker already started one; a 200: nothing of it failed
    or is in doubt) and waits until the queue is empty: nothing pending, nothing in the ErrorArchive."""
    st, _, body = request_upload(gw, service, timeout=timeout)
    if st == 200:
        result = json.loads(body)
        assert result["failed"] == 0 and result["inDoubt"] == 0, result
    else:
        assert st == 409, body
    deadline = time.time() + wait
    while True:
        s = status_of(gw, service)
        if time.time() >= deadline or (s["pendingRequests"] == 0 and not s["uploading"]):
            break
        time.sleep(0.1)
    assert s["pendingRequests"] == 0 and s["errorArchive"] == 0, s


def csrf_session(url: str) -> requests.Session:
    """A session carrying the X-CSRF-Token fetched from `url` (as SAP clients do before writing)."""
    s = requests.Session()
    token = s.get(url, headers={"X-CSRF-Token": "Fetch", "Accept": "application/json"}, timeout=10).headers[
        "X-CSRF-Token"
    ]
    s.headers["X-CSRF-Token"] = token
    return s


def kill_9(gw) -> None:
    """`kill -9` of the gateway process (its exit is expected)."""
    os.kill(gw.proc.pid, signal.SIGKILL)
    gw.proc.wait(timeout=5)
    gw.expect_exit = -9


def kill_and_restart(gw, gateway_factory, config, name):
    """`kill -9`, then a new gateway with `config` (the same dataDir)."""
    kill_9(gw)
    return gateway_factory(config, name=name)


def sap_orders_config(root: str, tmp_path) -> dict:
    """A gateway with one OData service `gw` (mount /odata/gw/) mirroring mock-sap's SalesOrderSet at `root`."""
    return {
        "dataDir": str(tmp_path / "data"),
        "odata": {
            "services": {
                "gw": {
                    "mount": "/odata/gw/",
                    "upstream": root,
                    "timeout": "3s",
                    "definingRequests": [{"name": "orders", "query": "SalesOrderSet"}],
                }
            }
        },
    }


def start_mock_sap(port: int, csrf: bool = True) -> subprocess.Popen:
    """mock-sap (V2, in-memory data) on 127.0.0.1:`port`, once its $metadata answers (bounded wait)."""
    exe = Path(sys.executable).with_name("mock-sap")
    cmd = [str(exe), "--host", "127.0.0.1", "--port", str(port), "--db", ":memory:", "-q"]
    if not csrf:
        cmd.append("--no-csrf")
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 15
    while time.time() < deadline:
        try:
            if requests.get(f"http://127.0.0.1:{port}{SAP_ROOT}$metadata", timeout=1).status_code == 200:
                break
        except requests.RequestException:
            time.sleep(0.1)
    return proc
