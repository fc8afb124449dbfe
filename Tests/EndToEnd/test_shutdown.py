"""Graceful shutdown on SIGTERM and streamed relaying (SPEC §1, issue 2)."""

from __future__ import annotations

import http.client
import signal
import threading
import time

from conftest import algolia_config
from harness import request


def stream_reader(port: int, path: str, out: dict, read_timeout: float = 20.0):
    """Reads a response incrementally, recording when the first and last bytes came and how it ended."""
    t0 = time.monotonic()
    out.update(first=None, total=0, ended=None, error=None, status=None)
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=read_timeout)
    try:
        conn.request("GET", path)
        resp = conn.getresponse()
        out["status"] = resp.status
        for _ in range(1_000_000):
            chunk = resp.read1(65536)
            if not chunk:
                break
            if out["first"] is None:
                out["first"] = time.monotonic() - t0
            out["total"] += len(chunk)
    except Exception as exc:  # the gateway closing the stream mid-way is expected here
        out["error"] = repr(exc)
    finally:
        out["ended"] = time.monotonic() - t0
        conn.close()


def test_response_is_streamed_not_buffered(gateway_factory, fake_algolia):
    gw = gateway_factory(algolia_config(fake_algolia.url, timeout="10s"))
    out: dict = {}
    # 2 MiB at once (past any sensible buffering threshold), then 2 s of silence, then the rest: the
    # client must get the first 2 MiB before the silence ends.
    burst = 2 << 20
    stream_reader(gw.port, f"/1/indexes/_trickle/x?burst={burst}&chunks=5&size=1000&interval=0.01&first_delay=2", out)
    assert out["error"] is None, out
    assert out["status"] == 200
    assert out["total"] == burst + 5000
    assert out["first"] is not None and out["first"] < 1.5, f"first bytes after {out['first']}s: buffered?"
    assert out["ended"] >= 2.0


def test_sigterm_during_slow_stream_exits_0(gateway_factory, fake_algolia):
    gw = gateway_factory(deep(algolia_config(fake_algolia.url, timeout="60s"), {"server": {"shutdownGrace": "2s"}}))
    out: dict = {}
    # 2 MiB at once, then 300 chunks, one every 100 ms: 30 s of streaming, far longer than the grace
    t = threading.Thread(
        target=stream_reader,
        args=(gw.port, "/1/indexes/_trickle/x?burst=2097152&chunks=300&size=100&interval=0.1", out),
        daemon=True,
    )
    t.start()
    deadline = time.monotonic() + 10
    for _ in range(200):
        if out.get("first") is not None or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert out.get("first") is not None, f"stream did not start: {out}"
    t0 = time.monotonic()
    gw.proc.send_signal(signal.SIGTERM)
    try:
        code = gw.proc.wait(timeout=2 + 4)
    except Exception:
        code = None
    secs = time.monotonic() - t0
    gw.expect_exit = True
    assert code == 0, f"exit code {code} after {secs:.1f}s (grace 2s)"
    assert secs < 2 + 4
    t.join(timeout=10)
    assert not t.is_alive(), "the client's stream must be closed by the gateway"
    assert out["status"] == 200
    assert out["total"] < (2 << 20) + 300 * 100, "the stream was cut at shutdown"


def test_in_flight_request_finishes_within_grace(gateway_factory, fake_algolia):
    gw = gateway_factory(deep(algolia_config(fake_algolia.url, timeout="10s"), {"server": {"shutdownGrace": "5s"}}))
    fake_algolia.delay = 1.0
    result: dict = {}

    def call():
        try:
            result["r"] = request("POST", gw.url("/1/indexes/i/query"), body=b"{}", timeout=15)
        except Exception as exc:
            result["e"] = repr(exc)

    t = threading.Thread(target=call, daemon=True)
    t.start()
    deadline = time.monotonic() + 5
    for _ in range(100):
        if fake_algolia.requests("/1/indexes/i/query") or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert fake_algolia.requests("/1/indexes/i/query"), "request did not reach the upstream"
    gw.proc.send_signal(signal.SIGTERM)
    t.join(timeout=10)
    code = gw.proc.wait(timeout=10)
    gw.expect_exit = True
    assert "e" not in result, result
    assert result["r"][0] == 200, "an in-flight request finishes within the grace period"
    assert code == 0


def test_sigint_exits_0(algolia_gateway):
    gw = algolia_gateway
    gw.proc.send_signal(signal.SIGINT)
    code = gw.proc.wait(timeout=10)
    gw.expect_exit = True
    assert code == 0


def deep(a, b):
    from harness import deep_merge

    return deep_merge(a, b)
