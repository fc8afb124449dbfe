#!/usr/bin/env bash
# Local OData query latency through the gateway vs the same SQL run directly on the mirror's SQLite file.
# 100,000-row entity set loaded from bootstrap files (no upstream), routing localFirst. Loopback only;
# every loop is bounded. Usage:
#   MIRRORGATE_BIN=path/to/release/mirrorgate bash bench/odata/run.sh [--rows N] [--requests N]
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
exec "$py" "$here/bench.py" "$@"
