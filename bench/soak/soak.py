#!/usr/bin/env python3
"""Soak of issue 19's "Done means" (started by bench/soak/run.sh, which documents the knobs).

For DURATION seconds, 64 client connections (ALGOLIA_CONNECTIONS + ODATA_CONNECTIONS, each a thread with
one kept-alive HTTP connection) drive one gateway:

- Algolia: `POST /1/indexes/products/query` on a mirrored index (2,000 records synced from a fake Algolia,
  `requestStrategy: fallbackOnFailure`); the fake flaps every FLAP seconds between answering, 503, 500,
  429 and answering after 2 s (beyond the 1.5 s `timeout`). Every answer's status is counted: none under
  `/1/` may be a 5xx.
- OData: creates (`POST Products`, a unique name each), renames of the thread's own creates (`PATCH`) and
  reads on the Northwind service (`upstreamSupportsRepeatability: true`), the writes of all OData
  connections paced by one token bucket (WRITE_RATE per second); its upstream (odatapy behind a
  repeatability shim, in a child process of its own) is reached through a proxy that stops and starts
  listening every FLAP seconds, so writes are forwarded, queued offline and uploaded in turn.

Then the load stops, both upstreams stay up, and the queue drains (bounded). Counted on the upstream
itself: duplicates (a write executed more than once), losses (a write acknowledged to a client and never
executed, nor held in doubt), writes in doubt. RSS of the gateway (VmRSS): after start-up and the first
sync, after a warm-up minute of load, peak, and after the drain (plus a short settle). Prints a Markdown
section for bench/RESULTS.md. Loopback only; every loop is bounded; every process is stopped at exit.
"""

from __future__ import annotations

import http.client
import json
import multiprocessing
import os
import random
import re
import socket
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
# Bounded OData write rate (all OData connections together, a token bucket; reads keep their share of the mix,
# so they are paced with the writes). Unpaced, the first run's 16 writers were acknowledged ~1,090 writes/s
# offline against an upstream that is reachable half the time: a queue no upstream could drain. The upstream
# here (odatapy's in-memory store behind a repeatability shim and a flapping proxy, in its own process) scans
# its whole entity set on every request, so it slows with every created product: at 40/s (12,000 writes, 9,000
# products) it answered in ~100-280 ms under the soak's load and the queue did not drain within 600 s. 10/s
# (~3,000 writes) keeps it fast enough to drain. 0 = unpaced.
WRITE_RATE = float(os.environ.get("WRITE_RATE", "10"))
WARMUP = min(60.0, DURATION / 5)
APP_ID, API_KEY = "SOAKAPP", "soak-api-key-0123456789"
MOUNT = "/odata/nw/"
NAME = re.compile(rb'"ProductName"\s*:\s*"(SK-[^"]+)"')


class Passthrough(LoopbackProxy):
    """Forwards everything; `stop()`/`start()` make the upstream refuse and come back on the same port."""

    def _handle(self, h) -> None:
        # The answer's head and body go out in two writes: without TCP_NODELAY the body waits for the client's
        # delayed ACK of the head (about 20 ms per request, capping the proxy near 50 requests/s).
        h.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        answer = self._read_and_forward(h)
        if answer is not None:
            self._relay(h, *answer)


def rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


class TokenBucket:
    """`rate` tokens per second shared by every OData writer, at most `burst` saved up; `take` waits for one
    (bounded by `stop`). rate 0: no pacing."""

    def __init__(self, rate: float, burst: float):
        self.rate, self.burst = rate, burst
        self.tokens, self.at = burst, time.monotonic()
        self.lock = threading.Lock()

    def take(self, stop: threading.Event) -> bool:
        if self.rate <= 0:
            return True
        for _ in range(100_000):
            with self.lock:
                now = time.monotonic()
                self.tokens = min(self.burst, self.tokens + (now - self.at) * self.rate)
                self.at = now
                if self.tokens >= 1:
                    self.tokens -= 1
                    return True
                wait = (1 - self.tokens) / self.rate
            if stop.wait(min(wait, 0.5)):
                return False
        return False


class Counters:
    def __init__(self):
        self.lock = threading.Lock()
        self.algolia: dict[int, int] = {}
        self.algolia_errors = 0
        self.odata: dict[int, int] = {}
        self.odata_errors = 0  # OData requests without an answer (client-side exceptions), by kind below
        self.error_kinds: dict[str, int] = {}
        self.writes_sent = 0  # writes for which a request was started (answered or not)
        self.acked: set[str] = set()  # names of writes answered 200/201/204
        self.unanswered: set[str] = set()  # writes answered 5xx, or with no answer: outcome unknown to the client
        self.refused: dict[int, int] = {}  # writes answered 4xx, by status (never to be executed)
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


def odata_client(port: int, stop: threading.Event, c: Counters, n: int, seed: int, bucket: TokenBucket) -> None:
    rng = random.Random(seed)
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=15)
    headers = {"Accept": "application/json", "Content-Type": "application/json"}
    mine: list[str] = []
    for i in range(10_000_000):
        if stop.is_set():
            break
        kind = rng.random()
        # The name is set only for a write (a read's failure is no unanswered write), and only once the write
        # has its token and is about to be sent.
        name = ""
        try:
            if kind < 0.45 or not mine:
                if not bucket.take(stop):
                    break
                name = f"SK-{n}-{i}"
                with c.lock:
                    c.writes_sent += 1
                body = json.dumps({"ProductName": name, "UnitPrice": 1, "Discontinued": False})
                conn.request("POST", MOUNT + "Products", body=body, headers=headers)
            elif kind < 0.6:
                if not bucket.take(stop):
                    break
                name = f"SK-{n}-{i}"
                with c.lock:
                    c.writes_sent += 1
                body = json.dumps({"ProductName": name})
                conn.request("PATCH", MOUNT + f"Products({rng.choice(mine)})", body=body, headers=headers)
            else:
                conn.request("GET", MOUNT + "Products?$top=5&$orderby=ProductID%20desc", headers=headers)
            r = conn.getresponse()
            data = r.read()
            c.count(c.odata, r.status)
            if name and r.status >= 500:
                with c.lock:  # 502/504 of a forwarded write: its outcome is unknown
                    c.unanswered.add(name)
            elif name and 400 <= r.status < 500:
                c.count(c.refused, r.status)
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
        except (OSError, http.client.HTTPException, ValueError) as e:
            with c.lock:
                c.odata_errors += 1
                k = f"{'write' if name else 'read'}: {type(e).__name__}"
                c.error_kinds[k] = c.error_kinds.get(k, 0) + 1
                if name:
                    c.unanswered.add(name)
            conn.close()
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=15)
    conn.close()


def executions(up) -> dict[str, int]:
    """How many times the upstream executed each soak write (by its unique name): POST/PATCH answered 2xx,
    and the parts of `$batch` requests (changesets), counted per name in the body."""
    executed: dict[str, int] = {}
    for r in up.requests():
        if r.method in ("POST", "PATCH") and r.status[:1] == "2":
            for name in NAME.findall(r.body):
                executed[name.decode()] = executed.get(name.decode(), 0) + 1
    return executed


def _upstream_main(conn) -> None:
    """The OData upstream chain (odatapy, the repeatability shim, the flapping proxy) in a child process with
    its own interpreter lock, so the 64 client threads of the driver do not starve it. Commands over `conn`:
    "down", "up", "executions", "stop"; every answer is one message."""
    up = ODataUpstream(page_size=50, etags=True).start()
    shim = RepeatabilityShim(up.origin).start()
    gate = Passthrough(shim.url).start()
    conn.send(gate.url)
    try:
        for _ in range(1_000_000):
            if not conn.poll(3600):
                break
            cmd = conn.recv()
            if cmd == "down":
                gate.stop()
                conn.send(True)
            elif cmd == "up":
                gate.start()
                conn.send(True)
            elif cmd == "executions":
                conn.send(executions(up))
            else:
                break
    finally:
        gate.stop()
        shim.stop()
        up.stop()
        conn.send(True)


class UpstreamProcess:
    """The driver's handle on `_upstream_main`'s process (started before any thread of the driver)."""

    def __init__(self):
        ctx = multiprocessing.get_context("fork")
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_upstream_main, args=(child,), daemon=True)
        self.proc.start()
        if not self.conn.poll(60):
            raise RuntimeError("the OData upstream process did not start")
        self.url = self.conn.recv()

    def _ask(self, cmd: str, timeout: float = 120):
        self.conn.send(cmd)
        if not self.conn.poll(timeout):
            raise RuntimeError(f"the OData upstream process did not answer {cmd!r}")
        return self.conn.recv()

    def stop(self) -> None:  # the proxy stops listening: the upstream refuses
        self._ask("down")

    def start(self) -> None:
        self._ask("up")

    def executions(self) -> dict[str, int]:
        return self._ask("executions")

    def close(self) -> None:
        try:
            self._ask("stop", timeout=30)
        except (OSError, EOFError, RuntimeError):
            pass
        self.proc.join(timeout=10)
        if self.proc.is_alive():
            self.proc.kill()
            self.proc.join(timeout=5)


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
    upstream = UpstreamProcess()  # forked first, while the driver has no thread yet
    gate = upstream
    fake = FakeAlgolia().start()
    fake.seed(
        "products",
        [{"objectID": f"p{i}", "name": f"{b} phone {i}", "brand": b, "price": i} for i, b in
         ((i, ["Apple", "Samsung", "Nokia", "Fairphone"][i % 4]) for i in range(2000))],
        {"searchableAttributes": ["name", "brand"], "attributesForFaceting": ["brand"]},
    )
    fake.browse_page_size = 1000
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
    bucket = TokenBucket(WRITE_RATE, burst=max(1.0, WRITE_RATE))
    stop = threading.Event()
    threads: list[threading.Thread] = []
    try:
        for _ in range(600):  # first sync and download (bounded)
            _, st = admin(gw, "GET", "/_mirrorgate/status")
            idx = st["algolia"]["indices"]["products"]
            if idx.get("lastSync") and st["odata"]["services"]["nw"].get("lastDownloadAt"):
                break
            time.sleep(0.1)
        executed_before = len(upstream.executions())  # none of the soak's names: the bootstrap holds none
        rss_start = rss_kb(gw.proc.pid)
        for i in range(ALGOLIA_CONNECTIONS):
            threads.append(threading.Thread(target=algolia_client, args=(gw.port, stop, c, i), daemon=True))
        for i in range(ODATA_CONNECTIONS):
            threads.append(threading.Thread(target=odata_client, args=(gw.port, stop, c, i, 1000 + i, bucket),
                                            daemon=True))
        for t in threads:
            t.start()
        t0 = time.time()
        rss_warm = 0
        rss_peak = rss_start
        queue_peak = 0
        next_status = t0 + 5
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
            if time.time() >= next_status:  # the queue's length, every 5 s
                _, st = admin(gw, "GET", "/_mirrorgate/status")
                queue_peak = max(queue_peak, st["odata"]["services"]["nw"]["pendingRequests"])
                next_status = time.time() + 5
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
        still = sum(t.is_alive() for t in threads)
        elapsed = time.time() - t0
        fake.fail_status, fake.delay = None, 0.0
        if not odata_up:
            gate.start()
        executed_load = sum(upstream.executions().values())
        # Drain (bounded by DRAIN seconds): ask for an upload (waited for) until the queue is empty. An upload
        # the scheduler started is answered 409: wait a second and look again (the first run's loop spun on
        # those 409s, ran out of its 1,200 iterations after 140 s and called that "drained").
        drain_start = time.time()
        uploads: dict[int, int] = {}
        drained = False
        queue_after_load = None
        for _ in range(100_000):
            _, st = admin(gw, "GET", "/_mirrorgate/status")
            s = st["odata"]["services"]["nw"]
            if queue_after_load is None:
                queue_after_load = s["pendingRequests"]
            if s["pendingRequests"] == 0 and not s["uploading"]:
                drained = True
                break
            if time.time() - drain_start > DRAIN:
                break
            try:
                status, _ = admin(gw, "POST", "/_mirrorgate/odata/services/nw/upload?wait=true", timeout=60)
            except (OSError, http.client.HTTPException):
                status = 0
            uploads[status] = uploads.get(status, 0) + 1
            if status != 200:
                time.sleep(1)
            rss_peak = max(rss_peak, rss_kb(gw.proc.pid))
        drain_s = time.time() - drain_start
        time.sleep(10)  # settle: pools and caches idle
        rss_end = rss_kb(gw.proc.pid)
        s = admin(gw, "GET", "/_mirrorgate/status")[1]["odata"]["services"]["nw"]
        drained = drained and s["pendingRequests"] == 0
        executed = upstream.executions()
        duplicates = {k: v for k, v in executed.items() if v > 1}
        # Acknowledged and never executed; only judged once the queue drained (queued ones are not lost).
        lost = sorted(k for k in c.acked if k not in executed) if drained else []
        strays = sorted(k for k in executed if k not in c.acked and k not in c.unanswered)
        unanswered_executed = sum(1 for k in c.unanswered if k in executed)
        five = sum(v for k, v in c.algolia.items() if k >= 500)
        algolia_total = sum(c.algolia.values())
        odata_total = sum(c.odata.values())
        ok = not duplicates and drained and not lost and not strays and five == 0
        rss_ok = rss_end <= rss_warm * 1.10
        print("## soak (issue 19)\n")
        print(
            f"`bash bench/soak/run.sh` — {elapsed:.0f} s of load, {ALGOLIA_CONNECTIONS} Algolia + "
            f"{ODATA_CONNECTIONS} OData connections, OData writes paced at "
            f"{f'{WRITE_RATE:g}/s in all' if WRITE_RATE > 0 else 'no limit'}, upstream states flipped every "
            f"{FLAP:.0f} s ({flips} flips); load average at the end {os.getloadavg()[0]:.1f}.\n"
        )
        print("| measure | value |\n|---|---:|")
        print(f"| Algolia requests | {algolia_total} ({algolia_total / elapsed:.0f}/s) |")
        print(f"| Algolia statuses | {dict(sorted(c.algolia.items()))} |")
        print(f"| **5xx under /1/** | **{five}** |")
        print(f"| Algolia client-side errors (no answer) | {c.algolia_errors} |")
        print(f"| OData requests answered | {odata_total} ({odata_total / elapsed:.0f}/s) |")
        print(f"| OData statuses | {dict(sorted(c.odata.items()))} |")
        print(f"| OData requests without an answer (client-side errors) | {c.odata_errors} {dict(sorted(c.error_kinds.items()))} |")
        print(f"| OData writes sent | {c.writes_sent} ({c.writes_sent / elapsed:.1f}/s) |")
        print(f"| OData writes acknowledged (200/201/204) | {len(c.acked)} |")
        print(f"| OData writes refused (4xx) | {sum(c.refused.values())} {dict(sorted(c.refused.items()))} |")
        print(f"| OData writes with an unknown outcome (5xx or no answer) / of them executed | {len(c.unanswered)} / {unanswered_executed} |")
        print(f"| OData 201 answers without a readable ProductID | {c.unreadable_count} |")
        print(f"| upstream executions of the soak's writes: during the load / in all | {executed_load} / {sum(executed.values())} |")
        print(f"| **duplicates** (executed more than once) | **{len(duplicates)}** |")
        print(f"| **losses** (acknowledged, never executed) | **{len(lost) if drained else 'not judged: queue not drained'}** |")
        print(f"| executed without being acknowledged (unknown outcomes excluded) | {len(strays)} |")
        print(f"| in doubt / ErrorArchive after the drain | {s['inDoubt']} / {s['errorArchive']} |")
        print(f"| queue: peak during the load (sampled every 5 s) / when the load stopped | {queue_peak} / {queue_after_load} |")
        drain_text = f"drained in {drain_s:.1f} s" if drained else f"NOT drained after {drain_s:.1f} s"
        print(f"| queue after the drain | {s['pendingRequests']} ({drain_text}; upload calls by status {dict(sorted(uploads.items()))}) |")
        print(f"| RSS after start-up and first sync | {rss_start / 1024:.1f} MiB |")
        print(f"| RSS after {WARMUP:.0f} s of load (the start of the comparison) | {rss_warm / 1024:.1f} MiB |")
        print(f"| RSS peak (load and drain) | {rss_peak / 1024:.1f} MiB |")
        print(f"| RSS after the drain (+10 s) | {rss_end / 1024:.1f} MiB ({(rss_end / max(1, rss_warm) - 1) * 100:+.1f} %) |")
        if still or executed_before:
            print(f"| client threads still running after the join / soak names executed before the load | {still} / {executed_before} |")
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
        upstream.close()
        fake.stop()


if __name__ == "__main__":
    main()
