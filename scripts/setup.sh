#!/usr/bin/env bash
# Sets up everything Mirrorgate needs on a Debian machine and builds the release binary.
# Idempotent: apt packages are installed only when missing; the build is incremental.
#   bash scripts/setup.sh            # then: .build/release/mirrorgate serve
# Env: MIRRORGATE_SKIP_BUILD=1 skips the swift build (packages only).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

PACKAGES=(libmicrohttpd-dev libcurl4-openssl-dev libsqlite3-dev sqlite3 pkg-config python3-venv nginx wrk)

log() { printf '[setup] %s\n' "$*" >&2; }

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done

if ((${#missing[@]})); then
  SUDO=()
  if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then
      SUDO=(sudo)
    else
      log "missing packages (${missing[*]}) and not root, and no sudo: install them and re-run"
      exit 1
    fi
  fi
  log "installing: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  "${SUDO[@]}" apt-get update -q
  "${SUDO[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
else
  log "apt packages already installed"
fi

# The Swift toolchain lives in /opt/swift on the project's machines; make sure it is on PATH.
if ! command -v swift >/dev/null 2>&1 && [ -x /opt/swift/usr/bin/swift ]; then
  export PATH="$PATH:/opt/swift/usr/bin"
fi
if ! command -v swift >/dev/null 2>&1; then
  log "swift not found: install Swift 6.3 (https://www.swift.org/install/) and re-run"
  exit 1
fi

if [ "${MIRRORGATE_SKIP_BUILD:-0}" != 1 ]; then
  log "building: swift build -c release --product mirrorgate"
  swift build -c release --product mirrorgate
  log "built $(pwd)/.build/release/mirrorgate"
fi
