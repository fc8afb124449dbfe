"""Sync time of a mirrored Algolia index with and without query rules (issue 13: rules are synced).

Starts the release gateway (loopback only) with a mirrored index `products` whose upstream is the e2e
suite's FakeAlgolia holding N records and R query rules, then runs `POST
/_mirrorgate/algolia/indices/products/sync?wait=true` several times and reports the sync's own
`fetchMs`, `buildMs` and `durationMs` (median of the runs) per rule count. The fake serves browse pages
of 1000 records and rules/search pages of 1000 rules. Every loop is bounded; prints a Markdown table.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "Tests" / "EndToEnd"))

from harness import Gateway, request  # noqa: E402
from upstreams.fake_algolia import FakeAlgolia  # noqa: E402

# The records of the fallback benchmark (same generator, same shape).
_spec = importlib.util.spec_from_file_location("fallback_driver", REPO / "bench" / "fallback" / "driver.py")
_fallback = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_fallback)
records, WORDS, BRANDS = _fallback.records, _fallback.WORDS, _fallback.BRANDS

APP_ID = "BENCHAPP"
API_KEY = "bench-key-0123456789"


def rules(n: int) -> list[dict]:
    """`n` rules shaped like a merchandising set: a pattern per rule, promote, userData, a filter edit."""
    return [
        {
            "objectID": f"rule-{i}",
            "description": f"merchandising rule {i}",
            "conditions": [{"pattern": f"{WORDS[i % len(WORDS)]} {i}", "anchoring": "contains"}],
            "consequence": {
                "promote": [{"objectID": f"p{i % 1000}", "position": 0}],
                "params": {"filters": f"brand:{BRANDS[i % len(BRANDS)]}"},
                "userData": {"campaign": f"c{i}", "banner": "x" * 64},
            },
        }
        for i in range(n)
    ]


def run(objects: int, rule_counts: list[int], repeats: int) -> None:
    print(f"| rules | records | fetchMs | buildMs | durationMs | rules JSON bytes |")
    print("|---:|---:|---:|---:|---:|---:|")
    base = records(objects)
    for count in rule_counts:
        fake = FakeAlgolia(browse_page_size=1000).start()
        try:
            fake.seed("products", base, {"searchableAttributes": ["name", "brand"], "attributesForFaceting": ["brand"]})
            fake.index("products").rules = rules(count)
            with tempfile.TemporaryDirectory() as tmp:
                gw = Gateway(
                    Path(tmp) / "gw",
                    {
                        "server": {"shutdownGrace": "2s", "requestTimeout": "120s"},
                        "log": {"level": "warning", "format": "text"},
                        "dataDir": str(Path(tmp) / "data"),
                        "algolia": {
                            "appId": APP_ID, "apiKey": API_KEY, "hosts": [fake.url],
                            "indices": {"products": {
                                "mirrored": True, "delayBetweenSyncs": "24h",
                                "dataSelectionQueries": [{"query": {"query": ""}, "maxObjects": objects}],
                            }},
                        },
                    },
                    name="bench",
                ).start()
                try:
                    samples = []
                    for attempt in range(repeats + 20):
                        if len(samples) == repeats:
                            break
                        st, _, body = request(
                            "POST", gw.url("/_mirrorgate/algolia/indices/products/sync?wait=true"), timeout=120
                        )
                        if st == 409:  # the start-up sync is running: wait for it (bounded)
                            time.sleep(0.5)
                            continue
                        assert st == 200, body
                        samples.append(json.loads(body))
                    med = {k: statistics.median(s[k] for s in samples) for k in ("fetchMs", "buildMs", "durationMs")}
                    size = len(json.dumps(rules(count), separators=(",", ":")))
                    print(f"| {count} | {objects} | {med['fetchMs']:.0f} | {med['buildMs']:.0f} | {med['durationMs']:.0f} | {size} |")
                finally:
                    gw.terminate()
        finally:
            fake.stop()


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--objects", type=int, default=20000)
    p.add_argument("--rules", type=str, default="0,100,1000,10000")
    p.add_argument("--repeats", type=int, default=3)
    a = p.parse_args()
    run(a.objects, [int(x) for x in a.rules.split(",")], a.repeats)


if __name__ == "__main__":
    main()
