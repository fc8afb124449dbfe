#!/usr/bin/env python3
"""Forwarding benchmark: wrk through Mirrorgate vs through nginx proxy_pass, to the same nginx upstream.

Started by bench/forward/run.sh (which documents the knobs). Everything listens on 127.0.0.1 only,
every run is bounded by wrk's duration, and every process started here is stopped at exit.
"""

from __future__ import annotations

import json
import os
import re
import resource
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]

ROUNDS = int(os.environ.get("ROUNDS", "3"))
DURATION = os.environ.get("DURATION", "10s")
CONNS = int(os.environ.get("CONNS", "64"))
THREADS = int(os.environ.get("THREADS", "2"))
LAT_DURATION = os.environ.get("LAT_DURATION", "5s")
MG_BIN = Path(os.environ.get("MIRRORGATE_BIN", REPO / ".build" / "release" / "mirrorgate"))
MG_LOG_LEVEL = os.environ.get("MG_LOG_LEVEL", "warning")
RESULTS = Path(os.environ.get("RESULTS_FILE", REPO / "bench" / "RESULTS.md"))
WRITE_RESULTS = os.environ.get("WRITE_RESULTS", "1") == "1"
APP_ID = os.environ.get("BENCH_APP_ID", "BENCHAPP")
API_KEY = os.environ.get("BENCH_API_KEY", "bench-search-only-key")

# ~500 bytes of Algolia-shaped JSON
BODY = json.dumps(
    {
        "hits": [
            {"objectID": "1", "name": "Apple iPhone 15", "brand": "Apple", "price": 799},
            {"objectID": "2", "name": "Apple iPhone 15 Pro", "brand": "Apple", "price": 999},
            {"objectID": "3", "name": "Apple iPad Air", "brand": "Apple", "price": 599},
        ],
        "nbHits": 3,
        "page": 0,
        "nbPages": 1,
        "hitsPerPage": 20,
        "exhaustiveNbHits": True,
        "processingTimeMS": 1,
        "query": "apple",
        "params": "query=apple&hitsPerPage=20",
        "index": "bench",
        "renderingContent": {},
        "serverTimeMS": 2,
        "padding": "x" * 60,
    },
    separators=(",", ":"),
)

procs: list[subprocess.Popen] = []


def free_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def wait_http(url: str, headers: dict | None = None, seconds: float = 20) -> None:
    deadline = time.monotonic() + seconds
    last = None
    for _ in range(int(seconds / 0.1) + 1):
        if time.monotonic() > deadline:
            break
        try:
            req = urllib.request.Request(url, headers=headers or {})
            with urllib.request.urlopen(req, timeout=1) as r:
                r.read()
                return
        except urllib.error.HTTPError:
            return  # it answers
        except OSError as exc:
            last = exc
        time.sleep(0.1)
    raise SystemExit(f"bench: {url} did not answer within {seconds}s ({last})")


def nginx_conf(prefix: Path, name: str, workers: int, server_block: str, http_extra: str = "") -> Path:
    (prefix / name).mkdir(parents=True, exist_ok=True)
    conf = prefix / name / "nginx.conf"
    conf.write_text(
        f"""
worker_processes {workers};
daemon off;
pid {prefix / name / 'nginx.pid'};
error_log {prefix / name / 'error.log'} warn;
events {{ worker_connections 4096; }}
http {{
    access_log off;
    client_body_temp_path {prefix / name / 'client_body'};
    proxy_temp_path {prefix / name / 'proxy'};
    fastcgi_temp_path {prefix / name / 'fastcgi'};
    uwsgi_temp_path {prefix / name / 'uwsgi'};
    scgi_temp_path {prefix / name / 'scgi'};
    keepalive_requests 1000000;
    keepalive_timeout 75s;
    {http_extra}
    server {{
        {server_block}
    }}
}}
"""
    )
    return conf


def start(cmd: list[str], log: Path) -> subprocess.Popen:
    f = open(log, "ab")
    p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=f, stderr=f)
    f.close()
    procs.append(p)
    return p


def stop_all() -> None:
    for p in reversed(procs):
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    for p in reversed(procs):
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(timeout=5)


def cpu_ticks(pids: list[int]) -> tuple[int, int]:
    """(busy ticks of the whole machine, ticks of pids and their threads) from /proc."""
    with open("/proc/stat") as f:
        parts = [int(x) for x in f.readline().split()[1:]]
    idle = parts[3] + (parts[4] if len(parts) > 4 else 0)
    total_busy = sum(parts[:8]) - idle
    ours = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            ours += int(fields[11]) + int(fields[12])  # utime + stime (field 14, 15)
        except (OSError, IndexError, ValueError):
            pass
    return total_busy, ours


def children_of(pids: list[int]) -> list[int]:
    out = list(pids)
    try:
        for d in os.listdir("/proc"):
            if not d.isdigit():
                continue
            try:
                with open(f"/proc/{d}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
                if ppid in pids:
                    out.append(int(d))
            except (OSError, ValueError, IndexError):
                pass
    except OSError:
        pass
    return out


def to_ms(v: str) -> float:
    m = re.match(r"([0-9.]+)(us|ms|s|m)$", v.strip())
    if not m:
        return float("nan")
    n, u = float(m.group(1)), m.group(2)
    return {"us": n / 1000, "ms": n, "s": n * 1000, "m": n * 60000}[u]


def wrk(url: str, script: Path, threads: int, conns: int, duration: str, watch: list[int]) -> dict:
    cmd = ["wrk", f"-t{threads}", f"-c{conns}", f"-d{duration}", "--latency", "-s", str(script), url]
    hz = os.sysconf("SC_CLK_TCK")
    ncpu = os.cpu_count() or 1
    b0, o0 = cpu_ticks(watch)
    ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    dur_s = to_ms(duration) / 1000
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=dur_s + 60)
    elapsed = time.monotonic() - t0
    b1, o1 = cpu_ticks(watch)
    ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    wrk_cpu_s = (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime)
    out = r.stdout
    if r.returncode != 0:
        raise SystemExit(f"bench: wrk failed ({r.returncode}): {r.stderr}\n{out}")
    rps = float(re.search(r"Requests/sec:\s+([0-9.]+)", out).group(1))
    lat = {p: to_ms(v) for p, v in re.findall(r"^\s+(50|75|90|99)%\s+(\S+)", out, re.M)}
    non2xx = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", out)
    errors = re.search(r"Socket errors: (.*)", out)
    total_busy_pct = 100.0 * (b1 - b0) / hz / elapsed / ncpu
    ours_pct = 100.0 * (o1 - o0) / hz / elapsed / ncpu
    wrk_pct = 100.0 * wrk_cpu_s / elapsed / ncpu
    return {
        "rps": rps,
        "p50": lat.get("50"),
        "p99": lat.get("99"),
        "non2xx": int(non2xx.group(1)) if non2xx else 0,
        "errors": errors.group(1) if errors else "",
        "other_cpu_pct": max(0.0, total_busy_pct - ours_pct - wrk_pct),
        "servers_cpu_pct": ours_pct,
        "wrk_cpu_pct": wrk_pct,
        "raw": out,
    }


def git_commit() -> str:
    try:
        c = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
        dirty = subprocess.run(
            ["git", "-C", str(REPO), "status", "--porcelain", "--untracked-files=no", "Sources", "Package.swift"],
            capture_output=True,
            text=True,
        )
        return c.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")
    except OSError:
        return "unknown"


def main() -> int:
    for tool in ("nginx", "wrk"):
        if not shutil.which(tool) and not Path(f"/usr/sbin/{tool}").exists():
            raise SystemExit(f"bench: {tool} not found (bash scripts/setup.sh --bench installs it)")
    if not MG_BIN.exists():
        raise SystemExit(f"bench: {MG_BIN} missing: swift build -c release --product mirrorgate")
    nginx = shutil.which("nginx") or "/usr/sbin/nginx"
    prefix = Path(tempfile.mkdtemp(prefix="mg-bench-forward-"))
    try:
        up_port, px_port, mg_port = free_port(), free_port(), free_port()
        body_escaped = BODY.replace("\\", "\\\\").replace("'", "\\'")
        up_conf = nginx_conf(
            prefix,
            "upstream",
            1,
            f"""listen 127.0.0.1:{up_port} reuseport;
        location / {{ default_type application/json; return 200 '{body_escaped}'; }}""",
        )
        px_conf = nginx_conf(
            prefix,
            "proxy",
            2,
            f"""listen 127.0.0.1:{px_port};
        location / {{
            proxy_pass http://backend;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
        }}""",
            http_extra=f"upstream backend {{ server 127.0.0.1:{up_port}; keepalive 64; }}",
        )
        up = start([nginx, "-p", str(prefix / "upstream"), "-c", str(up_conf)], prefix / "upstream.log")
        px = start([nginx, "-p", str(prefix / "proxy"), "-c", str(px_conf)], prefix / "proxy.log")
        mg_cfg = prefix / "mirrorgate.yaml"
        mg_cfg.write_text(
            f"""server:
  listen: 127.0.0.1:{mg_port}
dataDir: {prefix / 'mg-data'}
log:
  level: {MG_LOG_LEVEL}
algolia:
  appId: {APP_ID}
  apiKey: {API_KEY}
  hosts: ["http://127.0.0.1:{up_port}"]
"""
        )
        mg = start([str(MG_BIN), "serve", "--config", str(mg_cfg)], prefix / "mirrorgate.log")
        wait_http(f"http://127.0.0.1:{up_port}/")
        wait_http(f"http://127.0.0.1:{px_port}/")
        wait_http(f"http://127.0.0.1:{mg_port}/_mirrorgate/health")
        if mg.poll() is not None:
            raise SystemExit(f"bench: mirrorgate exited: {(prefix / 'mirrorgate.log').read_text()[-2000:]}")

        script = prefix / "query.lua"
        script.write_text(
            f"""wrk.method = "POST"
wrk.body = '{{"query":"apple","hitsPerPage":20}}'
wrk.headers["Content-Type"] = "application/json"
wrk.headers["X-Algolia-Application-Id"] = "{APP_ID}"
wrk.headers["X-Algolia-API-Key"] = "{API_KEY}"
"""
        )
        path = "/1/indexes/bench/query"
        targets = {"nginx": f"http://127.0.0.1:{px_port}{path}", "mirrorgate": f"http://127.0.0.1:{mg_port}{path}"}
        # sanity: both answer 200 with the upstream's body
        for name, url in targets.items():
            req = urllib.request.Request(
                url,
                data=b'{"query":"apple"}',
                headers={"Content-Type": "application/json", "X-Algolia-Application-Id": APP_ID, "X-Algolia-API-Key": API_KEY},
            )
            with urllib.request.urlopen(req, timeout=5) as r:
                got = r.read().decode()
                if r.status != 200 or json.loads(got).get("index") != "bench":
                    raise SystemExit(f"bench: {name} answered {r.status}: {got[:200]}")

        watch_base = [up.pid, px.pid, mg.pid]
        ps = subprocess.run(["ps", "-eo", "pcpu,pid,comm", "--sort=-pcpu"], capture_output=True, text=True).stdout
        print("== busiest processes before the run ==")
        print("\n".join(ps.splitlines()[:6]))
        print(f"loadavg: {Path('/proc/loadavg').read_text().strip()}")

        print(f"== warm-up (2s each) ==")
        for name, url in targets.items():
            wrk(url, script, THREADS, CONNS, "2s", children_of(watch_base))

        rounds = []
        for i in range(ROUNDS):
            order = ["nginx", "mirrorgate"] if i % 2 == 0 else ["mirrorgate", "nginx"]
            res = {}
            for name in order:
                res[name] = wrk(targets[name], script, THREADS, CONNS, DURATION, children_of(watch_base))
            ratio = res["mirrorgate"]["rps"] / res["nginx"]["rps"]
            rounds.append((res, ratio))
            for name in ("nginx", "mirrorgate"):
                r = res[name]
                print(
                    f"round {i + 1} {name:10s} {r['rps']:10.0f} req/s  p50 {r['p50']:.3f} ms  p99 {r['p99']:.3f} ms"
                    f"  non-2xx {r['non2xx']}  cpu servers {r['servers_cpu_pct']:.0f}% wrk {r['wrk_cpu_pct']:.0f}% other {r['other_cpu_pct']:.0f}%{'  errors ' + r['errors'] if r['errors'] else ''}"
                )
            print(f"round {i + 1} ratio mirrorgate/nginx req/s = {ratio:.3f}")

        ratios = [r for _, r in rounds]
        med_ratio = statistics.median(ratios)
        p99_delta = statistics.median([res["mirrorgate"]["p99"] - res["nginx"]["p99"] for res, _ in rounds])
        print(f"median ratio (req/s) = {med_ratio:.3f}   median p99 difference = {p99_delta:+.3f} ms")

        print(f"== 1 connection, {LAT_DURATION} ==")
        single = {}
        for name in ("nginx", "mirrorgate"):
            single[name] = wrk(targets[name], script, 1, 1, LAT_DURATION, children_of(watch_base))
            r = single[name]
            print(f"1-conn {name:10s} {r['rps']:8.0f} req/s  p50 {r['p50']:.3f} ms  p99 {r['p99']:.3f} ms")

        bad = sum(res[n]["non2xx"] for res, _ in rounds for n in res)
        if mg.poll() is not None:
            raise SystemExit("bench: mirrorgate died during the run")
        verdict_rps = "met" if med_ratio >= 0.8 else "NOT met"
        verdict_p99 = "met" if p99_delta <= 1.0 else "NOT met"
        print(f"target >= 0.8x nginx req/s: {verdict_rps}; p99 <= nginx + 1 ms: {verdict_p99}; non-2xx: {bad}")

        if WRITE_RESULTS:
            write_results(rounds, med_ratio, p99_delta, single, verdict_rps, verdict_p99, bad)
        return 0 if bad == 0 else 1
    finally:
        stop_all()
        shutil.rmtree(prefix, ignore_errors=True)


def write_results(rounds, med_ratio, p99_delta, single, verdict_rps, verdict_p99, bad) -> None:
    commit = git_commit()
    cpu = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    lines = [
        "## forward",
        "",
        f"`bash bench/forward/run.sh` — commit `{commit}`"
        f"{' (+dirty: uncommitted changes under Sources/)' if commit.endswith('+dirty') else ''}, "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {os.cpu_count()} cores ({cpu}); binary "
        f"`{MG_BIN.relative_to(REPO) if MG_BIN.is_relative_to(REPO) else MG_BIN}` built "
        f"{time.strftime('%H:%M UTC', time.gmtime(MG_BIN.stat().st_mtime))}.",
        "",
        f"wrk `-t{THREADS} -c{CONNS} -d{DURATION} --latency`, `POST /1/indexes/bench/query` with Algolia headers, to an nginx "
        f"`return 200` upstream (~{len(BODY)}-byte JSON, 1 worker). Anchor: nginx `proxy_pass` (2 workers, upstream "
        f"`keepalive 64`, HTTP/1.1). Mirrorgate: release build, `algolia.hosts` = that upstream, log level `{MG_LOG_LEVEL}`. "
        "Rounds interleaved (order alternates). `other CPU` = machine busy time not spent in the benchmarked "
        "processes (nginx upstream and proxy, mirrorgate) nor in wrk, in % of both cores, during that run: "
        "other engineers' builds and tests on this shared machine.",
        "",
        "| round | target | req/s | p50 ms | p99 ms | other CPU |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for i, (res, ratio) in enumerate(rounds):
        for name in ("nginx", "mirrorgate"):
            r = res[name]
            lines.append(
                f"| {i + 1} | {name} | {r['rps']:.0f} | {r['p50']:.3f} | {r['p99']:.3f} | {r['other_cpu_pct']:.0f}% |"
            )
        lines.append(f"| {i + 1} | ratio | {ratio:.3f} | | | |")
    lines += [
        "",
        f"**Median ratio mirrorgate/nginx req/s: {med_ratio:.3f}** (target ≥ 0.8: {verdict_rps}); "
        f"median p99 difference {p99_delta:+.3f} ms (target ≤ +1 ms: {verdict_p99}); non-2xx responses: {bad}.",
        "",
        f"One connection (`-t1 -c1 -d{LAT_DURATION}`):",
        "",
        "| target | req/s | p50 ms | p99 ms |",
        "|---|---:|---:|---:|",
    ]
    for name in ("nginx", "mirrorgate"):
        r = single[name]
        lines.append(f"| {name} | {r['rps']:.0f} | {r['p50']:.3f} | {r['p99']:.3f} |")
    section = "\n".join(lines) + "\n"
    text = RESULTS.read_text() if RESULTS.exists() else "# Benchmark results\n\n"
    m = re.search(r"^## forward\b.*?(?=^## |\Z)", text, re.M | re.S)
    if m:
        text = text[: m.start()] + section + ("\n" if text[m.end() :] else "") + text[m.end() :]
    else:
        text = text.rstrip("\n") + "\n\n" + section
    RESULTS.write_text(text)
    print(f"wrote the forward section of {RESULTS}")


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        stop_all()
        sys.exit(130)
