#!/usr/bin/env bash
# One command for a newcomer: install what is missing, build, and serve the built-in demo configuration.
#   bash scripts/demo.sh [extra serve options, e.g. --listen 127.0.0.1:8080]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/setup.sh
exec .build/release/mirrorgate serve "$@"
