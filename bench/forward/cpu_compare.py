"""CPU per forwarded request of two mirrorgate binaries, measured side by side (for before/after checks).

Throughput on a shared 2-core machine moves by 2x from run to run with other people's builds; the CPU
time the gateway process spends per request moves much less. This starts one nginx upstream (the
forward benchmark's `return 200`, 1 worker) and both gateways on it, then alternates wrk runs against
them (`-t1 -c16`, `DURATION` each, `ROUNDS` rounds, order swapping) and reports, per binary, requests/s
and the gateway's own CPU (utime + stime of all its threads) per request in microseconds.

    python3 bench/forward/cpu_compare.py BEFORE_BINARY AFTER_BINARY

Loopback only; every run is bounded by wrk's duration; all started processes are stopped at exit.
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench  # noqa: E402  (the forward benchmark's helpers)

ROUNDS = int(os.environ.get("ROUNDS", "6"))
DURATION = os.environ.get("DURATION", "5s")


def main(binaries: list[str]) -> int:
    nginx = bench.shutil.which("nginx") or "/usr/sbin/nginx"
    prefix = Path(tempfile.mkdtemp(prefix="mg-bench-cpu-"))
    try:
        up_port = bench.free_port()
        body = bench.BODY.replace("\\", "\\\\").replace("'", "\\'")
        up_conf = bench.nginx_conf(
            prefix,
            "upstream",
            1,
            f"""listen 127.0.0.1:{up_port} reuseport;
        location / {{ default_type application/json; return 200 '{body}'; }}""",
        )
        bench.start([nginx, "-p", str(prefix / "upstream"), "-c", str(up_conf)], prefix / "upstream.log")
        gateways = []
        for i, binary in enumerate(binaries):
            port = bench.free_port()
            cfg = prefix / f"mg{i}.yaml"
            cfg.write_text(
                f"""server:
  listen: 127.0.0.1:{port}
dataDir: {prefix / f'mg{i}-data'}
log:
  level: warning
algolia:
  appId: {bench.APP_ID}
  apiKey: {bench.API_KEY}
  hosts: ["http://127.0.0.1:{up_port}"]
"""
            )
            proc = bench.start([binary, "serve", "--config", str(cfg)], prefix / f"mg{i}.log")
            bench.wait_http(f"http://127.0.0.1:{port}/_mirrorgate/health")
            gateways.append((binary, proc, f"http://127.0.0.1:{port}/1/indexes/bench/query"))
        bench.wait_http(f"http://127.0.0.1:{up_port}/")
        script = prefix / "query.lua"
        script.write_text(
            f"""wrk.method = "POST"
wrk.body = '{{"query":"apple","hitsPerPage":20}}'
wrk.headers["Content-Type"] = "application/json"
wrk.headers["X-Algolia-Application-Id"] = "{bench.APP_ID}"
wrk.headers["X-Algolia-API-Key"] = "{bench.API_KEY}"
"""
        )
        hz = os.sysconf("SC_CLK_TCK")
        for _, _, url in gateways:  # warm-up
            bench.wrk(url, script, 1, 16, "2s", [])
        results: dict[str, list[tuple[float, float]]] = {b: [] for b in binaries}
        for r in range(ROUNDS):
            order = gateways if r % 2 == 0 else list(reversed(gateways))
            for binary, proc, url in order:
                _, c0 = bench.cpu_ticks([proc.pid])
                res = bench.wrk(url, script, 1, 16, DURATION, [proc.pid])
                _, c1 = bench.cpu_ticks([proc.pid])
                requests = res["rps"] * bench.to_ms(DURATION) / 1000
                us = (c1 - c0) / hz * 1e6 / requests if requests else float("nan")
                results[binary].append((res["rps"], us))
                print(f"round {r + 1} {binary}: {res['rps']:.0f} req/s, {us:.1f} us CPU/request, other CPU (not this gateway, not wrk) {res['other_cpu_pct']:.0f}%")
        print("| binary | median req/s | median CPU us/request | CPU us/request, each round |")
        print("|---|---:|---:|---|")
        for binary in binaries:
            rps = statistics.median(x[0] for x in results[binary])
            cpu = statistics.median(x[1] for x in results[binary])
            each = ", ".join(f"{x[1]:.1f}" for x in results[binary])
            print(f"| {binary} | {rps:.0f} | {cpu:.1f} | {each} |")
        return 0
    finally:
        bench.stop_all()


if __name__ == "__main__":
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    sys.exit(main(sys.argv[1:]))
