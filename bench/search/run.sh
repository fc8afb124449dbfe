#!/usr/bin/env bash
# bench/search: the engine vs SQLite FTS5 and tantivy 0.27 on the 63,666 Debian records, same run,
# rounds alternating order; and the cost of an encrypted store (algolia.storeEncryptionKey) on writing and
# reopening the index. Prints a Markdown summary (also written to out/summary.md).
# Knobs: ROUNDS (3), REPS (repetitions per query, 5), DATA (the .json.gz), NICE (-10: the measured
# processes of all three engines run at this niceness when allowed, so that other tenants' builds on a
# shared machine preempt them less; the same for every engine; NICE=0 to disable).
set -euo pipefail
cd "$(dirname "$0")"
DATA=${DATA:-../../../shared/data/debian-packages.json.gz}
ROUNDS=${ROUNDS:-3}
REPS=${REPS:-5}
mkdir -p out
zcat "$DATA" > out/debian.json
swift build -c release --scratch-path .build >/dev/null
if [ ! -x .venv/bin/python ] || ! .venv/bin/python -c 'import tantivy' 2>/dev/null; then
  python3 -m venv .venv && .venv/bin/pip install -q tantivy==0.27.0
fi
NICE=${NICE:--10}
if ! nice -n "$NICE" true 2>/dev/null; then NICE=0; fi
run() { nice -n "$NICE" "$@"; }
cpu() { awk '/^cpu /{print $2+$3+$4+$6+$7+$8, $5}' /proc/stat; }
for r in $(seq 1 "$ROUNDS"); do
  if [ $((r % 2)) -eq 1 ]; then order="engine fts5 tantivy"; else order="tantivy fts5 engine"; fi
  for e in $order; do
    read -r b0 i0 < <(cpu)
    case $e in
      engine)
        run .build/release/SearchBench build out/debian.json queries.json "$REPS" out/store > "out/engine-$r.json"
        run .build/release/SearchBench restart queries.json out/store > "out/restart-$r.json"
        # Encryption at rest: the same store written and reopened plain and encrypted, order alternating.
        if [ $((r % 2)) -eq 1 ]; then variants="plain encrypted"; else variants="encrypted plain"; fi
        for v in $variants; do
          key=""; [ "$v" = encrypted ] && key="bench-store-key-0123"
          run env ${key:+MG_BENCH_STORE_KEY="$key"} .build/release/SearchBench copy out/store "out/store-$v" > "out/copy-$v-$r.json"
          run env ${key:+MG_BENCH_STORE_KEY="$key"} .build/release/SearchBench restart queries.json "out/store-$v" > "out/restart-$v-$r.json"
        done ;;
      *) run .venv/bin/python anchors.py "$e" out/debian.json queries.json "$REPS" out > "out/$e-$r.json" ;;
    esac
    read -r b1 i1 < <(cpu)
    echo "{\"busyPct\": $(( (b1-b0) * 100 / ( (b1-b0) + (i1-i0) + 1 ) ))}" > "out/cpu-$e-$r.json"
  done
done
NICE=$NICE python3 summarize.py out "$ROUNDS" "$(git rev-parse --short HEAD)$(git diff --quiet HEAD -- ../../Sources/SearchEngine ../../Sources/JSONCore ../../Sources/Storage . || echo +dirty)" | tee out/summary.md
