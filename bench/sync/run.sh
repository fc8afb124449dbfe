#!/usr/bin/env bash
# Sync time of a mirrored Algolia index with 0…10,000 query rules (the rules are synced with every sync).
# Loopback only; every loop is bounded. Usage:
#   MIRRORGATE_BIN=path/to/release/mirrorgate bash bench/sync/run.sh [--objects N] [--rules 0,100,1000] [--repeats N]
# Needs the e2e suite's Python (the fake upstream): PYTHON defaults to .e2e-venv/bin/python, else python3.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
export MIRRORGATE_BIN="${MIRRORGATE_BIN:-$repo/.build/release/mirrorgate}"
if [[ ! -x "$MIRRORGATE_BIN" ]]; then
  echo "no release binary at $MIRRORGATE_BIN: swift build -c release --product mirrorgate, or set MIRRORGATE_BIN" >&2
  exit 2
fi
py="${PYTHON:-$repo/.e2e-venv/bin/python}"
[[ -x "$py" ]] || py=python3
echo "commit $(git -C "$repo" rev-parse --short HEAD), $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, binary $MIRRORGATE_BIN"
exec "$py" "$here/driver.py" "$@"
