#!/usr/bin/env python3
"""Request-queue benchmark (issue 6): the durable offline write, against anchors measured in the same run.

Started by bench/queue/run.sh (which documents the knobs). Loopback only, every run bounded by a duration
or a count, every process started here is stopped at exit. Prints a Markdown section for bench/RESULTS.md.

(a) Acknowledged offline creates through the gateway: wrk, 1 connection, a Lua POST of a ~1 KB entity to
    a bootstrapped service (`routing: localFirst`, upstream refused): each answer waits for the fsync of
    the mirror row + queue row. Anchors, same rounds, interleaved: raw SQLite (Python sqlite3, WAL,
    synchronous=FULL, one ~1 KB row per transaction) and the loopback HTTP floor (wrk, 1 connection,
    `GET /_mirrorgate/health` of the same gateway). Target: p50 <= 1.5 x (raw SQLite p50 + floor p50).
    Also a second gateway whose store is encrypted (`storeEncryptionKey`): target p50 <= 1.3 x the first;
    (a') compares the two in alternating 1-second slices (SLICES each), with each one's CPU per write.
(b) In process: the append (mirror row + queue row, one FULL transaction, through the Storage module) vs
    raw SQLite C API, the Swift executable in bench/queue (QueueBench). Target: p50 <= 1.5 x raw. Also the
    append on an encrypted store: target p50 <= 1.3 x the plain append.
(c) Upload throughput: N queued creates uploaded to the odatapy Northwind upstream (one request at a time,
    a fresh connection each, repeatability headers), against the same N POSTs sent straight to the
    upstream by Python with a fresh connection each; and from a gateway with an encrypted store.
"""

from __future__ import annotations

import http.client
import json
import os
import resource
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(REPO / "Tests" / "EndToEnd"))
sys.path.insert(0, str(REPO / "bench"))
import wrkout  # noqa: E402

ROUNDS = int(os.environ.get("ROUNDS", "3"))
DURATION = int(os.environ.get("DURATION", "5"))  # seconds per wrk / raw-SQLite run
CPU_WRITES = int(os.environ.get("CPU_WRITES", "0"))  # > 0: also the gateway's CPU per acknowledged write
APPENDS = int(os.environ.get("APPENDS", "1000"))  # transactions per kind per round in (b)
UPLOADS = int(os.environ.get("UPLOADS", "300"))  # queued creates per round in (c)
SLICES = int(os.environ.get("SLICES", "12"))  # 1-second slices per gateway in (a'), alternating
MG_BIN = os.environ["MIRRORGATE_BIN"]
STORE_KEY = "bench store key 0123"  # storeEncryptionKey of the encrypted variants
QUEUE_BENCH = os.environ.get("QUEUE_BENCH", str(HERE / ".build" / "release" / "QueueBench"))
NCPU = os.cpu_count() or 1
HZ = os.sysconf("SC_CLK_TCK")

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
        <Property Name="Note" Type="Edm.String"/>
      </EntityType>
      <EntityContainer Name="C"><EntitySet Name="Items" EntityType="Bench.Item"/></EntityContainer>
    </Schema>
  </edmx:DataServices>
</edmx:Edmx>
"""
BODY = json.dumps({"Name": "bench item", "Category": "tools", "Price": 12.5, "Note": "x" * 900})
RAW_ROW = json.dumps({"ID": -1, "Name": "bench item", "Category": "tools", "Price": 12.5, "Note": "x" * 900})

procs: list[subprocess.Popen] = []


def free_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


# -- CPU accounting: the machine's busy time not spent in what is measured ------------------------------
def _machine() -> tuple[int, int]:
    f = open("/proc/stat").readline().split()[1:]
    v = [int(x) for x in f]
    busy = v[0] + v[1] + v[2] + v[5] + v[6] + (v[7] if len(v) > 7 else 0)
    return busy, busy + v[3] + v[4]


def _pid_jiffies(pid: int) -> int:
    try:
        fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
        return int(fields[11]) + int(fields[12])
    except OSError:
        return 0


class CPU:
    def __init__(self, pids: list[int]):
        self.pids = pids

    def __enter__(self):
        self.m0 = _machine()
        self.p0 = sum(_pid_jiffies(p) for p in self.pids)
        c, s = resource.getrusage(resource.RUSAGE_CHILDREN), resource.getrusage(resource.RUSAGE_SELF)
        self.r0 = c.ru_utime + c.ru_stime + s.ru_utime + s.ru_stime
        self.t0 = time.monotonic()
        return self

    def __exit__(self, *exc):
        m1 = _machine()
        ours = (sum(_pid_jiffies(p) for p in self.pids) - self.p0) / HZ
        c, s = resource.getrusage(resource.RUSAGE_CHILDREN), resource.getrusage(resource.RUSAGE_SELF)
        ours += c.ru_utime + c.ru_stime + s.ru_utime + s.ru_stime - self.r0
        busy = (m1[0] - self.m0[0]) / HZ
        total = (m1[1] - self.m0[1]) / HZ or 1e-9
        self.other = max(0.0, (busy - ours) / total * 100)


# -- processes -----------------------------------------------------------------------------------------
def start_gateway(work: Path, services: str) -> tuple[subprocess.Popen, int]:
    port = free_port()
    cfg = work / "config.yaml"
    cfg.write_text(f'server: {{listen: "127.0.0.1:{port}"}}\ndataDir: {work / "data"}\nlog: {{level: warning}}\n'
                   f"odata:\n  services:\n{services}")
    p = subprocess.Popen([MG_BIN, "serve", "--config", str(cfg)], stdout=subprocess.DEVNULL,
                         stderr=open(work / "stderr.log", "w"))
    procs.append(p)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if get(port, "/_mirrorgate/health")[0] == 200:
                return p, port
        except OSError:
            pass
        time.sleep(0.1)
    raise SystemExit("gateway did not start: " + (work / "stderr.log").read_text()[-2000:])


def get(port: int, path: str, method: str = "GET", body: bytes | None = None, headers=None, timeout=60):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        c.request(method, path, body=body, headers=headers or {})
        r = c.getresponse()
        return r.status, r.read()
    finally:
        c.close()


def status(port: int, name: str) -> dict:
    return json.loads(get(port, "/_mirrorgate/status")[1])["odata"]["services"][name]


# -- measurements --------------------------------------------------------------------------------------
def wrk(url: str, script: Path | None, seconds: int | None = None) -> dict:
    seconds = seconds or DURATION
    cmd = ["wrk", "-t1", "-c1", f"-d{seconds}s", "--latency", url]
    if script:
        cmd[1:1] = ["-s", str(script)]
    return wrkout.parse(subprocess.run(cmd, capture_output=True, text=True, timeout=seconds + 30).stdout)


def raw_sqlite(path: Path) -> dict:
    for suffix in ("", "-wal", "-shm"):
        Path(str(path) + suffix).unlink(missing_ok=True)
    db = sqlite3.connect(str(path), isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=FULL")
    db.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, body TEXT NOT NULL)")
    ms = []
    t0 = time.monotonic()
    for _ in range(1_000_000):
        if time.monotonic() - t0 > DURATION:
            break
        a = time.perf_counter()
        db.execute("BEGIN IMMEDIATE")
        db.execute("INSERT INTO t (body) VALUES (?)", (RAW_ROW,))
        db.execute("COMMIT")
        ms.append((time.perf_counter() - a) * 1000)
    db.close()
    return {"perSec": len(ms) / (time.monotonic() - t0), "p50": pct(ms, 50), "p99": pct(ms, 99)}


def device_probe(path: Path) -> dict:
    """pwrite(4 KiB) + fdatasync on one file, back to back and with 1 ms of think time between: shows
    how this machine's flush latency depends on the pacing of the flushes (context for the anchors)."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    out = {}
    try:
        for name, gap in (("backToBack", 0.0), ("gap1ms", 0.001)):
            ms = []
            for i in range(300):
                if gap:
                    time.sleep(gap)
                a = time.perf_counter()
                os.pwrite(fd, b"x" * 4096, (i % 64) * 4096)
                os.fdatasync(fd)
                ms.append((time.perf_counter() - a) * 1000)
            out[name] = pct(ms, 50)
    finally:
        os.close(fd)
    return out


def main() -> None:
    work = Path(tempfile.mkdtemp(prefix="mg-queue-bench-"))
    print(f"work dir {work}; load average before: {os.getloadavg()}", file=sys.stderr)
    (work / "metadata.xml").write_text(METADATA)
    (work / "items.json").write_text('{"value":[{"ID":1,"Name":"a","Category":"tools","Price":1,"Note":""}]}')
    def bench_gateway(name: str, extra: str = "") -> tuple[subprocess.Popen, int]:
        d = work / name
        d.mkdir()
        g, p = start_gateway(d, f"""    bench:
      mount: /odata/bench/
      upstream: http://127.0.0.1:{free_port()}/nothing/
      version: v4
      routing: localFirst{extra}
      bootstrap:
        metadata: {work / 'metadata.xml'}
        data: {{Items: {work / 'items.json'}}}
""")
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and status(p, "bench").get("entitySets", {}).get("Items") != 1:
            time.sleep(0.1)
        st, body = get(p, "/odata/bench/Items", "POST", BODY.encode(), {"Content-Type": "application/json"})
        assert st == 201, (st, body[:300])
        return g, p

    gw, port = bench_gateway("a")
    gw_enc, port_enc = bench_gateway("a-enc", f"\n      storeEncryptionKey: {json.dumps(STORE_KEY)}")
    lua = work / "post.lua"
    lua.write_text(
        'wrk.method = "POST"\nwrk.body = ' + json.dumps(BODY) + "\n"
        'wrk.headers["Content-Type"] = "application/json"\nwrk.headers["Accept"] = "application/json"\n'
    )
    probe = device_probe(work / "probe.bin")
    print(json.dumps(probe), file=sys.stderr)
    rows_a = []
    for r in range(1, ROUNDS + 1):
        order = ["sqlite", "floor", "gateway", "gateway-encrypted"]
        if r % 2 == 0:
            order.reverse()
        for target in order:
            with CPU([gw.pid, gw_enc.pid]) as cpu:
                if target == "sqlite":
                    res = raw_sqlite(work / "raw.sqlite")
                elif target == "floor":
                    res = wrk(f"http://127.0.0.1:{port}/_mirrorgate/health", None)
                elif target == "gateway":
                    res = wrk(f"http://127.0.0.1:{port}/odata/bench/Items", lua)
                else:
                    res = wrk(f"http://127.0.0.1:{port_enc}/odata/bench/Items", lua)
            res.update(round=r, target=target, other=cpu.other)
            rows_a.append(res)
            print(json.dumps(res), file=sys.stderr)
    # (a') the same two gateways in alternating 1-second slices: a disk shared with other tenants changes
    # its flush time within seconds, so short alternation compares like with like; and the gateway's own
    # CPU time per acknowledged write, which the disk does not change.
    rows_e = []
    for i in range(2 * SLICES):
        target, g, p = ("gateway", gw, port) if i % 2 == 0 else ("gateway-encrypted", gw_enc, port_enc)
        j0 = _pid_jiffies(g.pid)
        res = wrk(f"http://127.0.0.1:{p}/odata/bench/Items", lua, seconds=1)
        res.update(slice=i // 2 + 1, target=target, cpuMs=(_pid_jiffies(g.pid) - j0) / HZ * 1000 / max(1, res["requests"]))
        rows_e.append(res)
    if CPU_WRITES > 0:
        # The gateway's own CPU time per acknowledged write over CPU_WRITES POSTs on one kept-alive
        # connection (utime + stime of its threads): unlike latencies, a busy disk or CPU moves it little.
        # Both gateways, the unencrypted one first.
        for label, g, p in (("gateway", gw, port), ("gateway with an encrypted store", gw_enc, port_enc)):
            c = http.client.HTTPConnection("127.0.0.1", p, timeout=60)
            before = _pid_jiffies(g.pid)
            for _ in range(CPU_WRITES):
                c.request("POST", "/odata/bench/Items", body=BODY.encode(), headers={"Content-Type": "application/json"})
                r = c.getresponse()
                r.read()
                assert r.status == 201, r.status
            c.close()
            print(f"{label} CPU per acknowledged write: {(_pid_jiffies(g.pid) - before) / HZ / CPU_WRITES * 1e6:.1f} µs"
                  f" ({CPU_WRITES} POSTs, one connection)")
    pending = status(port, "bench")["pendingRequests"] + status(port_enc, "bench")["pendingRequests"]
    for g in (gw, gw_enc):
        g.terminate()
        g.wait(timeout=15)

    # (b) in process
    rows_b = []
    other_b = float("nan")
    if Path(QUEUE_BENCH).exists():
        (work / "b").mkdir()
        with CPU([]) as cpu:
            out = subprocess.run([QUEUE_BENCH, str(work / "b"), str(APPENDS), str(ROUNDS)], capture_output=True,
                                 text=True, timeout=600)
        rows_b = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
        other_b = cpu.other
        print(out.stdout + out.stderr, file=sys.stderr)
    else:
        print(f"(b) skipped: no {QUEUE_BENCH}", file=sys.stderr)

    # (c) upload throughput
    rows_c = []
    try:
        from upstreams.odata_northwind import ODataUpstream
    except ImportError as exc:
        ODataUpstream = None
        print(f"(c) skipped: {exc}", file=sys.stderr)
    if ODataUpstream is not None:
        for r in range(1, ROUNDS + 1):
            up = ODataUpstream(page_size=None, etags=True).start()
            body = json.dumps({"ProductName": "bench", "UnitPrice": 1, "Discontinued": False}).encode()
            ports = {}
            started = []
            try:
                for target, extra in (("gateway", ""), ("gateway-encrypted", f"\n      storeEncryptionKey: {json.dumps(STORE_KEY)}")):
                    c_dir = work / f"c{r}-{target}"
                    c_dir.mkdir()
                    g2, p2 = start_gateway(c_dir, f"""    nw:
      mount: /odata/nw/
      upstream: {up.root}
      routing: localFirst{extra}
      definingRequests:
        - {{name: products, query: Products}}
""")
                    started.append(g2)
                    ports[target] = p2
                    deadline = time.monotonic() + 30
                    while time.monotonic() < deadline:
                        s = status(p2, "nw")
                        if s.get("lastDownloadAt") and s["reachable"] and not s["uploading"] and not s.get("downloading"):
                            break
                        time.sleep(0.1)
                    time.sleep(0.3)
                    c = http.client.HTTPConnection("127.0.0.1", p2, timeout=30)
                    for _ in range(UPLOADS):
                        c.request("POST", "/odata/nw/Products", body=body, headers={"Content-Type": "application/json"})
                        resp = c.getresponse()
                        resp.read()
                        assert resp.status == 201, resp.status
                    c.close()
                order = ["gateway", "direct", "gateway-encrypted"]
                if r % 2 == 0:
                    order.reverse()
                for target in order:
                    with CPU([g.pid for g in started]) as cpu:
                        if target != "direct":
                            st, out = get(ports[target], "/_mirrorgate/odata/services/nw/upload?wait=true", "POST", timeout=300)
                            res = json.loads(out)
                            assert st == 200 and res["uploaded"] == UPLOADS and res["failed"] == 0, (st, res)
                            secs = res["durationMs"] / 1000
                        else:
                            t0 = time.monotonic()
                            for i in range(UPLOADS):
                                st, _ = get(up.port, "/nw.svc/Products", "POST", body,
                                            {"Content-Type": "application/json", "Accept": "application/json"})
                                assert st == 201, st
                            secs = time.monotonic() - t0
                    res = {"round": r, "target": target, "perSec": UPLOADS / secs, "other": cpu.other}
                    rows_c.append(res)
                    print(json.dumps(res), file=sys.stderr)
            finally:
                for g2 in started:
                    g2.terminate()
                    g2.wait(timeout=15)
                up.stop()

    commit = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    dirty = subprocess.run(["git", "-C", str(REPO), "diff", "--quiet", "HEAD", "--", "Sources", "bench/queue"]).returncode
    report(rows_a, rows_b, rows_c, rows_e, pending, commit + ("+dirty" if dirty else ""), probe, other_b)


def report(rows_a, rows_b, rows_c, rows_e, pending, commit, probe, other_b) -> None:
    print(f"`bash bench/queue/run.sh` — commit `{commit}`, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
          f"{NCPU} cores, load average at the end {os.getloadavg()[0]:.2f}; {ROUNDS} rounds, order alternating; "
          "`other CPU` = machine busy time not spent in the measured processes (gateway, wrk, QueueBench, this "
          "driver and its in-process upstream), in % of all cores.\n")
    print(f"(a) Acknowledged offline creates, 1 connection, {DURATION} s per run (wrk `-t1 -c1 --latency`, "
          "~1 KB JSON POST, `routing: localFirst`, upstream refused); raw SQLite: Python sqlite3, WAL, "
          "synchronous=FULL, one ~1 KB row per transaction; floor: wrk on `GET /_mirrorgate/health`.\n")
    print("| round | target | req/s | p50 ms | p99 ms | other CPU |")
    print("|---|---|---:|---:|---:|---:|")
    for x in rows_a:
        print(f"| {x['round']} | {x['target']} | {x['perSec']:.0f} | {x['p50']:.3f} | {x['p99']:.3f} | {x['other']:.0f}% |")
    med = {t: {k: statistics.median(x[k] for x in rows_a if x["target"] == t) for k in ("perSec", "p50", "p99")}
           for t in ("sqlite", "floor", "gateway", "gateway-encrypted")}
    anchor = med["sqlite"]["p50"] + med["floor"]["p50"]
    ratio = med["gateway"]["p50"] / anchor
    bad = sum(x.get("non2xx", 0) for x in rows_a)
    print(f"\n**Medians: gateway {med['gateway']['perSec']:.0f} acknowledged writes/s, p50 {med['gateway']['p50']:.3f} ms, "
          f"p99 {med['gateway']['p99']:.3f} ms; raw SQLite p50 {med['sqlite']['p50']:.3f} ms "
          f"({med['sqlite']['perSec']:.0f}/s); HTTP floor p50 {med['floor']['p50']:.3f} ms. Ratio gateway p50 / "
          f"(SQLite p50 + floor p50) = {ratio:.2f}** (target ≤ 1.5: {'met' if ratio <= 1.5 else 'NOT met'}); "
          f"non-2xx answers: {bad}; requests queued at the end: {pending}.\n")
    enc = med["gateway-encrypted"]["p50"] / med["gateway"]["p50"]
    print(f"Encrypted store (`storeEncryptionKey`) in the 5-second rounds above: gateway p50 "
          f"{med['gateway-encrypted']['p50']:.3f} ms ({med['gateway-encrypted']['perSec']:.0f}/s) vs "
          f"{med['gateway']['p50']:.3f} ms unencrypted: {enc:.2f}×.\n")
    if rows_e:
        print(f"(a') The same two gateways in {len(rows_e)} alternating 1-second slices (wrk `-t1 -c1`); `CPU ms/write` = "
              "the gateway process's CPU time per acknowledged write.\n")
        print("| slice | target | req/s | p50 ms | p99 ms | CPU ms/write |")
        print("|---|---|---:|---:|---:|---:|")
        for x in rows_e:
            print(f"| {x['slice']} | {x['target']} | {x['perSec']:.0f} | {x['p50']:.3f} | {x['p99']:.3f} | {x['cpuMs']:.3f} |")
        me = {t: {k: statistics.median(x[k] for x in rows_e if x["target"] == t) for k in ("p50", "cpuMs", "perSec")}
              for t in ("gateway", "gateway-encrypted")}
        rp = me["gateway-encrypted"]["p50"] / me["gateway"]["p50"]
        rc = me["gateway-encrypted"]["cpuMs"] / me["gateway"]["cpuMs"]
        print(f"\n**Encrypted / unencrypted, medians of the slices: p50 {me['gateway-encrypted']['p50']:.3f} / "
              f"{me['gateway']['p50']:.3f} ms = {rp:.2f}× (target ≤ 1.3: {'met' if rp <= 1.3 else 'NOT met'}); "
              f"CPU per acknowledged write {me['gateway-encrypted']['cpuMs']:.3f} / {me['gateway']['cpuMs']:.3f} ms "
              f"= {rc:.2f}×.**\n")
    print(f"Device probe (pwrite 4 KiB + fdatasync, p50 of 300): back to back {probe['backToBack']:.3f} ms, "
          f"with 1 ms between flushes {probe['gap1ms']:.3f} ms.\n")
    if rows_b:
        print(f"(b) In process, {APPENDS} transactions per kind and round (QueueBench): `append` = mirror row + "
              "queue row in one immediate transaction with synchronous=FULL through the Storage module; `raw` = "
              "SQLite C API, one ~1 KB row per transaction, WAL, synchronous=FULL. Other CPU during (b): "
              f"{other_b:.0f}%.\n")
        print("| round | kind | tx/s | p50 ms | p99 ms |")
        print("|---|---|---:|---:|---:|")
        for x in rows_b:
            print(f"| {x['round']} | {x['kind']} | {x['perSec']:.0f} | {x['p50ms']:.3f} | {x['p99ms']:.3f} |")
        mb = {k: statistics.median(x["p50ms"] for x in rows_b if x["kind"] == k)
              for k in ("raw", "append", "append-encrypted")}
        rb = mb["append"] / mb["raw"]
        re = mb["append-encrypted"] / mb["append"]
        print(f"\n**Median p50: append {mb['append']:.3f} ms, raw {mb['raw']:.3f} ms, ratio {rb:.2f}** "
              f"(target ≤ 1.5: {'met' if rb <= 1.5 else 'NOT met'}). **Encrypted append p50 "
              f"{mb['append-encrypted']:.3f} ms: {re:.2f}× the plain append** (target ≤ 1.3: "
              f"{'met' if re <= 1.3 else 'NOT met'}).\n")
    if rows_c:
        print(f"(c) Upload: {UPLOADS} queued creates per round uploaded to odatapy's in-memory Northwind (Python, "
              "in this driver's process), one request at a time on a fresh connection each; `direct` = the same "
              "POSTs sent by Python straight to the upstream, a fresh connection each.\n")
        print("| round | target | requests/s | other CPU |")
        print("|---|---|---:|---:|")
        for x in rows_c:
            print(f"| {x['round']} | {x['target']} | {x['perSec']:.0f} | {x['other']:.0f}% |")
        mc = {t: statistics.median(x["perSec"] for x in rows_c if x["target"] == t)
              for t in ("gateway", "direct", "gateway-encrypted")}
        print(f"\n**Median upload {mc['gateway']:.0f} requests/s, direct {mc['direct']:.0f} requests/s "
              f"(ratio {mc['gateway'] / mc['direct']:.2f}); from an encrypted store {mc['gateway-encrypted']:.0f} "
              f"requests/s ({mc['gateway'] / mc['gateway-encrypted']:.2f}× the time per request of the unencrypted "
              "store).**")


if __name__ == "__main__":
    try:
        main()
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait(timeout=10)
