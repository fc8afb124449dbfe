"""Reads wrk's text output (with --latency): requests/s, p50/p99 in milliseconds, non-2xx count, socket
errors. Shared by the benchmarks that drive the gateway with wrk."""

from __future__ import annotations

import re

UNITS_MS = {"us": 0.001, "ms": 1.0, "s": 1000.0, "m": 60_000.0}


def to_ms(text: str) -> float:
    m = re.fullmatch(r"([\d.]+)(us|ms|s|m)", text.strip())
    if not m:
        raise ValueError(f"not a wrk duration: {text!r}")
    return float(m.group(1)) * UNITS_MS[m.group(2)]


def parse(out: str) -> dict:
    lat = {p: to_ms(v) for p, v in re.findall(r"^\s+(50|75|90|99)%\s+(\S+)\s*$", out, re.M)}
    rps = re.search(r"Requests/sec:\s+([\d.]+)", out)
    total = re.search(r"^\s*(\d+) requests in", out, re.M)
    bad = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", out)
    errors = re.search(r"Socket errors:\s*(.*)", out)
    return {
        "perSec": float(rps.group(1)) if rps else 0.0,
        "requests": int(total.group(1)) if total else 0,
        "p50": lat.get("50", float("nan")),
        "p99": lat.get("99", float("nan")),
        "non2xx": int(bad.group(1)) if bad else 0,
        "errors": errors.group(1) if errors else "",
    }
