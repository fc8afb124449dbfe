#!/usr/bin/env python3
"""Median table over rounds from measure.py's JSON lines. usage: summarize.py RESULTS.jsonl"""
import json, statistics as st, sys
from collections import defaultdict

rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
by = defaultdict(dict)
for r in rows:
    by[r["name"]][r["round"]] = r
order = list(dict.fromkeys(r["name"] for r in rows))
ref = "nginx-proxy"
print("| variant | req/s | p50 ms | p99 ms | server CPU µs/req | upstream µs/req | wrk µs/req | other µs/req | ratio vs nginx proxy | non-2xx |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
for n in order:
    rs = by[n]
    med = lambda k: st.median(r[k] for r in rs.values())
    ratios = [rs[i]["rps"] / by[ref][i]["rps"] for i in rs if i in by[ref]]
    ratio = st.median(ratios) if ratios else float("nan")
    up = f"{med('up_us'):.1f}" if n != "mhd-hello" else "–"
    print(f"| {n} | {med('rps'):.0f} | {med('p50'):.3f} | {med('p99'):.3f} | {med('srv_us'):.1f} | {up} | "
          f"{med('wrk_us'):.1f} | {med('other_us'):.1f} | {ratio:.3f} | {sum(r['non2xx'] for r in rs.values())} |")
print(f"\nrounds: {len(by[ref])}; ratio = median over rounds of (variant req/s / nginx-proxy req/s in the same round)")
