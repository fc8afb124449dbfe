#!/usr/bin/env python3
"""Soak of issue 19's "Done means" (started by bench/soak/run.sh, which documents the knobs).

For DURATION seconds, 64 client connections (ALGOLIA_CONNECTIONS + ODATA_CONNECTIONS, each a thread with
one kept-alive HTTP connection) drive one gateway:

- Algolia: `POST /1/indexes/products/query` on a mirrored index (2,000 records synced from a fake Algolia,
  `requestStrategy: fallbackOnFailure`); the fake flaps every FLAP seconds between answering, 503, 500,
  429 and answering after 2 s (beyond the 1.5 s `timeout`). Every answer's status is counted: none under
  `/1/` may be a 5xx.
- OData: creates (`POST Products`, a unique name each), renames of the thread's own creates (`PATCH`) and
  reads on the Northwind service (onlineFirst, `upstreamSupportsRepeatability: true`); its upstream
  (odatapy behind a repeatability shim) is reached through a proxy that stops and starts listening every
  FLAP seconds, so writes are forwarded, queued offline and uploaded in turn.

Then the load stops, both upstreams stay up, and the queue drains (bounded). Counted on the upstream
itself: duplicates (a write executed more than once), losses (a write acknowledged to a client and never
executed, nor held in doubt), writes in doubt. RSS of the gateway (VmRSS): after start-up and the first
sync, after a warm-up minute of load, peak, and after the drain (plus a short settle). Prints a Markdown
section for bench/RESULTS.md. Loopback only; every loop is bounded; every process is stopped at exit.
"""

from __future__ import annotations

import http.client
import json
import os
import random
import re
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(REPO / "Tests" / "EndToEnd"))

from harness import Gateway  # noqa: E402
from upstreams.fake_algolia import FakeAlgolia  # noqa: E402
from upstreams.faults import LoopbackProxy  # noqa: E402
from upstreams.odata_northwind import ODataUpstream  # noqa: E402
from upstreams.repeatability_shim import RepeatabilityShim  # noqa: E402

DURATION = float(os.environ.get("DURATION", "300"))
ALGOLIA_CONNECTIONS = int(os.environ.get("ALGOLIA_CONNECTIONS", "48"))
ODATA_CONNECTIONS = int(os.environ.get("ODATA_CONNECTIONS", "16"))
FLAP = float(os.environ.get("FLAP", "10"))
DRAIN = float(os.environ.get("DRAIN", "600"))
WARMUP = min(60.0, DURATION / 5)
APP_ID, API_KEY = "SOAKAPP", "soak-api-key-0123456789"
MOUNT = "/odata/nw/"
NAME = re.compile(rb'"ProductName"\s*:\s*"(SK-[^"]+)"')


class Passthrough(LoopbackProxy):
    """Forwards everything; `stop()`/`start()` make the upstream refuse and come back on the same port."""

    def _handle(self, h) -> None:
        answer = self._read_and_forward(h)
        if answer is not None:
            self._relay(h, *answer)


def rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


class Counters:
    def __init__(self):
        self.lock = threading.Lock()
        self.algolia: dict[int, int] = {}
        self.algolia_errors = 0
        self.odata: dict[int, int] = {}
        self.odata_errors = 0
        self.acked: set[str] = set()
        self.unanswered: set[str] = set()
        self.unreadable: list[bytes] = []  # 201 answers without a readable ProductID (first few kept)
        self.unreadable_count = 0

    def count(self, table: dict, status: int) -> None:
        with self.lock:
            table[status] = table.get(status, 0) + 1


def algolia_client(port: int, stop: threading.Event, c: Counters, seed: int) -> None:
    rng = random.Random(seed)
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=15)
    headers = {"X-Algolia-Application-Id": APP_ID, "X-Algolia-API-Key": API_KEY, "Content-Type": "application/json"}
    for _ in range(10_000_000):
        if stop.is_set():
            break
        q = rng.choice(["phone", "aple", "sam", "", "nokia 1", "fair"])
        body = json.dumps({"query": q, "hitsPerPage": 5, "facets": ["brand"]})
        try:
            conn.request("POST", "/1/indexes/products/query", body=body, headers=headers)
            r = conn.getresponse()
            r.read()
            c.count(c.algolia, r.status)
        except (OSError, http.client.HTTPException):
            with c.lock:
                c.algolia_errors += 1
            conn.close()
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=15)
    conn.close()


def odata_client(port: int, stop: threading.Event, c: Counters, n: int, seed: int) -> None:
    rng = random.Random(seed)
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=15)
    headers = {"Accept": "application/json", "Content-Type": "application/json"}
    mine: list[str] = []
    for i in range(10_000_000):
        if stop.is_set():
            break
        name = f"SK-{n}-{i}"
        kind = rng.random()
        try:
            if kind < 0.45 or not mine:
                body = json.dumps({"ProductName": name, "UnitPrice": 1, "Discontinued": False})
                conn.request("POST", MOUNT + "Products", body=body, headers=headers)
            elif kind < 0.6:
                body = json.dumps({"ProductName": name})
                conn.request("PATCH", MOUNT + f"Products({rng.choice(mine)})", body=body, headers=headers)
            else:
                conn.request("GET", MOUNT + "Products?$top=5&$orderby=ProductID desc", headers=headers)
                name = ""
            r = conn.getresponse()
            data = r.read()
            c.count(c.odata, r.status)
            if name and r.status >= 500:
                with c.lock:  # 502/504 of a forwarded write: its outcome is unknown
                    c.unanswered.add(name)
            if name and r.status in (200, 201, 204):
                with c.lock:
                    c.acked.add(name)
                if r.status == 201:
                    try:
                        mine.append(str(json.loads(data)["ProductID"]))
                    except (ValueError, KeyError, TypeError):
                        with c.lock:
                            c.unreadable_count += 1
                            if len(c.unreadable) < 3:
                                c.unreadable.append(data[:300])
        except (OSError, http.client.HTTPException, ValueError):
            with c.lock:
                c.odata_errors += 1
                if name:
                    c.unanswered.add(name)
            conn.close()
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=15)
    conn.close()


def admin(gw, method: str, path: str, timeout: float = 30) -> tuple[int, dict]:
    conn = http.client.HTTPConnection("127.0.0.1", gw.port, timeout=timeout)
    try:
        conn.request(method, path, headers=gw.admin_headers())
        r = conn.getresponse()
        data = r.read()
        return r.status, (json.loads(data) if data[:1] in (b"{", b"[") else {})
    finally:
        conn.close()


def main() -> None:
    fake = FakeAlgolia().start()
    fake.seed(
        "products",
        [{"objectID": f"p{i}", "name": f"{b} phone {i}", "brand": b, "price": i} for i, b in
         ((i, ["Apple", "Samsung", "Nokia", "Fairphone"][i % 4]) for i in range(2000))],
        {"searchableAttributes": ["name", "brand"], "attributesForFaceting": ["brand"]},
    )
    fake.browse_page_size = 1000
    up = ODataUpstream(page_size=50, etags=True).start()
    shim = RepeatabilityShim(up.origin).start()
    gate = Passthrough(shim.url).start()
    work = Path(tempfile.mkdtemp(prefix="mg-soak-"))
    config = {
        "server": {"maxConnections": 256, "requestTimeout": "10s", "shutdownGrace": "5s"},
        "log": {"level": "warning", "format": "text"},
        "dataDir": str(work / "data"),
        "algolia": {
            "appId": APP_ID, "apiKey": API_KEY, "hosts": [fake.url], "connectTimeout": "300ms",
            "timeout": "1500ms",
            "indices": {"products": {"mirrored": True, "requestStrategy": "fallbackOnFailure",
                                     "dataSelectionQueries": [{"query": {"query": ""}, "maxObjects": 5000}]}},
        },
        "odata": {"services": {"nw": {
            "mount": MOUNT, "upstream": gate.url + "/nw.svc/", "timeout": "2s",
            "upstreamSupportsRepeatability": "true",
            "definingRequests": [{"name": "products", "query": "Products"}, {"name": "customers", "query": "Customers"}],
        }}},
    }
    gw = Gateway(work, config, name="soak").start()
    c = Counters()
    stop = threading.Event()
    threads: list[threading.Thread] = []
    try:
        for _ in range(600):  # first sync and download (bounded)
            _, st = admin(gw, "GET", "/_mirrorgate/status")
            idx = st["algolia"]["indices"]["products"]
            if idx.get("lastSync") and st["odata"]["services"]["nw"].get("lastDownloadAt"):
                break
            time.sleep(0.1)
        rss_start = rss_kb(gw.proc.pid)
        for i in range(ALGOLIA_CONNECTIONS):
            threads.append(threading.Thread(target=algolia_client, args=(gw.port, stop, c, i), daemon=True))
        for i in range(ODATA_CONNECTIONS):
            threads.append(threading.Thread(target=odata_client, args=(gw.port, stop, c, i, 1000 + i), daemon=True))
        for t in threads:
            t.start()
        t0 = time.time()
        rss_warm = 0
        rss_peak = rss_start
        states = [("answering", None, 0.0), ("503", 503, 0.0), ("answering", None, 0.0), ("500", 500, 0.0),
                  ("429", 429, 0.0), ("answering", None, 0.0), ("slow 2 s", None, 2.0)]
        flips = 0
        odata_up = True
        next_flip = t0 + FLAP
        while time.time() - t0 < DURATION:
            time.sleep(0.5)
            rss_peak = max(rss_peak, rss_kb(gw.proc.pid))
            if not rss_warm and time.time() - t0 >= WARMUP:
                rss_warm = rss_kb(gw.proc.pid)
            if time.time() >= next_flip:
                flips += 1
                _, fail, delay = states[flips % len(states)]
                fake.fail_status, fake.delay = fail, delay
                if flips % 2 == 0:
                    if odata_up:
                        gate.stop()
                    else:
                        gate.start()
                    odata_up = not odata_up
                next_flip = time.time() + FLAP
                fake.clear()  # the fake records every request: keep the driver's memory flat
        stop.set()
        for t in threads:
            t.join(timeout=30)
        elapsed = time.time() - t0
        fake.fail_status, fake.delay = None, 0.0
        if not odata_up:
            gate.start()
        # Drain (bounded): ask for uploads until the queue is empty.
        drain_start = time.time()
        st = {}
        for _ in range(1200):
            if time.time() - drain_start > DRAIN:
                break
            admin(gw, "POST", "/_mirrorgate/odata/services/nw/upload?wait=true", timeout=60)
            _, st = admin(gw, "GET", "/_mirrorgate/status")
            s = st["odata"]["services"]["nw"]
            if s["pendingRequests"] == 0 and not s["uploading"]:
                break
            time.sleep(0.1)
        drain_s = time.time() - drain_start
        time.sleep(10)  # settle: pools and caches idle
        rss_end = rss_kb(gw.proc.pid)
        s = admin(gw, "GET", "/_mirrorgate/status")[1]["odata"]["services"]["nw"]
        executed: dict[str, int] = {}
        for r in up.requests():
            if r.method in ("POST", "PATCH") and r.status[:1] == "2":
                for name in NAME.findall(r.body):
                    executed[name.decode()] = executed.get(name.decode(), 0) + 1
        duplicates = {k: v for k, v in executed.items() if v > 1}
        drained = s["pendingRequests"] == 0
        # Acknowledged and never executed; only judged once the queue drained (queued ones are not lost).
        lost = sorted(k for k in c.acked if k not in executed) if drained else []
        strays = sorted(k for k in executed if k not in c.acked and k not in c.unanswered)
        five = sum(v for k, v in c.algolia.items() if k >= 500)
        algolia_total = sum(c.algolia.values())
        odata_total = sum(c.odata.values())
        ok = not duplicates and not lost and not strays and five == 0 and s["pendingRequests"] == 0
        rss_ok = rss_end <= rss_warm * 1.10
        print("## soak (issue 19)\n")
        print(
            f"`bash bench/soak/run.sh` — {elapsed:.0f} s of load, {ALGOLIA_CONNECTIONS} Algolia + "
            f"{ODATA_CONNECTIONS} OData connections, upstream states flipped every {FLAP:.0f} s ({flips} flips); "
            f"load average at the end {os.getloadavg()[0]:.1f}.\n"
        )
        print("| measure | value |\n|---|---:|")
        print(f"| Algolia requests | {algolia_total} ({algolia_total / elapsed:.0f}/s) |")
        print(f"| Algolia statuses | {dict(sorted(c.algolia.items()))} |")
        print(f"| **5xx under /1/** | **{five}** |")
        print(f"| Algolia client-side errors (no answer) | {c.algolia_errors} |")
        print(f"| OData requests | {odata_total} ({odata_total / elapsed:.0f}/s) |")
        print(f"| OData statuses | {dict(sorted(c.odata.items()))} |")
        print(f"| OData writes acknowledged | {len(c.acked)} |")
        print(f"| OData writes without an answer | {len(c.unanswered)} |")
        print(f"| OData 201 answers without a readable ProductID | {c.unreadable_count} |")
        print(f"| upstream executions of those writes | {sum(executed.values())} |")
        print(f"| **duplicates** | **{len(duplicates)}** |")
        print(f"| **losses** (acknowledged, never executed) | **{len(lost) if drained else 'not judged: queue not drained'}** |")
        print(f"| executed without being acknowledged (unanswered excluded) | {len(strays)} |")
        print(f"| in doubt / ErrorArchive after the drain | {s['inDoubt']} / {s['errorArchive']} |")
        print(f"| queue after the drain | {s['pendingRequests']} (drained in {drain_s:.1f} s) |")
        print(f"| RSS after start-up and first sync | {rss_start / 1024:.1f} MiB |")
        print(f"| RSS after {WARMUP:.0f} s of load (the start of the comparison) | {rss_warm / 1024:.1f} MiB |")
        print(f"| RSS peak | {rss_peak / 1024:.1f} MiB |")
        print(f"| RSS after the drain (+10 s) | {rss_end / 1024:.1f} MiB ({(rss_end / max(1, rss_warm) - 1) * 100:+.1f} %) |")
        print()
        print(f"**0 duplicates, 0 losses, 0 5xx under /1/, queue drained: {'met' if ok else 'NOT met'}.** "
              f"**RSS within 10 % of its start after the drain: {'met' if rss_ok else 'NOT met'}.**")
        if c.unreadable:
            print(f"\nfirst 201 answers without a readable ProductID: {c.unreadable}")
        if duplicates or lost or strays:
            print(f"\nduplicates {list(duplicates.items())[:10]}, lost {lost[:10]}, strays {strays[:10]}")
    finally:
        stop.set()
        gw.terminate()
        gate.stop()
        shim.stop()
        up.stop()
        fake.stop()


if __name__ == "__main__":
    main()
