#!/usr/bin/env bash
# bench/writes: incremental writes on the 63,666 Debian records (issue 14), in process (engine + SQLite
# store, synchronous=FULL): a single-object write until a search sees it, and a 10,000-object batch next to
# a manual build of the same 10,000 objects. Prints one JSON object (also written to out/writes.json).
# Knobs: DATA (the .json.gz), SINGLE (single writes, 200), ROUNDS (batch/build rounds, 3), NICE (-10).
set -euo pipefail
cd "$(dirname "$0")"
DATA=${DATA:-../../../shared/data/debian-packages.json.gz}
mkdir -p out
zcat "$DATA" > out/debian.json
swift build -c release --scratch-path .build >/dev/null
NICE=${NICE:--10}
if ! nice -n "$NICE" true 2>/dev/null; then NICE=0; fi
rm -rf out/store && mkdir -p out/store
nice -n "$NICE" .build/release/WriteBench out/debian.json out/store "${SINGLE:-200}" "${ROUNDS:-3}" | tee out/writes.json
