"""Credentials at upload (issue 15 item 6, SPEC §4): a bearer token that expires during the outage.

Chain: gateway (`routing: onlineFirst`, `uploadCredentials: client`) → BearerGate (upstreams/auth_gate.py:
modifications need a valid bearer token, else 401) → odatapy Northwind V4. The gate stops (the outage),
alice and bob write offline with JWT-shaped tokens, alice's token is revoked, the gate comes back: the
upload sends bob's request, gets 401 for alice's first and holds hers — not in the ErrorArchive —, status,
`mirrorgate status` and the RequestQueue say why they wait; a read by alice with a new token (and then a
write with a token the upstream also refuses) are offered, and once the upstream accepts alice's new
token her requests go up with it, exactly once each.
"""

from __future__ import annotations

import base64
import json
import time

import requests
from harness import run_cli
from odata_helpers import ACCEPT, JSON_HEADERS, request_upload, status_of
from test_odata_offline import MOUNT, nw_config, wait_downloaded
from upstreams.auth_gate import BearerGate


def jwt(subject: str, serial: int) -> str:
    """A JWT-shaped token (the gateway reads `iss` and `sub` to know the writer; the gate compares text)."""

    def b64(obj) -> str:
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).decode().rstrip("=")

    return f"{b64({'alg': 'HS256'})}.{b64({'iss': 'e2e', 'sub': subject, 'serial': serial})}.c2lnbmF0dXJl"


def bearer(token: str) -> dict:
    return {**JSON_HEADERS, "Authorization": f"Bearer {token}"}


def wait_for(gw, predicate, seconds: float = 30, upload: bool = True) -> dict:
    """Polls the service's status (asking for uploads when `upload`) until `predicate(status)`; bounded."""
    deadline = time.time() + seconds
    s = status_of(gw)
    while time.time() < deadline:
        s = status_of(gw)
        if predicate(s):
            return s
        if upload and s["reachable"] and not s["uploading"]:
            request_upload(gw, timeout=20)
        time.sleep(0.2)
    raise AssertionError(f"status never matched: {s}")


def test_a_token_expired_during_the_outage_holds_the_writers_requests(gateway_factory, odata_upstream):
    up = odata_upstream
    gate = BearerGate(up.origin).start()
    alice1, alice2, alice3, bob = jwt("alice", 1), jwt("alice", 2), jwt("alice", 3), jwt("bob", 1)
    gate.valid = {alice1, bob}
    try:
        gw = gateway_factory(nw_config(gate.url + "/nw.svc/", timeout="2s"))
        wait_downloaded(gw, "nw")
        gate.stop()  # the outage
        r = requests.post(
            gw.url(MOUNT + "Products"), json={"ProductName": "alice one", "UnitPrice": 1, "Discontinued": False},
            headers=bearer(alice1), timeout=10,
        )
        assert r.status_code == 201 and r.headers["X-Mirrorgate-Origin"] == "local", r.text
        local = r.headers["Location"].rsplit("Products", 1)[1]
        r = requests.patch(gw.url(MOUNT + "Products" + local), json={"ProductName": "alice one, renamed"},
                           headers=bearer(alice1), timeout=10)
        assert r.status_code == 204, r.text
        r = requests.patch(gw.url(MOUNT + "Products(2)"), json={"ProductName": "bob's Chang"}, headers=bearer(bob),
                           timeout=10)
        assert r.status_code == 204, r.text
        gate.valid = {alice2, bob}  # alice's token expires while the upstream is away
        gate.start()

        s = wait_for(gw, lambda s: s["pendingRequests"] == 2 and s["waitingForCredentials"] == 2)
        assert s["errorArchive"] == 0 and s["inDoubt"] == 0, s
        hold = s["credentialHolds"][0]
        assert hold["status"] == 401 and hold["writer"] == "jwt:e2e|alice" and not hold["newerCredentialsOffered"]
        assert requests.get(up.root + "Products(2)", headers=ACCEPT, timeout=10).json()["ProductName"] == "bob's Chang"
        assert gate.tokens_seen().count(alice1) == 1  # her first request only, refused; the rest was held
        queue = requests.get(gw.url("/_mirrorgate/odata/nw/RequestQueue?$orderby=ID"), headers=ACCEPT, timeout=10)
        entries = queue.json()["value"]
        assert [(e["WaitingFor"], e["WaitingStatus"]) for e in entries] == [("credentials", 401)] * 2, entries
        assert alice1 not in queue.text
        out = run_cli(["status", "--config", str(gw.config_path)])
        assert out.returncode == 0, out.stderr
        assert "wait for credentials" in out.stdout and "401" in out.stdout, out.stdout
        assert alice1 not in out.stdout

        # A write with a token the upstream refuses too: tried, still waiting, still nothing archived.
        r = requests.patch(gw.url(MOUNT + "Products" + local), json={"ProductName": "alice one, final"},
                           headers=bearer(alice3), timeout=10)
        assert r.status_code == 204, r.text
        s = wait_for(gw, lambda s: alice3 in gate.tokens_seen() and not s["uploading"], upload=False)
        s = status_of(gw)
        assert s["pendingRequests"] == 3 and s["waitingForCredentials"] == 3 and s["errorArchive"] == 0, s

        # Alice reads with her renewed token: offered, tried, accepted; her requests go up with it.
        r = requests.get(gw.url(MOUNT + "Products?$top=1"), headers=bearer(alice2), timeout=10)
        assert r.status_code == 200
        s = wait_for(gw, lambda s: s["pendingRequests"] == 0)
        assert s["errorArchive"] == 0 and s["waitingForCredentials"] == 0 and s["credentialHolds"] == [], s
        made = requests.get(up.root + "Products?$filter=startswith(ProductName,'alice one')", headers=ACCEPT,
                            timeout=10).json()["value"]
        assert [p["ProductName"] for p in made] == ["alice one, final"], made
        posts = [t for m, p, t in gate.seen if m == "POST"]
        # Refused with the expired token and with the bad one, then sent once with the accepted token.
        assert posts == [alice1, alice3, alice2], posts
        assert gate.tokens_seen("PATCH").count(alice2) == 2
    finally:
        gate.stop()
