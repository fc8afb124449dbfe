#!/usr/bin/env python3
"""Delta download vs full download (issue 16 item 5): how long a download of 1 % changes takes by delta link
compared with a full re-read of the same defining request.

Loopback only; every loop bounded; every process started here is stopped at exit. Prints a Markdown section.

The upstream is the change-tracking fake of the end-to-end tests (Tests/EndToEnd/upstreams/odata_delta.py,
V4, pages of PAGE entities, a delta answered in one page), holding ROWS entities. A fresh gateway
(`routing: localFirst`, one defining request `Items`) downloads it in full at start. Then, ROUNDS times:
1 % of the rows change upstream (half updated, a quarter deleted, a quarter created) and
`POST …/download?wait=true` reads them by delta link; then 1 % change again, every delta token is expired
and the same call reads the request in full (after one `410`). Each download's `durationMs` (the gateway's
own figure: from the first upstream request to the committed transaction) is reported, and the mirror is
checked equal to the upstream (row count and a sample) after each. Target (issue 16): delta ≤ 5 % of full.

    MIRRORGATE_BIN=.build/release/mirrorgate python3 bench/odata/delta.py   # ROWS=100000 PAGE=1000 ROUNDS=3
"""

from __future__ import annotations

import http.client
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(REPO / "Tests" / "EndToEnd"))
from upstreams.odata_delta import DeltaUpstream  # noqa: E402

MG_BIN = os.environ["MIRRORGATE_BIN"]
ROWS = int(os.environ.get("ROWS", "100000"))
PAGE = int(os.environ.get("PAGE", "1000"))
ROUNDS = int(os.environ.get("ROUNDS", "3"))


def free_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def call(port: int, method: str, path: str, timeout: float = 600) -> tuple[int, bytes]:
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        c.request(method, path)
        r = c.getresponse()
        return r.status, r.read()
    finally:
        c.close()


def status(port: int) -> dict:
    return json.loads(call(port, "GET", "/_mirrorgate/status")[1])["odata"]["services"]["bench"]


def download(port: int) -> dict:
    """`POST …/download?wait=true`, again while one runs (bounded); the gateway answers `?wait=true` within
    its 30 s request timeout, so a longer download is read from the status."""
    deadline = time.monotonic() + 900
    while time.monotonic() < deadline:
        before = status(port).get("lastDownload")
        st, body = call(port, "POST", "/_mirrorgate/odata/services/bench/download?wait=true")
        if st == 200:
            return json.loads(body)
        if st == 504:
            while time.monotonic() < deadline:
                s = status(port)
                if not s["downloading"] and s.get("lastDownload") and s["lastDownload"] != before:
                    return s["lastDownload"]
                time.sleep(0.2)
        assert st in (409, 504), (st, body[:300])
        time.sleep(0.2)
    raise AssertionError("no download finished in 900 s")


def change_one_percent(up: DeltaUpstream, next_key: list[int]) -> None:
    n = max(4, ROWS // 100)
    keys = sorted(up.state())
    step = max(1, len(keys) // n)
    chosen = keys[::step][:n]
    for k in chosen[: n // 2]:
        up.update(k, Name=f"changed {k}", Qty=-k)
    for k in chosen[n // 2: n // 2 + n // 4]:
        up.delete(k)
    for _ in range(n - n // 2 - n // 4):
        next_key[0] += 1
        up.create(next_key[0], f"new {next_key[0]}")


def check_equal(port: int, up: DeltaUpstream) -> None:
    state = up.state()
    assert status(port)["entitySets"]["Items"] == len(state), (status(port)["entitySets"], len(state))
    for k in sorted(state)[:: max(1, len(state) // 20)]:
        st, body = call(port, "GET", f"/odata/bench/Items({k})")
        assert st == 200, (k, st, body[:200])
        e = json.loads(body)
        assert (e["Name"], e["Qty"]) == (state[k]["Name"], state[k]["Qty"]), (k, e, state[k])


def main() -> None:
    up = DeltaUpstream(version=4, items=ROWS, page_size=PAGE).start()
    port = free_port()
    gw = None
    with tempfile.TemporaryDirectory(prefix="mg-delta-bench-") as tmp:
        work = Path(tmp)
        cfg = work / "config.yaml"
        cfg.write_text(
            f'server: {{listen: "127.0.0.1:{port}"}}\ndataDir: {work / "data"}\nlog: {{level: warning}}\n'
            "odata:\n  services:\n    bench:\n      mount: /odata/bench/\n"
            f"      upstream: {up.root}\n      routing: localFirst\n      timeout: 60s\n"
            "      definingRequests:\n        - {name: items, query: Items}\n"
        )
        gw = subprocess.Popen([MG_BIN, "serve", "--config", str(cfg)], stdout=subprocess.DEVNULL,
                              stderr=open(work / "stderr.log", "w"))
        try:
            deadline = time.monotonic() + 900
            while time.monotonic() < deadline:
                try:
                    s = status(port)
                    if s.get("lastDownloadAt") and not s["downloading"] and not s["uploading"]:
                        break
                except OSError:
                    pass
                time.sleep(0.2)
            time.sleep(1)
            first = status(port)["lastDownload"]
            check_equal(port, up)
            rows = []
            next_key = [ROWS + 1000]
            for rnd in range(1, ROUNDS + 1):
                change_one_percent(up, next_key)
                d = download(port)
                assert d["kind"] == "delta", d
                check_equal(port, up)
                change_one_percent(up, next_key)
                up.expire_tokens()
                f = download(port)
                assert f["kind"] == "full", f
                check_equal(port, up)
                rows.append((rnd, d, f))
                print(json.dumps({"round": rnd, "delta": d, "full": f}), file=sys.stderr)
        finally:
            gw.terminate()
            gw.wait(timeout=60)
            up.stop()
    commit = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    print(f"Delta vs full download (issue 16 item 5), commit `{commit}`, {ROWS:,} rows, pages of {PAGE}, "
          f"1 % changed per download (½ updated, ¼ deleted, ¼ created); the start's full download took "
          f"{first['durationMs']} ms.\n")
    print("| round | delta ms | changed | removed | full ms (after a 410) | rows | delta / full |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for rnd, d, f in rows:
        print(f"| {rnd} | {d['durationMs']} | {d['changed']} | {d['removed']} | {f['durationMs']} | "
              f"{f['changed']} | {d['durationMs'] / f['durationMs']:.3f} |")
    md = statistics.median(d["durationMs"] for _, d, _ in rows)
    mf = statistics.median(f["durationMs"] for _, _, f in rows)
    verdict = "met" if md / mf <= 0.05 else "NOT met"
    print(f"\n**Median delta {md:.0f} ms, full {mf:.0f} ms: ratio {md / mf:.3f}** (target ≤ 0.05: {verdict}).")


if __name__ == "__main__":
    main()
