"""Exactly-once upload of the OData request queue (SPEC §4, issue 6; reference odata.md §1.10, §4.5, §7.3
properties 1 and 2).

Chain: gateway → ResponseDropper (upstreams/faults.py: lets the upstream commit, then loses the
response) → RepeatabilityShim (upstreams/repeatability_shim.py: OASIS Repeatable Requests, both header
families) → odatapy Northwind V4. `routing: localFirst`, so writes are only ever sent by the upload.

- With the shim, every queued request takes effect exactly once although the first response of every
  one of them is lost: the gateway re-sends with the same request ID and First-Sent, the shim replays the
  stored response, and the gateway consumes it (server keys included). `upstreamSupportsRepeatability:
  true`, and `auto` learned from a `Repeatability-Result` / `RepeatabilityResult` header (before it was
  seen, a lost POST is held in doubt even with the shim there); OASIS, SAP and both header families.
- The SAP dialect end to end: mock-sap (V2, CSRF) behind the shim with `RequestID`/`RepeatabilityCreation`.
- `auto` keeps what it learned across a restart (a request in flight at `kill -9` is re-sent and replayed,
  not held), and SAP's `RepeatabilityResult: unsupported` teaches nothing.
- Negative control: the same request sent twice without the shim creates two entities.
- Without the shim, a PATCH whose response is lost is held in doubt and a DELETE is re-sent (the POST case
  is test_odata_writes.py::test_a_post_whose_response_is_lost_is_held_in_doubt_not_duplicated).
- Crash tests: `kill -9` of the gateway at seeded random points while a client streams creates and
  updates (appends), and while the queue is being uploaded; every acknowledged request is executed by
  the upstream exactly once, and no unacknowledged one more than once.
"""

from __future__ import annotations

import json
import os
import random
import threading
import time

import pytest
import requests
from harness import request
from odata_helpers import JSON_HEADERS, kill_9, request_upload, status_of, wait_idle
from test_odata_offline import MOUNT, nw_config, wait_downloaded
from upstreams.faults import ResponseDropper
from upstreams.repeatability_shim import RepeatabilityShim

ID_HEADER = {"oasis": "Repeatability-Request-ID", "sap": "RequestID", "both": "Repeatability-Request-ID"}


def products(root: str) -> list[dict]:
    h = {"Accept": "application/json"}
    doc = requests.get(root + "Products?$orderby=ProductID", headers=h, timeout=10).json()
    items = list(doc["value"])
    for _ in range(1000):
        if not doc.get("@odata.nextLink"):
            break
        doc = requests.get(doc["@odata.nextLink"], headers=h, timeout=10).json()
        items += doc["value"]
    return items


def upload_until_empty(gw, seconds: float = 30, service: str = "nw") -> list[dict]:
    """Asks for uploads (each stops at a lost response) until the queue is empty; bounded."""
    runs = []
    deadline = time.time() + seconds
    for _ in range(200):
        if time.time() > deadline:
            break
        st, _, body = request_upload(gw, service, timeout=30)
        if st == 200:
            runs.append(json.loads(body))
        s = status_of(gw, service)
        if s["pendingRequests"] == 0 and not s["uploading"]:
            return runs
        time.sleep(0.05)
    raise AssertionError(f"queue not empty: {status_of(gw, service)}")


def post(gw, name: str, price: float = 1.0) -> requests.Response:
    r = requests.post(
        gw.url(MOUNT + "Products"),
        json={"ProductName": name, "UnitPrice": price, "Discontinued": False},
        headers=JSON_HEADERS,
        timeout=10,
    )
    assert r.status_code == 201 and r.headers["X-Mirrorgate-Origin"] == "local", r.text
    return r


def patch(gw, key: str, name: str) -> None:
    r = requests.patch(gw.url(MOUNT + f"Products({key})"), json={"ProductName": name}, headers=JSON_HEADERS, timeout=10)
    assert r.status_code == 204 and r.headers["X-Mirrorgate-Origin"] == "local", r.text


def upstream_writes(up, marker: str) -> dict[str, int]:
    """How many times the upstream itself executed a write whose body names `marker…` (per name)."""
    out: dict[str, int] = {}
    for r in up.requests():
        if r.method in ("POST", "PATCH", "PUT", "MERGE") and r.body:
            try:
                name = json.loads(r.body).get("ProductName")
            except ValueError:
                continue
            if isinstance(name, str) and name.startswith(marker):
                out[name] = out.get(name, 0) + 1
    return out


@pytest.fixture
def chain(odata_upstream):
    shim = RepeatabilityShim(odata_upstream.origin).start()
    dropper = ResponseDropper(shim.url).start()
    yield odata_upstream, shim, dropper
    dropper.stop()
    shim.stop()


@pytest.mark.parametrize(
    "family,support", [("both", "true"), ("oasis", "auto"), ("sap", "auto")], ids=["both-true", "oasis-auto", "sap-auto"]
)
def test_every_lost_response_is_replayed_and_applied_exactly_once(gateway_factory, chain, family, support):
    up, shim, dropper = chain
    config = nw_config(
        dropper.url + "/nw.svc/",
        routing="localFirst",
        repeatabilityHeaders=family,
        upstreamSupportsRepeatability=support,
    )
    gw = gateway_factory(config)
    wait_downloaded(gw, "nw")
    wait_idle(gw)
    tag = f"EO-{family}-"

    if support == "auto":
        # Not learned yet: a POST whose response is lost is held in doubt, even with the shim there
        # (the gateway must not assume support it has not seen).
        dropper.drop_next(1)
        post(gw, tag + "early")
        upload_until_empty(gw)
        s = status_of(gw)
        assert s["inDoubt"] == 1 and s["errorArchive"] == 1, s
        # One accepted answer carrying the result header teaches it.
        post(gw, tag + "teacher")
        runs = upload_until_empty(gw)
        assert sum(r["uploaded"] for r in runs) == 1 and status_of(gw)["inDoubt"] == 1

    # From now on the first response of every request is lost.
    dropper.drop_first_of = ID_HEADER[family]
    a = post(gw, tag + "A", 10)
    patch(gw, "2", tag + "patched-2")
    b = post(gw, tag + "B", 11)
    local_a = a.json()["ProductID"]
    assert local_a < 0 and b.json()["ProductID"] < 0
    patch(gw, str(local_a), tag + "A-renamed")  # rewritten to A's server key, learned from a replay
    assert status_of(gw)["pendingRequests"] == 4
    executed_before = shim.executions()
    runs = upload_until_empty(gw)
    s = status_of(gw)
    assert s["pendingRequests"] == 0, s
    assert sum(r["failed"] for r in runs) == 0 and sum(r["inDoubt"] for r in runs) == 0, runs
    assert s["inDoubt"] == (1 if support == "auto" else 0), s
    assert dropper.dropped >= 4

    # Each of the four was executed once by the upstream and answered by a replay.
    assert shim.executions() - executed_before == 4
    assert shim.replays() == 4, dict(shim.replayed)
    ids = [i for i in shim.replayed]
    assert all(shim.executed[i] == 1 for i in ids)
    # The retry carried the same ID and First-Sent as the first attempt.
    for i in ids:
        sent = {(m, p, f) for (m, p, rid, f, _) in shim.log if rid == i}
        assert len(sent) == 1, sent
    counts = upstream_writes(up, tag)
    assert counts == {
        **({tag + "early": 1, tag + "teacher": 1} if support == "auto" else {}),
        tag + "A": 1,
        tag + "patched-2": 1,
        tag + "B": 1,
        tag + "A-renamed": 1,
    }, counts
    names = [p["ProductName"] for p in products(up.root)]
    assert names.count(tag + "A-renamed") == 1 and names.count(tag + "B") == 1 and tag + "A" not in names
    assert names.count(tag + "patched-2") == 1
    # The header family asked for, and only that one, reached the shim.
    families = set().union(*(fams for (_, _, _, _, fams) in shim.log))
    assert families == ({"oasis", "sap"} if family == "both" else {family}), families

    # The gateway consumed the replayed creates: the server key replaced the local one.
    server_a = next(p["ProductID"] for p in products(up.root) if p["ProductName"] == tag + "A-renamed")
    r = requests.get(gw.url(MOUNT + f"Products({local_a})"), headers={"Accept": "application/json"}, timeout=10)
    assert r.status_code == 200 and r.json()["ProductID"] == server_a, r.text

    # Negative control: the very same create sent twice past the shim is applied twice; through the
    # shim with one request ID, once.
    body = {"ProductName": tag + "control", "UnitPrice": 1, "Discontinued": False}
    h = {**JSON_HEADERS, "Repeatability-Request-ID": "control-1", "Repeatability-First-Sent": "Tue, 24 Nov 2026 10:00:00 GMT"}
    for _ in range(2):
        assert requests.post(shim.url + "/nw.svc/Products", json=body, headers=h, timeout=10).status_code == 201
    assert [p["ProductName"] for p in products(up.root)].count(tag + "control") == 1
    for _ in range(2):
        assert requests.post(up.root + "Products", json=body, headers=h, timeout=10).status_code == 201
    assert [p["ProductName"] for p in products(up.root)].count(tag + "control") == 3


def test_sap_v2_upstream_lost_responses_replayed_exactly_once(gateway_factory):
    """The SAP dialect end to end: mock-sap (V2, CSRF, string keys from a number range) behind the shim,
    `repeatabilityHeaders: sap`, `auto` learned from `RepeatabilityResult`; the first answer of a create,
    a MERGE and a MERGE of the local create is lost each time."""
    from harness import free_port
    from test_odata_offline import SAP_ROOT
    from test_odata_writes import _mock_sap_on

    port = free_port()
    sap = _mock_sap_on(port)
    shim = RepeatabilityShim(f"http://127.0.0.1:{port}").start()
    dropper = ResponseDropper(shim.url).start()
    h = {"Accept": "application/json"}
    root = f"http://127.0.0.1:{port}{SAP_ROOT}"
    try:
        svc = {
            "mount": "/odata/gw/",
            "upstream": dropper.url + SAP_ROOT,
            "timeout": "3s",
            "routing": "localFirst",
            "repeatabilityHeaders": "sap",
            "definingRequests": [{"name": "orders", "query": "SalesOrderSet"}],
        }
        gw = gateway_factory({"odata": {"services": {"gw": svc}}})
        wait_downloaded(gw, "gw")
        wait_idle(gw, service="gw")
        first = requests.get(root + "SalesOrderSet?$orderby=SalesOrderID&$top=1", headers=h, timeout=10)
        existing = first.json()["d"]["results"][0]["SalesOrderID"]
        s = requests.Session()
        url = gw.url("/odata/gw/")
        s.headers["X-CSRF-Token"] = s.get(url, headers={**h, "X-CSRF-Token": "Fetch"}, timeout=10).headers[
            "X-CSRF-Token"
        ]
        order = {"CustomerID": "0100000000", "CurrencyCode": "EUR"}

        def create(note: str) -> str:
            r = s.post(url + "SalesOrderSet", json={**order, "Note": note}, headers={**h, **JSON_HEADERS}, timeout=10)
            assert r.status_code == 201, r.text
            return r.json()["d"]["SalesOrderID"]

        def merge(key: str, note: str) -> None:
            r = s.request("MERGE", url + f"SalesOrderSet('{key}')", json={"Note": note}, headers=JSON_HEADERS, timeout=10)
            assert r.status_code == 204, r.text

        create("SAP-teacher")
        upload_until_empty(gw, service="gw")  # RepeatabilityResult: accepted, learned
        dropper.drop_first_of = "RequestID"
        local = create("SAP-A")
        assert local.startswith("local-")
        merge(existing, "SAP-merged")
        merge(local, "SAP-A2")
        upload_until_empty(gw, service="gw")
        st = status_of(gw, "gw")
        assert st["pendingRequests"] == 0 and st["inDoubt"] == 0 and st["errorArchive"] == 0, st
        assert dropper.dropped == 3 and shim.replays() == 3 and shim.executions() == 4
        assert all(n == 1 for n in shim.executed.values())
        assert all(fams == frozenset({"sap"}) for (_, _, _, _, fams) in shim.log)

        def notes(note: str) -> list:
            q = f"SalesOrderSet?$filter=Note eq '{note}'"
            return requests.get(root + q, headers=h, timeout=10).json()["d"]["results"]

        assert len(notes("SAP-teacher")) == 1 and notes("SAP-A") == []
        a = notes("SAP-A2")
        assert len(a) == 1 and not a[0]["SalesOrderID"].startswith("local-"), a
        assert [o["SalesOrderID"] for o in notes("SAP-merged")] == [existing]
    finally:
        dropper.stop()
        shim.stop()
        sap.kill()
        sap.wait(timeout=5)


def test_without_the_shim_a_lost_patch_is_held_in_doubt_and_a_lost_delete_is_resent(gateway_factory, odata_upstream):
    up = odata_upstream
    dropper = ResponseDropper(up.origin, methods=("PATCH", "DELETE")).start()
    try:
        gw = gateway_factory(nw_config(dropper.url + "/nw.svc/", routing="localFirst"))
        wait_downloaded(gw, "nw")
        wait_idle(gw)
        dropper.drop_first_of = "Repeatability-Request-ID"
        patch(gw, "4", "NS-patched-4")
        assert requests.delete(gw.url(MOUNT + "Products(5)"), headers=JSON_HEADERS, timeout=10).status_code == 204
        patch(gw, "6", "NS-patched-6")
        upload_until_empty(gw)
        s = status_of(gw)
        assert s["pendingRequests"] == 0 and s["inDoubt"] == 2 and s["errorArchive"] == 2, s
        # Executed once each; the DELETE was re-sent and its 404 counted as done.
        assert upstream_writes(up, "NS-") == {"NS-patched-4": 1, "NS-patched-6": 1}
        assert len(up.requests("DELETE")) == 2 and dropper.dropped == 3
        ids = {p["ProductID"]: p["ProductName"] for p in products(up.root)}
        assert 5 not in ids and ids[4] == "NS-patched-4" and ids[6] == "NS-patched-6"
    finally:
        dropper.stop()


def test_an_unsupported_result_does_not_teach_support(gateway_factory, chain):
    """`RepeatabilityResult: unsupported` (SAP) is no sign of support: with `auto`, a POST whose answer
    is lost after such answers is held in doubt, not re-sent."""
    up, shim, dropper = chain
    shim.unsupported = True
    gw = gateway_factory(nw_config(dropper.url + "/nw.svc/", routing="localFirst", repeatabilityHeaders="sap"))
    wait_downloaded(gw, "nw")
    wait_idle(gw)
    post(gw, "UN-first")
    upload_until_empty(gw)
    dropper.drop_next(1)
    post(gw, "UN-lost")
    upload_until_empty(gw)
    s = status_of(gw)
    assert s["inDoubt"] == 1 and s["pendingRequests"] == 0, s
    assert upstream_writes(up, "UN-") == {"UN-first": 1, "UN-lost": 1}


def test_support_learned_before_a_crash_still_counts_after_the_restart(gateway_factory, odata_upstream, tmp_path):
    """`auto`: once a result header was seen, a request in flight when the gateway is killed is re-sent
    after the restart (and replayed by the shim), not held in doubt; the learned support is stored with
    the mirror, for this upstream URL."""
    up = odata_upstream
    shim = RepeatabilityShim(up.origin).start()
    try:
        config = nw_config(shim.url + "/nw.svc/", routing="localFirst", upstreamSupportsRepeatability="auto")
        config["dataDir"] = str(tmp_path / "data")
        gw = gateway_factory(config)
        wait_downloaded(gw, "nw")
        wait_idle(gw)
        post(gw, "LR-teacher")
        upload_until_empty(gw)  # accepted, with the result header: learned
        post(gw, "LR-held")
        shim.hold_next(1)  # executed upstream; the answer waits until the gateway is gone
        st, _, _ = request("POST", gw.url("/_mirrorgate/odata/services/nw/upload"), headers=gw.admin_headers())
        assert st == 202, st
        assert shim.holding.wait(timeout=10)
        kill_9(gw)
        shim.release.set()
        gw2 = gateway_factory(config, name="gw2")
        deadline = time.time() + 20
        while time.time() < deadline and (status_of(gw2)["pendingRequests"] or status_of(gw2)["uploading"]):
            time.sleep(0.05)
        s = status_of(gw2)
        assert s["pendingRequests"] == 0 and s["inDoubt"] == 0 and s["errorArchive"] == 0, s
        assert upstream_writes(up, "LR-") == {"LR-teacher": 1, "LR-held": 1}
        assert shim.replays() == 1
    finally:
        shim.stop()


# ---------------------------------------------------------------- kill -9 during appends and uploads

SEED = int(os.environ.get("MG_CRASH_SEED", str(int(time.time()) % 100000)))


class Writer(threading.Thread):
    """Streams creates and renames through the gateway on one connection until stopped or the gateway
    dies; records what was acknowledged (2xx) and what was sent without an answer."""

    def __init__(self, gw, tag: str, rng: random.Random, acked: list, unanswered: list, local_keys: list):
        super().__init__(daemon=True)
        self.gw, self.tag, self.rng = gw, tag, rng
        self.acked, self.unanswered, self.local_keys = acked, unanswered, local_keys
        self.halt = threading.Event()

    def run(self) -> None:
        s = requests.Session()
        for i in range(10_000):
            if self.halt.is_set():
                return
            name = f"{self.tag}{i}"
            creating = not self.local_keys or self.rng.random() < 0.6
            try:
                if creating:
                    body = {"ProductName": name, "UnitPrice": 1, "Discontinued": False}
                    r = s.post(self.gw.url(MOUNT + "Products"), json=body, headers=JSON_HEADERS, timeout=5)
                else:
                    key = self.rng.choice(self.local_keys + ["1", "2", "3"])
                    r = s.patch(
                        self.gw.url(MOUNT + f"Products({key})"), json={"ProductName": name}, headers=JSON_HEADERS, timeout=5
                    )
            except requests.RequestException:
                self.unanswered.append(name)
                return
            assert r.status_code in (201, 204), (r.status_code, r.text)
            self.acked.append(name)
            if creating:
                self.local_keys.append(str(r.json()["ProductID"]))


def _check_exactly_once(up, prefix: str, acked: list, unanswered: list) -> None:
    counts = upstream_writes(up, prefix)
    missing = [n for n in acked if counts.get(n, 0) != 1]
    assert not missing, f"seed {SEED}: acknowledged writes not executed exactly once: {[(n, counts.get(n, 0)) for n in missing]}"
    extra = {n: c for n, c in counts.items() if n not in acked and (n not in unanswered or c > 1)}
    assert not extra, f"seed {SEED}: writes executed that were never acknowledged, or twice: {extra}"


@pytest.mark.parametrize("support", ["true", "auto"])
def test_kill_9_during_appends_and_uploads_loses_and_duplicates_nothing(
    gateway_factory, odata_upstream, tmp_path, support
):
    """Seeded random kill points (the seed is printed; MG_CRASH_SEED=N replays it): five kills while a
    client streams writes offline, then five while the queue is uploaded through the shim. With `auto`,
    one upload before going offline teaches the gateway that the upstream supports repeatability."""
    print(f"crash seed {SEED}")
    rng = random.Random(f"{SEED}-{support}")
    up = odata_upstream
    shim = RepeatabilityShim(up.origin).start()
    config = nw_config(shim.url + "/nw.svc/", routing="localFirst", upstreamSupportsRepeatability=support)
    config["dataDir"] = str(tmp_path / "data")
    acked: list[str] = []
    unanswered: list[str] = []
    local_keys: list[str] = []
    t_end = time.time() + 90
    try:
        gw = gateway_factory(config, name="gw0")
        wait_downloaded(gw, "nw")
        if support == "auto":
            wait_idle(gw)
            post(gw, "CRteacher")
            upload_until_empty(gw)
            acked.append("CRteacher")
        shim.stop()  # offline from here: writes are queued, nothing is uploaded

        # Appends: kill -9 at a random moment of a stream of acknowledged writes.
        for it in range(5):
            writer = Writer(gw, f"CR{it}-", rng, acked, unanswered, local_keys)
            # The kill point is a random number of acknowledged writes into the stream (plus a random
            # fraction of one write), not a random time: the queue the uploads must drain then has the same
            # bounded size however fast the gateway acknowledges writes.
            target = len(acked) + rng.randint(5, 150)
            writer.start()
            wait_until = time.time() + 20
            while len(acked) < target and writer.is_alive() and time.time() < wait_until:
                time.sleep(0.001)
            time.sleep(rng.uniform(0.0, 0.002))
            kill_9(gw)
            writer.halt.set()
            writer.join(timeout=10)
            assert not writer.is_alive()
            gw = gateway_factory(config, name=f"gw-a{it}")
            pending = status_of(gw)["pendingRequests"]  # durable: every acknowledged write is queued
            queued = len(acked) - (1 if support == "auto" else 0)  # the teacher was uploaded already
            assert queued <= pending <= queued + len(unanswered), (SEED, pending, queued)
            assert time.time() < t_end, f"seed {SEED}: out of time"

        # Uploads: the upstream is back; kill -9 at a random moment of the upload, restart, again.
        shim.start()
        for it in range(5):
            st, _, _ = request("POST", gw.url("/_mirrorgate/odata/services/nw/upload"), headers=gw.admin_headers())
            assert st in (202, 409, 503), st
            time.sleep(rng.uniform(0.0, 0.25))
            kill_9(gw)
            gw = gateway_factory(config, name=f"gw-u{it}")
            assert time.time() < t_end, f"seed {SEED}: out of time"
        upload_until_empty(gw, seconds=max(5, t_end - time.time()))
        s = status_of(gw)
        assert s["pendingRequests"] == 0 and s["errorArchive"] == 0, (SEED, s)
        _check_exactly_once(up, "CR", acked, unanswered)
        assert shim.executions() == sum(shim.executed.values())
        # Every created entity that was acknowledged exists once upstream under its last acknowledged name
        # (or was renamed by a later acknowledged PATCH).
        upstream_names = [p["ProductName"] for p in products(up.root)]
        assert len(upstream_names) == len(set(upstream_names)), f"seed {SEED}: duplicate entities"
        print(f"crash seed {SEED}: {len(acked)} acknowledged, {len(unanswered)} unanswered, "
              f"{shim.executions()} executed, {shim.replays()} replayed")
    finally:
        shim.stop()


def test_an_unsupported_result_does_not_teach_support_to_changesets(gateway_factory, chain):
    """The same for changesets: a `$batch` answered with `RepeatabilityResult: unsupported` teaches nothing,
    so a changeset whose answer is lost afterwards is held in doubt, not re-sent (and applied twice)."""
    up, shim, dropper = chain
    shim.unsupported = True
    gw = gateway_factory(nw_config(dropper.url + "/nw.svc/", routing="localFirst", repeatabilityHeaders="sap"))
    wait_downloaded(gw, "nw")
    wait_idle(gw)

    def changeset(*names: str) -> None:
        batch = {
            "requests": [
                {
                    "id": str(i),
                    "atomicityGroup": "g",
                    "method": "POST",
                    "url": "Products",
                    "headers": {"content-type": "application/json"},
                    "body": {"ProductName": name, "UnitPrice": 1.0, "Discontinued": False},
                }
                for i, name in enumerate(names)
            ]
        }
        r = requests.post(
            gw.url(MOUNT + "$batch"), json=batch, headers={"Accept": "application/json"}, timeout=10
        )
        assert r.status_code == 200 and r.headers["X-Mirrorgate-Origin"] == "local", r.text
        assert [x["status"] for x in r.json()["responses"]] == [201] * len(names), r.text

    changeset("UC-first-a", "UC-first-b")
    upload_until_empty(gw)
    dropper.drop_next(1)
    changeset("UC-lost-a", "UC-lost-b")
    upload_until_empty(gw)
    s = status_of(gw)
    assert s["inDoubt"] == 2 and s["pendingRequests"] == 0, s
    names = sorted(p["ProductName"] for p in products(up.root) if p["ProductName"].startswith("UC-"))
    assert names == ["UC-first-a", "UC-first-b", "UC-lost-a", "UC-lost-b"], names


GARBLED_ANSWERS = {
    "garbage": b"\x00\xff\xfe not http at all\r\n\r\n",
    "header-without-colon": b"HTTP/1.1 201 Created\r\nContent-Type application/json\r\n\r\n{}",
    "bad-status-code": b"HTTP/1.1 2x1 Created\r\nContent-Length: 2\r\n\r\n{}",
    "two-content-lengths": b"HTTP/1.1 201 Created\r\nContent-Length: 2\r\nContent-Length: 9\r\n\r\n{}",
    "nul-in-header": b"HTTP/1.1 201 Created\r\nX-Bad: a\x00b\r\nContent-Length: 2\r\n\r\n{}",
    "truncated-body": b'HTTP/1.1 201 Created\r\nContent-Type: application/json\r\nContent-Length: 400\r\n\r\n{"ProductID":',
}


@pytest.mark.parametrize("garble", sorted(GARBLED_ANSWERS), ids=sorted(GARBLED_ANSWERS))
def test_a_garbled_answer_after_the_upstream_committed_is_in_doubt_not_resent(gateway_factory, odata_upstream, garble):
    """Issue 19 D1: an answer that is not a complete, well-formed HTTP response after the request was
    written is an unknown outcome, exactly like a lost one: without repeatability support a POST, a PATCH
    and a changeset are held in doubt (ErrorArchive `MG_IN_DOUBT`) and each exists once upstream."""
    up = odata_upstream
    dropper = ResponseDropper(up.origin, methods=("POST", "PATCH")).start()
    try:
        gw = gateway_factory(
            nw_config(dropper.url + "/nw.svc/", routing="localFirst", upstreamSupportsRepeatability="false")
        )
        wait_downloaded(gw, "nw")
        wait_idle(gw)
        dropper.garble = GARBLED_ANSWERS[garble]
        dropper.drop_next(3)  # localFirst: only the upload sends POST/PATCH, these three in order
        post(gw, "GA-post")
        patch(gw, "7", "GA-patch")
        batch = {
            "requests": [
                {
                    "id": str(i),
                    "atomicityGroup": "g",
                    "method": "POST",
                    "url": "Products",
                    "headers": {"content-type": "application/json"},
                    "body": {"ProductName": name, "UnitPrice": 1.0, "Discontinued": False},
                }
                for i, name in enumerate(["GA-cs-a", "GA-cs-b"])
            ]
        }
        r = requests.post(gw.url(MOUNT + "$batch"), json=batch, headers={"Accept": "application/json"}, timeout=10)
        assert r.status_code == 200, r.text
        upload_until_empty(gw)
        s = status_of(gw)
        assert s["pendingRequests"] == 0 and s["inDoubt"] == 4 and s["errorArchive"] == 4, s
        assert dropper.dropped == 3
        assert upstream_writes(up, "GA-") == {"GA-post": 1, "GA-patch": 1}
        names = sorted(p["ProductName"] for p in products(up.root) if p["ProductName"].startswith("GA-"))
        assert names == ["GA-cs-a", "GA-cs-b", "GA-patch", "GA-post"], names
        archive = requests.get(
            gw.url("/_mirrorgate/odata/nw/ErrorArchive"), headers={"Accept": "application/json"}, timeout=10
        ).json()["value"]
        assert sorted(e["Code"] for e in archive) == ["MG_IN_DOUBT"] * 4, archive
    finally:
        dropper.stop()
