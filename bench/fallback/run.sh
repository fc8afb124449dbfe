#!/usr/bin/env bash
# Fallback latency of a mirrored Algolia index (refused and black-holed upstream vs offlineOnly) and the
# preventive first-line time. Loopback only; every loop is bounded. Usage:
#   MIRRORGATE_BIN=path/to/release/mirrorgate bash bench/fallback/run.sh [--requests N] [--preventive N]
# Needs the e2e suite's Python (the fake upstream): PYTHON defaults to /tmp/mgvenv/bin/python, else python3.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
export MIRRORGATE_BIN="${MIRRORGATE_BIN:-$repo/.build/release/mirrorgate}"
if [[ ! -x "$MIRRORGATE_BIN" ]]; then
  echo "no release binary at $MIRRORGATE_BIN: swift build -c release --product mirrorgate, or set MIRRORGATE_BIN" >&2
  exit 2
fi
py="${PYTHON:-/tmp/mgvenv/bin/python}"
[[ -x "$py" ]] || py=python3
echo "commit $(git -C "$repo" rev-parse --short HEAD), $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, binary $MIRRORGATE_BIN"
exec "$py" "$here/driver.py" "$@"
