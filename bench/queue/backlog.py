#!/usr/bin/env python3
"""Upload backlog benchmark (issue 19 D7): does an upload backlog drain as fast when it is long?

Started by bench/queue/run.sh after bench.py (or alone: `MIRRORGATE_BIN=... python3 bench/queue/backlog.py`).
Loopback only, every run bounded, every process started here stopped at exit. Prints a Markdown section.

For each backlog size N (BACKLOG, default "100,10000"), ROUNDS times, alternating the order of the sizes:
a fresh gateway (`routing: localFirst`, bootstrapped V4 `Items`, upstream = the fake below) takes N offline
writes on one kept-alive connection — creates, every 5th write a PATCH of the entity created just before it
(by its gateway-minted key, so every upload of a create rewrites a queued request) — then one
`POST /_mirrorgate/odata/services/bench/upload?wait=true` drains it. Reported: the drain rate (N / the
run's durationMs), and the gateway's RSS (VmRSS) when idle before the writes, after the writes, after the
drain, and 3 s later.

The upstream is a minimal Python HTTP server (threads, a fresh connection per request as the gateway
uploads) answering every POST with 201 and the entity with a server key, every PATCH with 204, every GET
with 200: its cost per request does not depend on how many entities it holds, so the rates compare the
gateway alone. Target (issue 19): the 10,000-write backlog drains at no less than the 100-write rate.
"""

from __future__ import annotations

import http.client
import http.server
import itertools
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
MG_BIN = os.environ["MIRRORGATE_BIN"]
ROUNDS = int(os.environ.get("ROUNDS", "3"))
SIZES = [int(x) for x in os.environ.get("BACKLOG", "100,10000").split(",")]

METADATA = """<?xml version="1.0" encoding="utf-8"?>
<edmx:Edmx Version="4.0" xmlns:edmx="http://docs.oasis-open.org/odata/ns/edmx">
  <edmx:DataServices>
    <Schema Namespace="Bench" xmlns="http://docs.oasis-open.org/odata/ns/edm">
      <EntityType Name="Item">
        <Key><PropertyRef Name="ID"/></Key>
        <Property Name="ID" Type="Edm.Int32" Nullable="false"/>
        <Property Name="Name" Type="Edm.String"/>
        <Property Name="Note" Type="Edm.String"/>
      </EntityType>
      <EntityContainer Name="C"><EntitySet Name="Items" EntityType="Bench.Item"/></EntityContainer>
    </Schema>
  </edmx:DataServices>
</edmx:Edmx>
"""
NOTE = "x" * 900
procs: list[subprocess.Popen] = []


class FastUpstream:
    """POST → 201 + the entity with the next server key; PATCH/PUT/DELETE → 204; GET → 200 `{}`."""

    def __init__(self):
        keys = itertools.count(1)
        lock = threading.Lock()
        self.counts = {"POST": 0, "PATCH": 0}

        upstream = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def _reply(self, status: int, body: bytes = b""):
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("OData-Version", "4.0")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self):
                self._reply(200, b'{"value":[]}')

            def do_POST(self):
                n = int(self.headers.get("Content-Length") or 0)
                sent = json.loads(self.rfile.read(n) or b"{}")
                with lock:
                    key = next(keys)
                    upstream.counts["POST"] += 1
                sent["ID"] = key
                self._reply(201, json.dumps(sent).encode())

            def do_PATCH(self):
                n = int(self.headers.get("Content-Length") or 0)
                self.rfile.read(n)
                with lock:
                    upstream.counts["PATCH"] += 1
                self._reply(204)

        class Server(http.server.ThreadingHTTPServer):
            daemon_threads = True
            request_queue_size = 128

        self.httpd = Server(("127.0.0.1", 0), Handler)
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    def start(self) -> "FastUpstream":
        self.thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def free_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def call(port: int, method: str, path: str, body: bytes | None = None, headers=None, timeout=60, conn=None):
    c = conn or http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        c.request(method, path, body=body, headers=headers or {})
        r = c.getresponse()
        return r.status, r.getheaders(), r.read()
    finally:
        if conn is None:
            c.close()


def rss_kib(pid: int) -> int:
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def status(port: int) -> dict:
    return json.loads(call(port, "GET", "/_mirrorgate/status")[2])["odata"]["services"]["bench"]


def one_run(work: Path, n: int) -> dict:
    up = FastUpstream().start()
    port = free_port()
    (work / "m.xml").write_text(METADATA)
    (work / "items.json").write_text('{"value":[{"ID":1,"Name":"a","Note":""}]}')
    cfg = work / "config.yaml"
    cfg.write_text(
        f'server: {{listen: "127.0.0.1:{port}"}}\ndataDir: {work / "data"}\nlog: {{level: warning}}\n'
        "odata:\n  services:\n    bench:\n      mount: /odata/bench/\n"
        f"      upstream: http://127.0.0.1:{up.port}/svc/\n      version: v4\n      routing: localFirst\n"
        f"      bootstrap:\n        metadata: {work / 'm.xml'}\n        data: {{Items: {work / 'items.json'}}}\n"
    )
    gw = subprocess.Popen([MG_BIN, "serve", "--config", str(cfg)], stdout=subprocess.DEVNULL,
                          stderr=open(work / "stderr.log", "w"))
    procs.append(gw)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                s = status(port)
                if s.get("entitySets", {}).get("Items") == 1 and s["reachable"] and not s["uploading"]:
                    break
            except OSError:
                pass
            time.sleep(0.1)
        time.sleep(1)
        rss_idle = rss_kib(gw.pid)
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        headers = {"Content-Type": "application/json"}
        t0 = time.monotonic()
        last_key = None
        for i in range(n):
            if i % 5 == 4 and last_key:
                st, _, body = call(port, "PATCH", f"/odata/bench/Items{last_key}",
                                   json.dumps({"Name": f"patched {i}"}).encode(), headers, conn=conn)
                assert st == 204, (st, body[:200])
            else:
                st, h, body = call(port, "POST", "/odata/bench/Items",
                                   json.dumps({"Name": f"item {i}", "Note": NOTE}).encode(), headers, conn=conn)
                assert st == 201, (st, body[:200])
                location = dict((k.lower(), v) for k, v in h)["location"]
                last_key = location[location.rindex("("):]
        conn.close()
        write_secs = time.monotonic() - t0
        rss_written = rss_kib(gw.pid)
        assert status(port)["pendingRequests"] == n
        st, _, body = call(port, "POST", "/_mirrorgate/odata/services/bench/upload?wait=true", timeout=3600)
        result = json.loads(body)
        if st == 504:
            # The gateway answers `?wait=true` within its request timeout (30 s); the upload goes on: wait for
            # it (bounded) and take its figures from the status's `lastUpload`.
            deadline = time.monotonic() + 1800
            while time.monotonic() < deadline:
                s = status(port)
                if not s["uploading"] and s["lastUpload"] and s["lastUpload"].get("requestsBefore") == n:
                    result = s["lastUpload"]
                    result["remaining"] = s["pendingRequests"]
                    st = 200
                    break
                time.sleep(0.5)
        assert st == 200 and result["uploaded"] == n and result["failed"] == 0 and result["remaining"] == 0, result
        rss_drained = rss_kib(gw.pid)
        time.sleep(3)
        rss_later = rss_kib(gw.pid)
        assert up.counts["POST"] + up.counts["PATCH"] == n, up.counts
        return {
            "n": n, "perSec": n / (result["durationMs"] / 1000), "durationMs": result["durationMs"],
            "writesPerSec": n / write_secs, "rssIdle": rss_idle, "rssWritten": rss_written,
            "rssDrained": rss_drained, "rssLater": rss_later,
        }
    finally:
        gw.terminate()
        gw.wait(timeout=30)
        up.stop()


def main() -> None:
    base = Path(tempfile.mkdtemp(prefix="mg-backlog-bench-"))
    rows = []
    for r in range(1, ROUNDS + 1):
        for n in (SIZES if r % 2 else list(reversed(SIZES))):
            work = base / f"r{r}-{n}"
            work.mkdir()
            res = one_run(work, n)
            res["round"] = r
            rows.append(res)
            print(json.dumps(res), file=sys.stderr)
    commit = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    dirty = subprocess.run(["git", "-C", str(REPO), "diff", "--quiet", "HEAD", "--", "Sources"]).returncode
    print(f"(d) Upload backlog (issue 19 D7), commit `{commit}{'+dirty' if dirty else ''}`, binary {MG_BIN}: N offline "
          "writes (4 creates to 1 PATCH of the entity created just before, ~1 KB each) queued, then one upload "
          "drains them to a minimal Python upstream (fresh connection per request). RSS in MiB (VmRSS).\n")
    print("| round | backlog | drain writes/s | drain s | offline writes/s | RSS idle | after writes | after drain | 3 s later |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for x in rows:
        print(f"| {x['round']} | {x['n']} | {x['perSec']:.0f} | {x['durationMs'] / 1000:.1f} | {x['writesPerSec']:.0f} | "
              f"{x['rssIdle'] / 1024:.1f} | {x['rssWritten'] / 1024:.1f} | {x['rssDrained'] / 1024:.1f} | "
              f"{x['rssLater'] / 1024:.1f} |")
    med = {n: statistics.median(x["perSec"] for x in rows if x["n"] == n) for n in SIZES}
    small, large = min(SIZES), max(SIZES)
    ratio = med[large] / med[small]
    print(f"\n**Median drain rate: {small} writes {med[small]:.0f}/s, {large} writes {med[large]:.0f}/s, ratio "
          f"{ratio:.2f}** (target ≥ 1.0: "
          f"{'met' if ratio >= 1.0 else ('not met, within 10 % (noise?)' if ratio >= 0.9 else 'NOT met')}).")


if __name__ == "__main__":
    try:
        main()
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait(timeout=10)
