"""Offline paging memory: a 200,000-row entity set (bootstrap files, localFirst) read page by page through
the gateway, following `@odata.nextLink`, while the gateway's RSS (`/proc/PID/status` VmRSS) is sampled.
Reports the idle RSS (after the load, before the reads), the highest RSS during the reads and the
difference; issue 15 asks for at most 50 MiB. Pages are `--page` rows (`pageSize`, as the upstream's
page size would be remembered at download). Loopback only; every loop is bounded.

Usage: MIRRORGATE_BIN=path/to/release/mirrorgate python bench/odata/memory.py [--rows N] [--page N]
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench import METADATA, free_port  # noqa: E402


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=200_000)
    ap.add_argument("--page", type=int, default=1000)
    args = ap.parse_args()
    binary = os.environ["MIRRORGATE_BIN"]
    work = Path(tempfile.mkdtemp(prefix="mg-odata-mem-"))
    (work / "metadata.xml").write_text(METADATA)
    with open(work / "items.json", "w") as f:
        f.write('{"value":[')
        for i in range(1, args.rows + 1):
            f.write(("," if i > 1 else "") + '{"ID":%d,"Name":"item %d","Category":"c%d","Price":%d.%02d,"Qty":%d,'
                    '"Created":"2025-01-01T00:00:00Z"}' % (i, i, i % 8, i % 1000, i % 100, i % 100))
        f.write("]}")
    port = free_port()
    (work / "config.yaml").write_text(
        f"""server: {{listen: "127.0.0.1:{port}"}}
dataDir: {work / 'data'}
log: {{level: warning}}
odata:
  services:
    bench:
      mount: /odata/bench/
      upstream: http://127.0.0.1:{free_port()}/nothing/
      version: v4
      routing: localFirst
      pageSize: {args.page}
      bootstrap:
        metadata: {work / 'metadata.xml'}
        data: {{Items: {work / 'items.json'}}}
"""
    )
    proc = subprocess.Popen([binary, "serve", "--config", str(work / "config.yaml")],
                            stdout=subprocess.DEVNULL, stderr=open(work / "stderr.log", "w"))
    try:
        t0 = time.time()
        while time.time() - t0 < 300:
            try:
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
                conn.request("GET", "/_mirrorgate/status")
                st = json.loads(conn.getresponse().read())["odata"]["services"]["bench"]
                if st.get("entitySets", {}).get("Items") == args.rows:
                    break
            except (OSError, KeyError, ValueError):
                pass
            time.sleep(0.5)
        else:
            raise SystemExit("the mirror was not loaded: " + (work / "stderr.log").read_text()[-2000:])
        time.sleep(2)
        idle = rss_kib(proc.pid)
        peak = [idle]
        done = threading.Event()

        def sample() -> None:
            while not done.wait(0.02):
                peak[0] = max(peak[0], rss_kib(proc.pid))

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        path = "/odata/bench/Items"
        pages = rows = 0
        t1 = time.time()
        while path and pages < args.rows // max(1, args.page) + 10:
            conn.request("GET", path, headers={"Accept": "application/json"})
            doc = json.loads(conn.getresponse().read())
            rows += len(doc["value"])
            pages += 1
            nxt = doc.get("@odata.nextLink")
            path = nxt[nxt.index("/odata/"):] if nxt else None
        elapsed = time.time() - t1
        done.set()
        sampler.join()
        print(f"{rows} rows in {pages} pages of {args.page} in {elapsed:.1f} s")
        print(f"RSS idle {idle / 1024:.1f} MiB, peak while paging {peak[0] / 1024:.1f} MiB, "
              f"growth {(peak[0] - idle) / 1024:.1f} MiB (target <= 50 MiB)")
        assert rows == args.rows, rows
    finally:
        proc.terminate()
        proc.wait(timeout=30)


if __name__ == "__main__":
    main()
