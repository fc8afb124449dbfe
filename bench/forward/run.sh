#!/usr/bin/env bash
# Forwarding benchmark (issue 2): wrk through Mirrorgate vs nginx proxy_pass to one nginx upstream.
#   bash bench/forward/run.sh
# Env knobs: ROUNDS (3), DURATION (10s), CONNS (64), THREADS (2), LAT_DURATION (5s),
#   MIRRORGATE_BIN (.build/release/mirrorgate), MG_LOG_LEVEL (warning), BENCH_APP_ID, BENCH_API_KEY,
#   WRITE_RESULTS (1: rewrite the "forward" section of bench/RESULTS.md), RESULTS_FILE.
# Loopback only; every run is bounded by wrk's duration; all started processes are stopped at exit.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
export PATH="$PATH:/usr/sbin:/opt/swift/usr/bin"
for tool in nginx wrk python3; do
  command -v "$tool" >/dev/null || { echo "bench: $tool missing (bash scripts/setup.sh --bench installs it)" >&2; exit 1; }
done
if [ -z "${MIRRORGATE_BIN:-}" ]; then
  # incremental: the measured binary is the working tree's
  swift build -c release --product mirrorgate
fi
exec python3 bench/forward/bench.py
