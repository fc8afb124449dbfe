#!/usr/bin/env bash
# The one test command: release build, unit tests, a short run of every fuzz target, format lint, install
# check, end-to-end tests against the binary. On 2 cores a full run took 754 s from a fresh clone before the
# fuzz step (longer when other builds share the cores); later runs rebuild only what changed.
#   bash scripts/test.sh
# Env: MIRRORGATE_BIN (default <scratch>/release/mirrorgate), PYTEST_ARGS (extra pytest arguments),
#      E2E_VENV (default .e2e-venv), MIRRORGATE_SCRATCH_PATH (swift --scratch-path; default .build),
#      MIRRORGATE_FUZZ_SECONDS (mutation time per fuzz target after its corpus; default 20).
#      Exits non-zero if any step fails; every step runs regardless, so one run shows every failure.
set -uo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$(pwd)

if ! command -v swift >/dev/null 2>&1 && [ -x /opt/swift/usr/bin/swift ]; then
  export PATH="$PATH:/opt/swift/usr/bin"
fi

SCRATCH=${MIRRORGATE_SCRATCH_PATH:-.build}
SWIFT_OPTS=()
if [ "$SCRATCH" != .build ]; then SWIFT_OPTS=(--scratch-path "$SCRATCH"); fi

log() { printf '\n[test] %s\n' "$*" >&2; }

# 0. What the tests need (apt packages, Swift on PATH); idempotent and quick when present.
MIRRORGATE_SKIP_BUILD=1 bash scripts/setup.sh --test || { log "setup failed"; exit 1; }
declare -a RESULTS=()
FAILED=0
record() { # name status
  if [ "$2" -eq 0 ]; then RESULTS+=("ok      $1"); else RESULTS+=("FAILED  $1 (exit $2)"); FAILED=1; fi
}

# 1. Release build of the binary the end-to-end tests run.
log "swift build -c release --product mirrorgate ${SWIFT_OPTS[*]}"
swift build -c release --product mirrorgate "${SWIFT_OPTS[@]}"
build_status=$?
record "release build" $build_status

# 2. Unit tests of every target.
log "swift test ${SWIFT_OPTS[*]}"
swift test "${SWIFT_OPTS[@]}"
record "swift test (unit tests)" $?

# 2b. Fuzzing: every libFuzzer target (scripts/fuzz.sh, Tests/Fuzz/README.md) built in its own scratch path
#     (.build-fuzz) and run over its whole corpus, then MIRRORGATE_FUZZ_SECONDS (default 20) of mutations.
log "scripts/fuzz.sh --smoke ${MIRRORGATE_FUZZ_SECONDS:-20}"
bash scripts/fuzz.sh --smoke "${MIRRORGATE_FUZZ_SECONDS:-20}"
record "fuzz targets (corpus + ${MIRRORGATE_FUZZ_SECONDS:-20}s each)" $?

# 3. Formatting.
LINT_PATHS=(Sources Tests Package.swift)
while IFS= read -r -d '' f; do LINT_PATHS+=("$f"); done < <(find bench -name '*.swift' -not -path '*/.build*' -not -path '*/.swiftpm/*' -print0 2>/dev/null)
log "swift format lint --strict --recursive ${LINT_PATHS[*]}"
swift format lint --strict --recursive "${LINT_PATHS[@]}"
record "swift format lint" $?

# 4. Installation: man page and shell completions generated from the command definitions, systemd unit.
log "scripts/test-install.sh"
bash scripts/test-install.sh
record "install (man page, completions, systemd unit)" $?

# 5. End-to-end tests: pinned clients in a venv, the real binary, loopback upstreams.
VENV=${E2E_VENV:-$ROOT/.e2e-venv}
REQ=Tests/EndToEnd/requirements.txt
venv_status=0
if [ ! -x "$VENV/bin/python" ]; then
  log "creating venv $VENV"
  python3 -m venv "$VENV" || venv_status=$?
fi
if [ $venv_status -eq 0 ]; then
  want=$(sha256sum "$REQ" | cut -d' ' -f1)
  have=$(cat "$VENV/.requirements.sha256" 2>/dev/null || true)
  if [ "$want" != "$have" ]; then
    log "installing pinned end-to-end requirements into $VENV"
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -r "$REQ" \
      && echo "$want" >"$VENV/.requirements.sha256" || venv_status=$?
  fi
fi
record "e2e venv" $venv_status

export MIRRORGATE_BIN=${MIRRORGATE_BIN:-$ROOT/$SCRATCH/release/mirrorgate}
if [ $venv_status -eq 0 ]; then
  if [ ! -x "$MIRRORGATE_BIN" ]; then
    log "no binary at $MIRRORGATE_BIN: the end-to-end tests will fail"
  fi
  log "pytest Tests/EndToEnd (MIRRORGATE_BIN=$MIRRORGATE_BIN)"
  # shellcheck disable=SC2086
  timeout 1500 "$VENV/bin/python" -m pytest Tests/EndToEnd -q -p no:cacheprovider ${PYTEST_ARGS:-}
  record "end-to-end tests (pytest)" $?
else
  record "end-to-end tests (pytest, not run: no venv)" 1
fi

printf '\n[test] summary\n' >&2
for r in "${RESULTS[@]}"; do printf '[test]   %s\n' "$r" >&2; done
exit $FAILED
