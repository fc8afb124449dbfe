#!/usr/bin/env bash
# Installs what Mirrorgate needs on a Debian machine and builds the release binary. Idempotent: apt packages
# are installed only when missing; the build is incremental.
#   bash scripts/setup.sh            # the demo: the C libraries' -dev packages (libxml2-dev too), pkg-config; build
#   bash scripts/setup.sh --test     # also what scripts/test.sh needs (python3-venv, sqlite3, prometheus for
#                                    #   promtool, and for scripts/test-install.sh: man-db, groff, zsh, fish,
#                                    #   systemd-analyze)
#   bash scripts/setup.sh --bench    # also nginx and wrk for bench/ (nginx's service is not started)
# Needs Swift 6.3 (https://www.swift.org/install/; on the project's machines in /opt/swift).
# Env: MIRRORGATE_SKIP_BUILD=1 skips the swift build (packages only).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

# libxml2-dev: the one XML parser of input (ODataCore's SafeXML, through the CLibXML2 module); its libxml2
# is also what FoundationXML loads at start.
PACKAGES=(libmicrohttpd-dev libcurl4-openssl-dev libsqlite3-dev libxml2-dev pkg-config)
TEST_PACKAGES=(python3-venv sqlite3 prometheus man-db groff-base bsdextrautils zsh fish systemd)
BENCH_PACKAGES=(nginx wrk)
BENCH=0
QUIET_SERVICES=0
for arg in "$@"; do
  case $arg in
    --test) PACKAGES+=("${TEST_PACKAGES[@]}"); QUIET_SERVICES=1 ;;
    --bench) PACKAGES+=("${BENCH_PACKAGES[@]}"); BENCH=1; QUIET_SERVICES=1 ;;
    *) echo "setup.sh: unknown option $arg (--test, --bench)" >&2; exit 2 ;;
  esac
done

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
  # the benchmarks run nginx with a configuration of their own, the tests need only prometheus's promtool:
  # keep the packages from starting a server on port 80 or 9090 (policy-rc.d answers "not now" to every
  # service start during this install)
  policy=/usr/sbin/policy-rc.d
  if [ "$QUIET_SERVICES" = 1 ] && [ ! -e "$policy" ]; then
    printf '#!/bin/sh\nexit 101\n' | "${SUDO[@]}" tee "$policy" >/dev/null
    "${SUDO[@]}" chmod 0755 "$policy"
    trap '"${SUDO[@]}" rm -f "$policy"' EXIT
  fi
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
version=$(swift --version 2>/dev/null | sed -nE 's/.*Swift version ([0-9]+\.[0-9]+).*/\1/p' | head -1)
case $version in
  6.[3-9]* | [7-9].*) ;;
  *) log "Swift ${version:-?} found: Mirrorgate needs Swift 6.3 or later (https://www.swift.org/install/)"; exit 1 ;;
esac

# The fuzz targets (scripts/fuzz.sh, run by scripts/test.sh) link libFuzzer and AddressSanitizer from the
# toolchain's compiler-rt: Swift's Linux toolchains ship both.
if [[ " ${PACKAGES[*]} " == *" python3-venv "* ]]; then
  swift_dir=$(dirname "$(command -v swift)")
  if ! compgen -G "$swift_dir/../lib/clang/*/lib/linux/libclang_rt.fuzzer-*.a" >/dev/null \
    && ! compgen -G "$swift_dir/../lib/swift/clang/lib/linux/libclang_rt.fuzzer-*.a" >/dev/null; then
    log "this Swift toolchain has no libFuzzer runtime (libclang_rt.fuzzer): use a swift.org Linux toolchain"
    exit 1
  fi
fi

if [ "${MIRRORGATE_SKIP_BUILD:-0}" != 1 ]; then
  log "building: swift build -c release --product mirrorgate (a first build takes 10-15 minutes on 2 cores)"
  swift build -c release --product mirrorgate
  log "built $(pwd)/.build/release/mirrorgate"
fi
