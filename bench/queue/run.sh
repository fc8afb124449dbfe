#!/usr/bin/env bash
# Request-queue benchmark (issue 6): (a) acknowledged offline writes through the gateway (wrk, 1
# connection) vs raw SQLite with the same durability plus the loopback HTTP floor; (b) the in-process
# append (QueueBench, this directory's Swift package) vs the SQLite C API; (c) upload throughput to the
# odatapy upstream; (d) the drain rate of a short and a long upload backlog (backlog.py). Loopback only; every
# run is bounded; started processes are stopped at exit.
#   bash bench/queue/run.sh
# Env knobs: ROUNDS (3), DURATION (5, seconds per wrk / raw-SQLite run), SLICES (12, 1-second slices per
#   gateway in (a')), APPENDS (1000, transactions per kind and round in (b)), UPLOADS (300, queued creates per
#   round in (c)), MIRRORGATE_BIN (.build/release/mirrorgate, built when unset), PYTHON (.e2e-venv/bin/python:
#   needs odatapy for (c)), BACKLOG (100,10000: backlog sizes of (d), the upload backlog drain, backlog.py).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
export PATH="$PATH:/usr/sbin:/opt/swift/usr/bin"
for tool in wrk python3; do
  command -v "$tool" >/dev/null || { echo "bench: $tool missing (bash scripts/setup.sh --bench installs it)" >&2; exit 1; }
done
if [ -z "${MIRRORGATE_BIN:-}" ]; then
  (cd "$repo" && swift build -c release --product mirrorgate)
  export MIRRORGATE_BIN="$repo/.build/release/mirrorgate"
fi
(cd "$here" && swift build -c release --scratch-path .build >/dev/null)
export QUEUE_BENCH="$here/.build/release/QueueBench"
py="${PYTHON:-$repo/.e2e-venv/bin/python}"
[[ -x "$py" ]] || py=python3
echo "commit $(git -C "$repo" rev-parse --short HEAD), $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, binary $MIRRORGATE_BIN" >&2
"$py" "$here/bench.py"
# (d) the upload backlog: BACKLOG sizes ("100,10000"), ROUNDS each (bench/queue/backlog.py).
exec "$py" "$here/backlog.py"
