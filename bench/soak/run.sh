#!/usr/bin/env bash
# Soak of issue 19's "Done means": 64 connections for DURATION seconds (300 by default) — Algolia queries
# against a mirrored index whose upstream flaps (500, 503, 429, too slow), and OData offline writes and
# reads against a service whose upstream comes and goes — then the queue drains. Reports duplicates,
# losses, 5xx under /1/ and the gateway's RSS (start, peak, after the drain). Loopback only; every loop is
# bounded; every process started here is stopped at exit.
#   bash bench/soak/run.sh
# Env knobs: DURATION (300 s), ALGOLIA_CONNECTIONS (48), ODATA_CONNECTIONS (16), WRITE_RATE (10 OData writes/s
#   in all, token bucket; 0 = unpaced), FLAP (10 s per upstream state), DRAIN (600 s: bound of the drain after the load), MIRRORGATE_BIN (.build/release/mirrorgate, built when unset), PYTHON (.e2e-venv/bin/python).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$here/env.sh"
echo "commit $(git -C "$repo" rev-parse --short HEAD), $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, binary $MIRRORGATE_BIN" >&2
exec "$py" "$here/soak.py"
