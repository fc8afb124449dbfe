"""Summarizes bench/search rounds: medians over rounds of per-class p50/p99, ratios to tantivy, checks."""
import json, os, statistics, sys

out, rounds, commit = sys.argv[1], int(sys.argv[2]), sys.argv[3]
load = lambda name: json.load(open(f"{out}/{name}.json"))
engines = ["engine", "fts5", "tantivy"]
runs = {e: [load(f"{e}-{r}") for r in range(1, rounds + 1)] for e in engines}
restart = [load(f"restart-{r}") for r in range(1, rounds + 1)]
cpu = {e: [load(f"cpu-{e}-{r}")["busyPct"] for r in range(1, rounds + 1)] for e in engines}
med = lambda xs: statistics.median(xs)
classes = list(runs["engine"][0]["classes"].keys())
print(f"`bash bench/search/run.sh` — commit `{commit}`, {rounds} rounds (order alternates), "
      f"{runs['engine'][0]['classes'][classes[0]]['n'] // 20} repetitions per query, 20 queries per class, "
      f"niceness {os.environ.get('NICE', '0')} for every engine's process, page of 20 hits with highlighting (engine: `searchSerialized`, i.e. the answer as response bytes), facets on section+priority, numeric filter on installedSize.\n")
print("| class | engine p50 | engine p99 | tantivy p50 | tantivy p99 | FTS5 p50 | FTS5 p99 | p50 ratio engine/tantivy | p99 ratio | no worse than tantivy |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---|")
ok_all = True
for c in classes:
    v = {e: (med([r["classes"][c]["p50"] for r in runs[e]]), med([r["classes"][c]["p99"] for r in runs[e]])) for e in engines}
    ok = v["engine"][0] <= v["tantivy"][0] and v["engine"][1] <= v["tantivy"][1]
    ok_all &= ok
    print(f"| {c} | {v['engine'][0]:.3f} | {v['engine'][1]:.3f} | {v['tantivy'][0]:.3f} | {v['tantivy'][1]:.3f} | "
          f"{v['fts5'][0]:.3f} | {v['fts5'][1]:.3f} | {v['engine'][0]/v['tantivy'][0]:.2f} | {v['engine'][1]/v['tantivy'][1]:.2f} | {'yes' if ok else 'NO'} |")
print()
print("| engine | build rec/s (median) | typo queries with 0 hits | peak RSS MiB | busy CPU during its runs (% of 2 cores, all processes) |")
print("|---|---:|---|---:|---|")
for e in engines:
    z = sorted({q for r in runs[e] for q in r["zeroHitTypoQueries"]})
    print(f"| {e} | {med([r['buildRecordsPerSecond'] for r in runs[e]]):.0f} | {len(z)} {z[:6]} | "
          f"{med([r['peakRSSMiB'] for r in runs[e]]):.0f} | {cpu[e]} |")
print()
js = runs["engine"][0]["jsonBytes"] / 2**20
print(f"Engine: first answer after restart (open SQLite store, load, first query; separate process) "
      f"median {med([r['firstAnswerAfterRestartMs'] for r in restart]):.0f} ms (target ≤ 2000), peak RSS of that process "
      f"{med([r['peakRSSMiB'] for r in restart]):.0f} MiB; corpus JSON {js:.1f} MiB → 4× = {4*js:.0f} MiB. "
      f"Peak RSS of the build process (file streamed in 1 MiB chunks, then the queries): {med([r['peakRSSMiB'] for r in runs['engine']]):.0f} MiB. "
      f"Store write (SQLite, chunked) {med([r['storeBuildMs'] for r in runs['engine']]):.0f} ms.")
print(f"\nPer class p50/p99 no worse than tantivy: {'all classes' if ok_all else 'NOT in every class (see table)'}; "
      "target p50 ≤ 1 ms and p99 ≤ 5 ms per class.")

copy = {v: [load(f"copy-{v}-{r}") for r in range(1, rounds + 1)] for v in ("plain", "encrypted")}
reopen = {v: [load(f"restart-{v}-{r}") for r in range(1, rounds + 1)] for v in ("plain", "encrypted")}
op = {v: med([x["storeOpenMs"] for x in copy[v]]) for v in copy}
w = {v: med([x["storeBuildMs"] for x in copy[v]]) for v in copy}
wc = {v: med([x["cpuMs"] for x in copy[v]]) for v in copy}
o = {v: med([x["firstAnswerAfterRestartMs"] for x in reopen[v]]) for v in reopen}
oc = {v: med([x["cpuMs"] for x in reopen[v]]) for v in reopen}
print("\nEncryption at rest (`algolia.storeEncryptionKey`, AES-256-GCM pages through the SQLite VFS, scrypt "
      "N=2^15 at open): the same index written to a new store and reopened, plain and encrypted alternating, "
      "medians over rounds; wall time, and the process's CPU time (which other tenants of a shared machine "
      "change least). Queries run on the index in memory and never read the store.\n")
print("| | plain | encrypted | ratio | target ≤ 1.3 |")
print("|---|---:|---:|---:|---|")
print(f"| opening a new store (an encrypted one derives its key: scrypt, once per file and process), wall ms | "
      f"{op['plain']:.0f} | {op['encrypted']:.0f} | | |")
for name, v in (("index save into the open store, wall ms", w), ("index save, CPU ms", wc),
                ("first answer after restart (open, load, query), wall ms", o), ("first answer after restart, CPU ms", oc)):
    ratio = v["encrypted"] / v["plain"]
    print(f"| {name} | {v['plain']:.0f} | {v['encrypted']:.0f} | {ratio:.2f} | {'met' if ratio <= 1.3 else 'NOT met'} |")
