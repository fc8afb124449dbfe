"""OData local-query benchmark: gateway (HTTP, keep-alive, JSON out) vs the same SQL on SQLite directly.

The gateway is driven by wrk (one thread, one kept-alive connection, `--latency`), a C client whose own
round trip costs ~20 µs, so the figures are the gateway's and not a Python client's (~100 µs a round trip
from `http.client`). The gateway's SQL for each query (``SELECT t0.* … WHERE … ORDER BY …, key LIMIT ?
OFFSET ?``) is run with Python's sqlite3 on the gateway's own mirror file, fetching every row, for as
long, right after, in the same run. Each query's answer is first checked once with Python.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import random
import socket
import sqlite3
import statistics
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import quote

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import wrkout  # noqa: E402

METADATA = """<?xml version="1.0" encoding="utf-8"?>
<edmx:Edmx Version="4.0" xmlns:edmx="http://docs.oasis-open.org/odata/ns/edmx">
  <edmx:DataServices>
    <Schema Namespace="Bench" xmlns="http://docs.oasis-open.org/odata/ns/edm">
      <EntityType Name="Item">
        <Key><PropertyRef Name="ID"/></Key>
        <Property Name="ID" Type="Edm.Int32" Nullable="false"/>
        <Property Name="Name" Type="Edm.String"/>
        <Property Name="Category" Type="Edm.String"/>
        <Property Name="Price" Type="Edm.Decimal" Scale="2"/>
        <Property Name="Qty" Type="Edm.Int32"/>
        <Property Name="Created" Type="Edm.DateTimeOffset"/>
      </EntityType>
      <EntityContainer Name="C"><EntitySet Name="Items" EntityType="Bench.Item"/></EntityContainer>
    </Schema>
  </edmx:DataServices>
</edmx:Edmx>
"""

CATS = ["tools", "garden", "books", "music", "toys", "food", "sport", "home"]

# (name, OData query, equivalent SQL where/order, bindings, limit)
QUERIES = [
    ("filter eq + top", "$filter=Category eq 'books'&$top=10", '"t0"."Category" = ?', ["books"], '"t0"."ID" ASC', 10),
    ("range + orderby desc + top", "$filter=Price gt 900&$orderby=Price desc&$top=20", '"t0"."Price" > ?', [900],
     '"t0"."Price" DESC, "t0"."ID" ASC', 20),
    ("orderby + top", "$orderby=Created desc&$top=10", "1", [], '"t0"."Created" DESC, "t0"."ID" ASC', 10),
    ("and + orderby + top", "$filter=Qty lt 5 and Category eq 'toys'&$orderby=Qty&$top=10",
     '"t0"."Qty" < ? AND "t0"."Category" = ?', [5, "toys"], '"t0"."Qty" ASC, "t0"."ID" ASC', 10),
    ("key lookup", None, '"t0"."ID" = ?', [77777], '"t0"."ID" ASC', 1),
    ("date range + top", "$filter=Created ge 2025-06-01T00:00:00Z and Created lt 2025-06-02T00:00:00Z&$top=50",
     '"t0"."Created" >= ? AND "t0"."Created" < ?', ["2025-06-01T00:00:00Z", "2025-06-02T00:00:00Z"], '"t0"."ID" ASC', 50),
]


def free_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def query_paths() -> list[tuple[str, str]]:
    """(name, gateway path) of the HTTP floor, the local $metadata and every query."""
    paths = [("HTTP floor (GET /_mirrorgate/health, no SQL)", "/_mirrorgate/health"),
             ("local $metadata (worker-pool hop, no SQL)", "/odata/bench/$metadata")]
    for name, odata, *_ in QUERIES:
        paths.append((name, "/odata/bench/Items(77777)" if odata is None
                      else "/odata/bench/Items?" + quote(odata, safe="$&=',:")))
    return paths


def cpu_ticks(pid: int) -> int:
    """utime + stime of every thread of `pid`, in clock ticks."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def cpu_per_request(pid: int, port: int, n: int) -> None:
    """The gateway's CPU time per request (µs) for `n` requests of each query on one kept-alive connection."""
    hz = os.sysconf("SC_CLK_TCK")
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    print("| query | requests | gateway CPU µs per request |")
    print("|---|---:|---:|")
    for name, path in query_paths():
        for _ in range(50):  # warm-up
            conn.request("GET", path, headers={"Accept": "application/json"})
            conn.getresponse().read()
        before = cpu_ticks(pid)
        for _ in range(n):
            conn.request("GET", path, headers={"Accept": "application/json"})
            r = conn.getresponse()
            r.read()
            assert r.status == 200, (path, r.status)
        used = (cpu_ticks(pid) - before) / hz
        print(f"| {name} | {n} | {used / n * 1e6:.1f} |")


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--seconds", type=float, default=3.0, help="per query, for wrk and for raw SQLite each")
    ap.add_argument("--cpu-requests", type=int, default=0,
                    help="instead of latencies: the gateway's CPU time per request over N requests per query"
                         " (one kept-alive connection; from /proc/PID/stat, so a busy machine moves it little)")
    args = ap.parse_args()
    if not shutil.which("wrk"):
        raise SystemExit("bench: wrk missing (bash scripts/setup.sh --bench installs it)")
    binary = os.environ["MIRRORGATE_BIN"]
    work = Path(tempfile.mkdtemp(prefix="mg-odata-bench-"))
    (work / "metadata.xml").write_text(METADATA)
    rnd = random.Random(7)
    rows = []
    for i in range(1, args.rows + 1):
        day = rnd.randrange(0, 365)
        sec = rnd.randrange(0, 86400)
        t = time.gmtime(1735689600 + day * 86400 + sec)
        rows.append(
            '{"ID":%d,"Name":"item %d","Category":"%s","Price":%d.%02d,"Qty":%d,"Created":"%s"}'
            % (i, i, CATS[i % len(CATS)], rnd.randrange(0, 1000), rnd.randrange(0, 100), rnd.randrange(0, 100),
               time.strftime("%Y-%m-%dT%H:%M:%SZ", t))
        )
    (work / "items.json").write_text('{"value":[' + ",".join(rows) + "]}")
    port = free_port()
    data_dir = work / "data"
    (work / "config.yaml").write_text(
        f"""server: {{listen: "127.0.0.1:{port}"}}
dataDir: {data_dir}
log: {{level: warning}}
odata:
  services:
    bench:
      mount: /odata/bench/
      upstream: http://127.0.0.1:{free_port()}/nothing/
      version: v4
      routing: localFirst
      bootstrap:
        metadata: {work / 'metadata.xml'}
        data: {{Items: {work / 'items.json'}}}
"""
    )
    proc = subprocess.Popen([binary, "serve", "--config", str(work / "config.yaml")],
                            stdout=subprocess.DEVNULL, stderr=open(work / "stderr.log", "w"))
    try:
        t0 = time.time()
        conn = None
        while time.time() - t0 < 120:
            try:
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
                conn.request("GET", "/_mirrorgate/status")
                st = json.loads(conn.getresponse().read())["odata"]["services"]["bench"]
                if st.get("entitySets", {}).get("Items") == args.rows:
                    break
            except (OSError, KeyError, ValueError):
                conn = None
            time.sleep(0.2)
        else:
            raise SystemExit("the mirror was not loaded: " + (work / "stderr.log").read_text()[-2000:])
        print(f"bootstrap of {args.rows} rows loaded in {time.time() - t0:.1f} s (start included)")
        if args.cpu_requests > 0:
            cpu_per_request(proc.pid, port, args.cpu_requests)
            return
        db = sqlite3.connect(f"file:{data_dir / 'odata-bench.sqlite'}?mode=ro", uri=True)
        print(
            "| query | gateway p50 ms | gateway p99 ms | SQLite p50 ms | SQLite p99 ms | p50 ratio"
            " | p50 ratio to SQLite + floor | rows |"
        )
        print("|---|---:|---:|---:|---:|---:|---:|---:|")
        verdict = []
        secs = max(1, int(round(args.seconds)))

        def gateway(path: str) -> dict:
            cmd = ["wrk", "-t1", "-c1", f"-d{secs}s", "--latency", "-H", "Accept: application/json",
                   f"http://127.0.0.1:{port}{path}"]
            res = wrkout.parse(subprocess.run(cmd, capture_output=True, text=True, timeout=secs + 30).stdout)
            assert res["requests"] > 0 and res["non2xx"] == 0 and not res["errors"], (path, res)
            return res

        floor = gateway("/_mirrorgate/health")
        print(f"| HTTP floor (GET /_mirrorgate/health, no SQL) | {floor['p50']:.3f} | {floor['p99']:.3f} | | | | | |")
        hop = gateway("/odata/bench/$metadata")
        print(f"| local $metadata (worker-pool hop, no SQL) | {hop['p50']:.3f} | {hop['p99']:.3f} | | | | | |")
        for name, odata, where, binds, order, limit in QUERIES:
            path = "/odata/bench/Items(77777)" if odata is None else "/odata/bench/Items?" + quote(odata, safe="$&=',:")
            sql = f'SELECT "t0".* FROM "Items" AS "t0" WHERE 1 AND ({where}) ORDER BY {order} LIMIT ? OFFSET 0'
            conn.request("GET", path, headers={"Accept": "application/json"})
            r = conn.getresponse()
            body = r.read()
            assert r.status == 200, body[:300]
            n_rows = len(db.execute(sql, binds + [limit]).fetchall())
            if odata is not None:
                assert len(json.loads(body)["value"]) == n_rows, (name, n_rows)
            gw = gateway(path)
            raw = []
            t_end = time.monotonic() + secs
            for i in range(10_000_000):
                if time.monotonic() > t_end:
                    break
                c = time.perf_counter()
                db.execute(sql, binds + [limit]).fetchall()
                d = time.perf_counter()
                if i >= 20:  # warm-up excluded
                    raw.append((d - c) * 1000)
            g50, g99, s50, s99 = gw["p50"], gw["p99"], pct(raw, 50), pct(raw, 99)
            # Beside the target's ratio, the one bench/queue uses: raw SQLite plus the loopback HTTP floor that
            # no gateway answer can go below.
            floored = g50 / (s50 + floor["p50"])
            verdict.append((name, g50 / s50, g99, floored))
            print(
                f"| {name} | {g50:.3f} | {g99:.3f} | {s50:.3f} | {s99:.3f} | {g50 / s50:.2f} | {floored:.2f} | {n_rows} |"
            )
        worst_ratio = max(v[1] for v in verdict)
        worst_p99 = max(v[2] for v in verdict)
        worst_floored = max(v[3] for v in verdict)
        print(
            f"worst p50 ratio {worst_ratio:.2f} (target ≤ 2), worst gateway p99 {worst_p99:.3f} ms (target ≤ 5),"
            f" worst p50 ratio to SQLite + HTTP floor {worst_floored:.2f}"
        )
    finally:
        proc.terminate()
        proc.wait(timeout=10)


if __name__ == "__main__":
    main()
