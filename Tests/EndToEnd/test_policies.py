"""Replication policies (SPEC §2 `policies`, §6; issue 17): one scheduler for Algolia syncs and OData runs.

Short intervals and slow fake upstreams on loopback: idle → in use switching of the interval, a window
around now and one excluding it, a condition command that says no then yes (and one that times out), a
run budget of about a second that completes a large sync over several runs while local answers stay the
old ones, pause and resume (HTTP and command line, also in the middle of a run), `kill -9` in the middle
of a budgeted run (schedule, pause and resume point survive), an OData run that pushes before it pulls
(and a budgeted OData download resumed from its last page), and the SSE events of each.
"""

from __future__ import annotations

import http.client
import json
import re
import threading
import time
from datetime import datetime

import pytest
import requests
from conftest import API_KEY, APP_ID
from harness import request, run_cli
from odata_helpers import JSON_HEADERS, kill_9, status_of
from test_mirrored import wait_for
from test_odata_offline import MOUNT, nw_config, wait_downloaded
from test_reload import reload, rewrite
from upstreams.fake_algolia import FakeAlgolia

SETTINGS = {"searchableAttributes": ["name"], "attributesForFaceting": ["brand"]}


def records(prefix: str, n: int, brand: str = "Alpha") -> list[dict]:
    return [{"objectID": f"{prefix}{i:04d}", "name": f"{prefix} record {i}", "brand": brand} for i in range(n)]


class Events:
    """`GET /_mirrorgate/events` read on a thread of its own: every event as (name, data), in order."""

    def __init__(self, gw):
        self.items: list[tuple[str, dict]] = []
        self.lock = threading.Lock()
        self.conn = http.client.HTTPConnection("127.0.0.1", gw.port, timeout=60)
        self.conn.request("GET", "/_mirrorgate/events", headers=gw.admin_headers())
        self.resp = self.conn.getresponse()
        assert self.resp.status == 200
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self):
        name = None
        try:
            for _ in range(1_000_000):
                line = self.resp.readline()
                if not line:
                    return
                line = line.decode().rstrip("\n")
                if line.startswith("event: "):
                    name = line[7:]
                elif line.startswith("data: ") and name:
                    with self.lock:
                        self.items.append((name, json.loads(line[6:])))
                    name = None
        except (OSError, ValueError, AttributeError, http.client.HTTPException):
            return  # closed by close() (http.client drops its file object: AttributeError) or by the gateway

    def named(self, name: str, **match) -> list[dict]:
        with self.lock:
            items = list(self.items)
        return [d for n, d in items if n == name and all(d.get(k) == v for k, v in match.items())]

    def names(self, **match) -> list[str]:
        with self.lock:
            items = list(self.items)
        return [n for n, d in items if all(d.get(k) == v for k, v in match.items())]

    def close(self):
        self.conn.close()


def algolia_policy_config(url: str, policies: dict, indices: dict) -> dict:
    idx = {}
    for name, policy in indices.items():
        idx[name] = {
            "mirrored": True,
            "policy": policy,
            "dataSelectionQueries": [{"query": {"query": ""}, "maxObjects": 100000}],
        }
    return {
        "policies": policies,
        "algolia": {
            "appId": APP_ID,
            "apiKey": API_KEY,
            "hosts": [url],
            "connectTimeout": "300ms",
            "timeout": "1500ms",
            "indices": idx,
        },
    }


def status(gw) -> dict:
    st, _, body = request("GET", gw.url("/_mirrorgate/status"), headers=gw.admin_headers())
    assert st == 200, body
    return json.loads(body)


def index_status(gw, name: str = "products") -> dict:
    return status(gw)["algolia"]["indices"][name]


def local_search(gw, index: str = "products", query: str = "") -> dict:
    h = {
        "X-Algolia-Application-Id": APP_ID,
        "X-Algolia-API-Key": API_KEY,
        "Content-Type": "application/json",
        "X-Mirrorgate-Strategy": "offlineOnly",
    }
    st, headers, body = request(
        "POST",
        gw.url(f"/1/indexes/{index}/query"),
        body=json.dumps({"query": query, "hitsPerPage": 1}).encode(),
        headers=h,
        timeout=10,
    )
    assert st == 200, body
    assert headers.get("x-mirrorgate-origin") == "local"
    return json.loads(body)


def metric_samples(gw, name: str) -> list[tuple[dict, float]]:
    """The samples of `name` on `GET /metrics`: (labels, value) for each line of that name."""
    st, _, body = request("GET", gw.url("/metrics"), headers=gw.admin_headers())
    assert st == 200, body
    out = []
    for m in re.finditer(rf"^{re.escape(name)}(?:\{{([^}}]*)\}})? ([0-9.e+-]+)$", body.decode(), re.M):
        labels = dict(re.findall(r'(\w+)="([^"]*)"', m.group(1) or ""))
        out.append((labels, float(m.group(2))))
    return out


def browse_calls(fake: FakeAlgolia, index: str = "products") -> list:
    return fake.requests(f"/1/indexes/{index}/browse")


def clock_window(start_min: int, end_min: int) -> str:
    """A local-time window from now + start_min to now + end_min minutes ("HH:MM-HH:MM")."""
    now = time.time()
    a = time.localtime(now + start_min * 60)
    b = time.localtime(now + end_min * 60)
    return f"{a.tm_hour:02d}:{a.tm_min:02d}-{b.tm_hour:02d}:{b.tm_min:02d}"


# ------------------------------------------------------------------------------------------ Algolia


def test_a_reload_applies_a_changed_interval_with_one_scheduler(gateway_factory, fake_algolia):
    """A reload that shortens a policy's idle interval: the mirror keeps its job (runs counted on), the new
    interval applies without a restart, and every sync is a run of the one scheduler (no second timer
    syncs: each syncDidStart has its runDidStart, and the count over a window is one interval's)."""
    fake_algolia.seed("products", records("p", 4), SETTINGS)
    before = {"steady": {"activeInterval": "1s", "idleInterval": "1h", "activeWindow": "2s"}}
    gw = gateway_factory(algolia_policy_config(fake_algolia.url, before, {"products": "steady"}))
    events = Events(gw)
    try:
        assert wait_for(lambda: index_status(gw)["replication"]["lastRunOutcome"] == "completed", timeout=20)
        first = index_status(gw)["replication"]
        time.sleep(2.5)  # idle under the old policy: the next run is an hour away
        assert index_status(gw)["replication"]["runs"] == first["runs"]

        after = {"steady": {"activeInterval": "1s", "idleInterval": "2s", "activeWindow": "2s"}}
        rewrite(gw, algolia_policy_config(fake_algolia.url, after, {"products": "steady"}))
        st, answer = reload(gw)
        assert st == 200, answer
        assert {"key": "policies.steady", "change": "changed"} in answer["changes"]
        assert answer["restartRequired"] == []
        assert status(gw)["policies"]["steady"]["idleIntervalSeconds"] == 2

        # The new interval applies: runs come again, and the job kept its count.
        assert wait_for(lambda: index_status(gw)["replication"]["runs"] > first["runs"], timeout=10)
        start_runs = index_status(gw)["replication"]["runs"]
        syncs_before = len(events.named("syncDidStart", index="products"))
        runs_before = len(events.named("runDidStart", index="products"))
        time.sleep(8)
        window_runs = index_status(gw)["replication"]["runs"] - start_runs
        syncs = len(events.named("syncDidStart", index="products")) - syncs_before
        started = len(events.named("runDidStart", index="products")) - runs_before
        # One scheduler at a 2 s idle interval: 2 to 5 runs in 8 s (a second one would about double it).
        assert 2 <= window_runs <= 5, window_runs
        # Every sync is a run's: the totals agree once the events of a run in progress have arrived (the
        # snapshots above may fall between a run's runDidStart and its syncDidStart).
        assert wait_for(
            lambda: len(events.named("syncDidStart", index="products"))
            == len(events.named("runDidStart", index="products")),
            timeout=5,
        ), (syncs, started)
        assert abs(syncs - started) <= 1, (syncs, started)
        assert abs(started - window_runs) <= 1, (started, window_runs)
        assert all(e["policy"] == "steady" and e["mirror"] == "algolia:products"
                   for e in events.named("runDidStart", index="products"))
    finally:
        events.close()


def test_idle_to_in_use_switches_the_interval(gateway_factory, fake_algolia):
    fake_algolia.seed("products", records("p", 6), SETTINGS)
    policies = {"fast": {"activeInterval": "1s", "idleInterval": "1h", "activeWindow": "3s"}}
    gw = gateway_factory(algolia_policy_config(fake_algolia.url, policies, {"products": "fast"}))
    events = Events(gw)
    try:
        # Never synced: the first run starts at once.
        assert wait_for(lambda: index_status(gw)["replication"]["lastRunOutcome"] == "completed", timeout=20)
        idle = index_status(gw)["replication"]
        assert idle["inUse"] is False and idle["waitingFor"] == "interval" and idle["policy"] == "fast"
        runs = idle["runs"]
        time.sleep(2.5)  # idle: the next run is an hour away
        assert index_status(gw)["replication"]["runs"] == runs

        # A client request: in use, the active interval (1 s) has long passed, so a run at once.
        local_search(gw)
        assert wait_for(lambda: index_status(gw)["replication"]["runs"] > runs, timeout=10)
        # While in use, a run every second or so.
        deadline = time.time() + 2.5
        while time.time() < deadline:
            local_search(gw)
            time.sleep(0.3)
        in_use = index_status(gw)["replication"]
        assert in_use["inUse"] is True
        assert in_use["runs"] >= runs + 2, in_use

        # No more requests: after the active window, idle again and no more runs.
        time.sleep(4)
        settled = index_status(gw)["replication"]
        assert settled["inUse"] is False
        time.sleep(2.5)
        assert index_status(gw)["replication"]["runs"] == settled["runs"]
        started = events.named("runDidStart", index="products")
        finished = events.named("runDidFinish", index="products")
        assert len(started) >= 2 and len(finished) >= 2
        assert all(e["policy"] == "fast" and e["mirror"] == "algolia:products" for e in started)
        assert all(e["completed"] is True and e["objects"] == 6 for e in finished)
        assert events.named("runDidProgress", index="products")
    finally:
        events.close()


def test_a_window_around_now_runs_and_one_excluding_it_waits(gateway_factory, fake_algolia):
    fake_algolia.seed("products", records("p", 4), SETTINGS)
    fake_algolia.seed("archive", records("a", 4), SETTINGS)
    policies = {
        "now": {"window": clock_window(-2, 5), "idleInterval": "1h"},
        # Two windows, both hours away (the second one crosses midnight when now is late in the day).
        "later": {"window": [clock_window(180, 240), clock_window(300, 420)], "idleInterval": "1h"},
    }
    gw = gateway_factory(
        algolia_policy_config(fake_algolia.url, policies, {"products": "now", "archive": "later"})
    )
    events = Events(gw)
    assert wait_for(lambda: index_status(gw)["hasOfflineData"], timeout=20)
    time.sleep(1)
    archive = index_status(gw, "archive")
    assert archive["hasOfflineData"] is False
    assert archive["replication"]["waitingFor"] == "window"
    assert archive["replication"]["runs"] == 0
    assert archive["nextSyncAt"]  # the next opening of a window
    assert not browse_calls(fake_algolia, "archive")
    # An operator may still sync it by hand (no window applies to a manual run).
    st, _, body = request("POST", gw.url("/_mirrorgate/algolia/indices/archive/sync?wait=true"), timeout=20)
    assert st == 200, body
    assert json.loads(body)["objects"] == 4
    assert status(gw)["policies"]["later"]["window"] == policies["later"]["window"]
    # Events: the archive's only run is the manual one; the products' scheduled run finished.
    assert wait_for(lambda: events.named("runDidFinish", index="archive"), timeout=10)
    assert [e["trigger"] for e in events.named("runDidStart", index="archive")] == ["manual"]
    assert all(e["trigger"] != "manual" for e in events.named("runDidStart", index="products"))
    events.close()


def test_a_condition_that_says_no_then_yes(gateway_factory, fake_algolia, tmp_path):
    fake_algolia.seed("products", records("p", 5), SETTINGS)
    fake_algolia.seed("slowcheck", records("s", 5), SETTINGS)
    allow = tmp_path / "on-unmetered-link"
    script = f'echo "link check"; test -e "{allow}"'
    policies = {
        "wifi": {
            "idleInterval": "1h",
            "condition": {"command": ["/bin/sh", "-c", script], "timeout": "2s"},
            "retry": {"initial": "500ms", "max": "1s"},
        },
        "hanging": {
            "idleInterval": "1h",
            "condition": {"command": ["sleep", "30"], "timeout": "300ms"},
            "retry": {"initial": "10s", "max": "10s"},
        },
    }
    gw = gateway_factory(
        algolia_policy_config(fake_algolia.url, policies, {"products": "wifi", "slowcheck": "hanging"})
    )
    events = Events(gw)
    assert wait_for(lambda: index_status(gw)["replication"]["waitingFor"] == "condition", timeout=10)
    assert index_status(gw)["replication"]["condition"] == "exit 1"
    time.sleep(1.5)  # asked again (retry.initial), still no
    assert index_status(gw)["hasOfflineData"] is False
    assert not browse_calls(fake_algolia)
    assert not events.named("runDidStart", index="products")  # a refused run never starts
    assert gw.stderr().count("condition refuses the run") >= 2
    assert "link check" in gw.stderr()  # the command's output is logged

    allow.write_text("yes")
    assert wait_for(lambda: index_status(gw)["hasOfflineData"], timeout=10)
    assert index_status(gw)["replication"]["condition"] is None
    assert "condition allows the run" in gw.stderr()
    assert wait_for(lambda: events.named("runDidFinish", index="products", completed=True), timeout=10)
    assert len(events.named("runDidStart", index="products")) >= 1

    # A command that outlives its timeout is killed and counts as a no; the gateway is not held up.
    hanging = index_status(gw, "slowcheck")["replication"]
    assert hanging["waitingFor"] == "condition" and hanging["condition"] == "timed out", hanging
    assert index_status(gw, "slowcheck")["hasOfflineData"] is False
    assert not events.named("runDidStart", index="slowcheck")
    events.close()


def test_a_budget_completes_a_large_sync_over_several_runs(gateway_factory, tmp_path):
    fake = FakeAlgolia(browse_page_size=5).start()
    try:
        old = records("old", 20)
        fake.seed("products", old, SETTINGS)
        policies = {"short": {"activeInterval": "1s", "idleInterval": "1s", "maxRunDuration": "1s"}}
        gw = gateway_factory(algolia_policy_config(fake.url, policies, {"products": "short"}))
        events = Events(gw)
        assert wait_for(lambda: index_status(gw)["objects"] == 20, timeout=20)

        # A large data set behind a slow upstream: 220 objects, 5 per page, 0.1 s per call (≈ 5 s).
        fake.seed("products", records("new", 200, brand="Beta"))
        fake.delay = 0.1
        before = len(browse_calls(fake))
        seen = set()
        deadline = time.time() + 60
        while time.time() < deadline:
            hits = local_search(gw)["nbHits"]
            seen.add(hits)
            if hits == 220:
                break
            time.sleep(0.1)
        # Local answers stayed on the old version until the new one was complete: never a half-built one.
        assert seen <= {20, 220}, seen
        assert 220 in seen
        budget = events.named("runBudgetReached", index="products")
        assert len(budget) >= 2, events.names(index="products")
        assert all(b["budgetMs"] == 1000 for b in budget)
        resumed = [e for e in events.named("runDidStart", index="products") if e["resumed"]]
        assert len(resumed) >= 2
        # Each run went on from the last stored browse page: about one pass over the pages, not one per run.
        calls = browse_calls(fake)[before:]
        assert len(calls) <= 220 // 5 + 3, len(calls)
        continued = [c for c in calls if (c.json() or {}).get("cursor")]
        assert len(continued) >= len(calls) - len(budget) - 3
        # The run's end is reported just after the new version answers.
        assert wait_for(lambda: events.named("runDidFinish", index="products", objects=220), timeout=10)
        done = events.named("runDidFinish", index="products", objects=220)[-1]
        assert done["completed"] is True
        s = index_status(gw)["replication"]
        assert s["lastRunOutcome"] in ("completed", "budgetReached")
        events.close()
    finally:
        fake.stop()


def test_a_budgeted_first_sync_waits_for_the_interval_between_runs(gateway_factory, tmp_path):
    """Issue 25: a first sync of 12,000 records behind a slow upstream (1,000 per page, 0.4 s per call) under
    `{activeInterval: 3s, idleInterval: 3s, maxRunDuration: 1s}`. A run that reached its budget is followed by
    the next one only after the interval (the gateway's own event stamps are ≥ 2 whole seconds apart; before,
    the next run started a millisecond later), the status between them says so (`waitingFor: interval`,
    `nextRunAt` 3 s after the run's end), and the runs complete the sync."""
    fake = FakeAlgolia(browse_page_size=1000).start()
    try:
        fake.seed("products", records("p", 12000), SETTINGS)
        fake.delay = 0.4
        policies = {"short": {"activeInterval": "3s", "idleInterval": "3s", "maxRunDuration": "1s"}}
        gw = gateway_factory(algolia_policy_config(fake.url, policies, {"products": "short"}))
        events = Events(gw)

        # Between two runs: not running, waiting for the interval, the next run 3 s after the last one ended.
        between: list[dict] = []

        def waiting() -> bool:
            idx = index_status(gw)
            if not idx["replication"]["running"] and idx["replication"]["lastRunOutcome"] == "budgetReached":
                between.append(idx)
                return True
            return False

        assert wait_for(waiting, timeout=60), index_status(gw)
        idx = between[-1]
        r = idx["replication"]
        assert r["waitingFor"] == "interval" and r["resumePending"] is True, r
        assert idx["hasOfflineData"] is False and idx["nextSyncAt"] == r["nextRunAt"], idx  # a first sync
        ended = stamp(r["lastRunAt"]) + r["lastRunDurationMs"] / 1000
        assert abs(stamp(r["nextRunAt"]) - (ended + 3)) < 0.25, r

        assert wait_for(lambda: index_status(gw)["objects"] == 12000, timeout=120), index_status(gw)
        runs = events_named(events, "runBudgetReached", "runDidStart")
        pairs = [(a, b) for (na, a), (nb, b) in zip(runs, runs[1:]) if na == "runBudgetReached" and nb == "runDidStart"]
        assert len(pairs) >= 2, [n for n, _ in runs]
        for reached, started in pairs:
            assert started["trigger"] == "schedule" and started["resumed"] is True, started
            assert stamp(started["at"]) - stamp(reached["at"]) >= 2, (reached, started)
        events.close()
    finally:
        fake.stop()


def stamp(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def events_named(events: Events, *names: str) -> list[tuple[str, dict]]:
    """The events of `products` with one of `names`, in order."""
    with events.lock:
        items = list(events.items)
    return [(n, d) for n, d in items if n in names and d.get("index") == "products"]


def test_pause_and_resume(gateway_factory, tmp_path):
    fake = FakeAlgolia(browse_page_size=5).start()
    try:
        fake.seed("products", records("p", 10), SETTINGS)
        policies = {"default": {"activeInterval": "1s", "idleInterval": "1s"}}
        gw = gateway_factory(algolia_policy_config(fake.url, policies, {"products": "default"}))
        events = Events(gw)
        assert wait_for(lambda: index_status(gw)["hasOfflineData"], timeout=20)

        # The command line pauses: no run starts.
        out = run_cli(["pause", "--config", str(gw.config_path), "default"])
        assert out.returncode == 0, out.stderr
        assert "default: paused" in out.stdout
        assert status(gw)["policies"]["default"]["paused"] is True
        time.sleep(0.5)  # a run that had just started ends
        runs = index_status(gw)["replication"]["runs"]
        time.sleep(2.5)
        paused = index_status(gw)["replication"]
        assert paused["runs"] == runs and paused["waitingFor"] == "paused"
        assert "policyPaused" in events.names(policy="default")
        table = run_cli(["status", "--config", str(gw.config_path)])
        assert table.returncode == 0 and "paused" in table.stdout

        # HTTP resumes: what is due runs at once.
        st, _, body = request("POST", gw.url("/_mirrorgate/policies/default/resume"))
        assert st == 200 and json.loads(body) == {"policy": "default", "paused": False}
        assert wait_for(lambda: index_status(gw)["replication"]["runs"] > runs, timeout=10)

        # Paused in the middle of a slow run: it stops at its next page, and resume continues it.
        fake.seed("products", records("q", 100))
        fake.delay = 0.1
        assert wait_for(lambda: index_status(gw)["syncing"], timeout=10)
        time.sleep(0.5)
        st, _, _ = request("POST", gw.url("/_mirrorgate/policies/default/pause"))
        assert st == 200
        assert wait_for(lambda: events.named("runDidFinish", index="products", stoppedBy="paused"), timeout=10)
        assert index_status(gw)["objects"] == 10  # the old version answers
        assert index_status(gw)["replication"]["resumePending"] is True
        out = run_cli(["resume", "--config", str(gw.config_path), "default"])
        assert out.returncode == 0, out.stderr
        assert wait_for(lambda: index_status(gw)["objects"] == 110, timeout=30)
        assert any(e["resumed"] for e in events.named("runDidStart", index="products"))

        # Metrics: runs by outcome (the paused run counts as stopped), durations, data age, paused gauge.
        def runs_by_outcome() -> dict:
            return {
                labels["outcome"]: v
                for labels, v in metric_samples(gw, "mirrorgate_replication_runs_total")
                if labels.get("mirror") == "algolia:products"
            }

        # The run's end is counted just after the new version answers.
        assert wait_for(lambda: runs_by_outcome().get("completed", 0) >= 2, timeout=10), runs_by_outcome()
        assert runs_by_outcome().get("stopped", 0) >= 1, runs_by_outcome()
        ages = [
            v
            for labels, v in metric_samples(gw, "mirrorgate_mirror_data_age_seconds")
            if labels.get("mirror") == "algolia:products"
        ]
        assert len(ages) == 1 and 0 <= ages[0] < 60, ages
        paused = {labels["policy"]: v for labels, v in metric_samples(gw, "mirrorgate_replication_paused")}
        assert paused.get("default") == 0, paused
        durations = [
            v
            for labels, v in metric_samples(gw, "mirrorgate_replication_run_duration_seconds_count")
            if labels.get("mirror") == "algolia:products"
        ]
        assert durations and durations[0] >= 3, durations

        # Unknown policies: 404 from the API, exit 2 from the command line.
        st, _, _ = request("POST", gw.url("/_mirrorgate/policies/nope/pause"))
        assert st == 404
        assert run_cli(["pause", "--config", str(gw.config_path), "nope"]).returncode == 2
        events.close()
    finally:
        fake.stop()


def test_kill_9_in_a_budgeted_run_keeps_the_schedule_and_the_resume_point(gateway_factory, tmp_path):
    fake = FakeAlgolia(browse_page_size=5).start()
    try:
        fake.seed("products", records("p", 10), SETTINGS)
        fake.seed("other", records("o", 3), SETTINGS)
        policies = {
            "default": {"activeInterval": "1s", "idleInterval": "1s", "maxRunDuration": "1500ms"},
            "frozen": {"idleInterval": "1s"},
        }
        config = algolia_policy_config(fake.url, policies, {"products": "default", "other": "frozen"})
        config["dataDir"] = str(tmp_path / "data")
        gw = gateway_factory(config)
        assert wait_for(lambda: index_status(gw)["objects"] == 10, timeout=20)
        assert wait_for(lambda: index_status(gw, "other")["objects"] == 3, timeout=20)
        st, _, _ = request("POST", gw.url("/_mirrorgate/policies/frozen/pause"))
        assert st == 200

        fake.seed("products", records("n", 300))
        fake.delay = 0.1
        # Let one run reach its budget, then kill the gateway in the middle of the next one.
        assert wait_for(lambda: index_status(gw)["replication"]["lastRunOutcome"] == "budgetReached", timeout=30)
        assert wait_for(lambda: index_status(gw)["replication"]["running"], timeout=10)
        time.sleep(0.5)
        before = index_status(gw)["replication"]
        kill_9(gw)
        calls_before = len(browse_calls(fake))

        gw2 = gateway_factory(config, name="gw2")
        events = Events(gw2)
        after = status(gw2)
        assert after["policies"]["frozen"]["paused"] is True  # the pause survived
        rep = after["algolia"]["indices"]["products"]["replication"]
        assert rep["runs"] >= before["runs"]
        assert rep["lastRunAt"] is not None
        assert after["algolia"]["indices"]["products"]["objects"] == 10  # never a half-built mirror
        # The run cut by the kill resumes at once, from its last stored page.
        assert wait_for(lambda: index_status(gw2)["objects"] == 310, timeout=60)
        first_after = browse_calls(fake)[calls_before]
        assert (first_after.json() or {}).get("cursor"), first_after.body
        assert len(browse_calls(fake)) - calls_before < 310 // 5
        assert any(e["resumed"] for e in events.named("runDidStart", index="products"))
        assert index_status(gw2, "other")["replication"]["waitingFor"] == "paused"
        events.close()
    finally:
        fake.stop()


# ------------------------------------------------------------------------------------------ OData


def test_an_odata_run_pushes_before_it_pulls(gateway_factory, odata_upstream, tmp_path):
    up = odata_upstream
    config = nw_config(up.root, routing="localFirst", policy="often")
    config["policies"] = {"often": {"activeInterval": "1s", "idleInterval": "1s"}}
    config["dataDir"] = str(tmp_path / "data")
    gw = gateway_factory(config)
    wait_downloaded(gw, "nw")
    events = Events(gw)
    mark = len(up.requests())
    r = requests.post(
        gw.url(MOUNT + "Products"),
        json={"ProductName": "Pushed Tea", "UnitPrice": 3.5, "Discontinued": False},
        headers=JSON_HEADERS,
        timeout=10,
    )
    assert r.status_code == 201, r.text
    assert wait_for(lambda: events.named("runDidFinish", service="nw", completed=True) and status_of(gw)["pendingRequests"] == 0, timeout=20)

    finish = [e for e in events.named("runDidFinish", service="nw") if "push" in e][0]
    assert finish["push"]["uploaded"] == 1
    assert finish["pull"]["entitySets"]["Products"] == 8
    # On the upstream: the POST, then the run's GETs of the defining requests.
    later = up.requests()[mark:]
    post = next(i for i, r in enumerate(later) if r.method == "POST")
    assert any(r.method == "GET" and r.path.endswith("/Products") for r in later[post + 1 :])
    # The run's events in order: started, push progress, pull progress, finished (with both).
    with events.lock:
        ordered = [(n, d) for n, d in events.items if d.get("service") == "nw" and n.startswith("run")]
    push = next(i for i, (n, d) in enumerate(ordered) if n == "runDidProgress" and d.get("phase") == "push")
    start = max(i for i, (n, _) in enumerate(ordered[:push]) if n == "runDidStart")
    end = next(i for i, (n, _) in enumerate(ordered) if i > push and n == "runDidFinish")
    run = ordered[start : end + 1]
    phases = [d.get("phase") for n, d in run if n == "runDidProgress"]
    assert phases[0] == "push" and "pull" in phases, phases
    assert run[-1][1]["push"]["uploaded"] == 1
    # The local read after the run has the server's key.
    r = requests.get(gw.url(MOUNT + "Products?$filter=ProductName eq 'Pushed Tea'"), headers={"Accept": "application/json"}, timeout=10)
    assert [p["ProductID"] > 0 for p in r.json()["value"]] == [True]
    events.close()


def test_a_budgeted_odata_download_resumes_from_its_last_page(gateway_factory, tmp_path):
    from upstreams.odata_northwind import ODataUpstream

    up = ODataUpstream(page_size=2, etags=True).start()
    # Full reads only: a delta read is one unit, never staged (see the test below).
    up.track_changes = False
    try:
        config = nw_config(up.root, routing="localFirst", policy="short")
        config["policies"] = {"short": {"activeInterval": "1s", "idleInterval": "1s", "maxRunDuration": "600ms"}}
        config["dataDir"] = str(tmp_path / "data")
        gw = gateway_factory(config)
        wait_downloaded(gw, "nw", timeout=30)
        assert wait_for(lambda: status_of(gw)["replication"]["lastRunOutcome"] == "completed", timeout=30)
        events = Events(gw)
        up.delay = 0.25  # every page a quarter of a second: a download now takes several runs
        mark = len(up.requests())
        r = requests.post(
            up.root + "Products",
            json={"ProductName": "Upstream Tea", "UnitPrice": 1, "Discontinued": False},
            headers=JSON_HEADERS,
            timeout=10,
        )
        assert r.status_code == 201, r.text
        counts = set()
        deadline = time.time() + 60
        while time.time() < deadline:
            n = requests.get(gw.url(MOUNT + "Products/$count"), timeout=10).text
            counts.add(n)
            if n == "8":
                break
            time.sleep(0.1)
        assert counts <= {"7", "8"} and "8" in counts, counts  # the old mirror answered until the new was complete
        assert len(events.named("runBudgetReached", service="nw")) >= 2
        pulls = [e for e in events.named("runDidProgress", service="nw") if e.get("phase") == "pull"]
        assert pulls
        # One pass over the pages (each run continued where the last stopped), plus a $metadata per run.
        gets = [r for r in up.requests()[mark:] if r.method == "GET"]
        pages = [r for r in gets if not r.path.endswith("$metadata")]
        assert len(pages) <= 14, [(r.path, r.query) for r in pages]
        events.close()
    finally:
        up.stop()


def test_a_budgeted_run_applies_each_delta_read_whole_and_continues_with_the_next_request(gateway_factory, tmp_path):
    """With change tracking, the download after the first is three delta reads: each is one unit (read and
    stored at once, never staged), a run whose budget ends stops before the next defining request, and the
    next run continues there without reading a delta again."""
    from upstreams.odata_northwind import ODataUpstream

    up = ODataUpstream(page_size=2, etags=True).start()
    try:
        config = nw_config(up.root, routing="localFirst", policy="short")
        config["policies"] = {"short": {"activeInterval": "1s", "idleInterval": "1s", "maxRunDuration": "600ms"}}
        config["dataDir"] = str(tmp_path / "data")
        gw = gateway_factory(config)
        wait_downloaded(gw, "nw", timeout=30)
        assert wait_for(lambda: status_of(gw)["replication"]["lastRunOutcome"] == "completed", timeout=30)
        assert status_of(gw)["lastDownload"]["kind"] == "full"
        # Paused while the upstream changes, so that the next run's download reads the change.
        st, _, _ = request("POST", gw.url("/_mirrorgate/policies/short/pause"))
        assert st == 200
        time.sleep(0.5)
        r = requests.post(
            up.root + "Products",
            json={"ProductName": "Upstream Tea", "UnitPrice": 1, "Discontinued": False},
            headers=JSON_HEADERS,
            timeout=10,
        )
        assert r.status_code == 201, r.text
        events = Events(gw)
        up.delay = 0.25  # $metadata and each delta a quarter of a second: the three deltas take two runs
        mark = len(up.requests())
        st, _, _ = request("POST", gw.url("/_mirrorgate/policies/short/resume"))
        assert st == 200
        assert wait_for(lambda: requests.get(gw.url(MOUNT + "Products/$count"), timeout=10).text == "8", timeout=30)
        assert wait_for(lambda: events.named("runDidFinish", service="nw", completed=True), timeout=30)
        stopped = events.named("runBudgetReached", service="nw")
        assert stopped and stopped[0]["pull"]["pages"] == 0, stopped  # stopped between two delta reads
        gets = [r for r in up.requests()[mark:] if r.method == "GET" and not r.path.endswith("$metadata")]
        deltas = [r.path.rsplit("/", 1)[-1] for r in gets if "deltatoken" in (r.path + "?" + r.query)]
        # Each defining request read once, by its delta link, over both runs; nothing read in full.
        assert sorted(deltas) == ["Customers", "Orders", "Products"], [(r.path, r.query) for r in gets]
        assert len(gets) == 3, [(r.path, r.query) for r in gets]
        last = status_of(gw)["lastDownload"]
        assert last["kind"] == "delta" and last["changed"] >= 0, last
        assert status_of(gw)["resumePending"] is False
        events.close()
    finally:
        up.stop()
