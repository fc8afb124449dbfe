#!/usr/bin/env bash
# libFuzzer targets for every parser of input (issue 23; Tests/Fuzz/README.md). Built only here: Package.swift
# declares them when MIRRORGATE_FUZZ=1, in their own scratch path (.build-fuzz), with
# -sanitize=fuzzer,address; the normal build and tests never see them.
#   bash scripts/fuzz.sh TARGET MINUTES     # one target for MINUTES (fractions allowed) on its corpus
#   bash scripts/fuzz.sh --smoke SECONDS    # every target for SECONDS after its whole corpus (scripts/test.sh)
#   bash scripts/fuzz.sh --build [TARGET]   # build (all targets by default)
#   bash scripts/fuzz.sh --seed [TARGET]    # rebuild the corpus from the test fixtures (Tests/Fuzz/seeds.py),
#                                           # keeping only inputs that add coverage
#   bash scripts/fuzz.sh --list
# A long run keeps what it finds in .build-fuzz/corpus/TARGET (the repository's corpus is only read);
# FUZZ_UPDATE_CORPUS=1 merges the new inputs that add coverage into Tests/Fuzz/corpus/TARGET afterwards.
# A crash, timeout (> FUZZ_TIMEOUT s, default 10) or out-of-memory (> FUZZ_RSS_MB, default 2048) input
# is written to .build-fuzz/artifacts/TARGET/ and the script exits non-zero; reproduce with
#   .build-fuzz/debug/TARGET .build-fuzz/artifacts/TARGET/crash-...
# FUZZ_ARGS adds libFuzzer options (e.g. "-fork=1 -ignore_crashes=1" to go on past a known crash).
# Then make each finding a regression test (Tests/Fuzz/README.md) and add it to Tests/Fuzz/corpus/TARGET/.
set -uo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$(pwd)
if ! command -v swift >/dev/null 2>&1 && [ -x /opt/swift/usr/bin/swift ]; then
  export PATH="$PATH:/opt/swift/usr/bin"
fi

TARGETS=(FuzzHTTP FuzzJSON FuzzAlgolia FuzzODataQuery FuzzODataBatch FuzzODataXML FuzzODataPayload FuzzConfig)
SCRATCH=.build-fuzz
BIN=$SCRATCH/debug
TIMEOUT=${FUZZ_TIMEOUT:-10}
RSS_MB=${FUZZ_RSS_MB:-2048}
log() { printf '[fuzz] %s\n' "$*" >&2; }

known() { local t; for t in "${TARGETS[@]}"; do [ "$t" = "$1" ] && return 0; done; return 1; }

build() { # targets...
  local t status=0
  for t in "$@"; do
    log "building $t"
    # The gold linker warns about every ASan symbol it cannot export; the warnings say nothing.
    MIRRORGATE_FUZZ=1 swift build --quiet --scratch-path "$SCRATCH" --product "$t" \
      -Xswiftc -sanitize=fuzzer,address -Xswiftc -parse-as-library 2>&1 \
      | grep -v "ld.gold: warning: Cannot export local symbol"
    [ "${PIPESTATUS[0]}" -eq 0 ] || { log "build of $t failed"; status=1; }
  done
  return $status
}

# run TARGET SECONDS WORKDIR: the repository's corpus is read, new inputs go to WORKDIR.
run() {
  local t=$1 seconds=$2 work=$3
  mkdir -p "$work" "$SCRATCH/artifacts/$t" "Tests/Fuzz/corpus/$t"
  ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0} "$BIN/$t" \
    -dict="Tests/Fuzz/dict/$t.dict" -max_total_time="$seconds" -timeout="$TIMEOUT" -rss_limit_mb="$RSS_MB" \
    -malloc_limit_mb="$RSS_MB" -max_len=16384 -print_final_stats=1 \
    -artifact_prefix="$SCRATCH/artifacts/$t/" ${FUZZ_ARGS:-} "$work" "Tests/Fuzz/corpus/$t"
}

case ${1:-} in
  --list) printf '%s\n' "${TARGETS[@]}" ;;
  --build)
    if [ -n "${2:-}" ]; then known "$2" || { log "unknown target $2"; exit 2; }; build "$2"; else build "${TARGETS[@]}"; fi
    ;;
  --seed)
    sel=("${TARGETS[@]}")
    if [ -n "${2:-}" ]; then sel=("$2"); fi
    build "${sel[@]}" || exit 1
    seeds=$(mktemp -d)
    python3 Tests/Fuzz/seeds.py "$seeds" >/dev/null
    for t in "${sel[@]}"; do
      mkdir -p "Tests/Fuzz/corpus/$t"
      merged=$(mktemp -d)
      ASAN_OPTIONS=detect_leaks=0 "$BIN/$t" -merge=1 -timeout="$TIMEOUT" -rss_limit_mb="$RSS_MB" -max_len=16384 \
        "$merged" "Tests/Fuzz/corpus/$t" "$seeds/$t" 2>/dev/null
      rm -rf "Tests/Fuzz/corpus/$t" && mv "$merged" "Tests/Fuzz/corpus/$t"
      log "$t: $(ls "Tests/Fuzz/corpus/$t" | wc -l) inputs in Tests/Fuzz/corpus/$t"
    done
    rm -rf "$seeds"
    ;;
  --smoke)
    seconds=${2:-20}
    build "${TARGETS[@]}" || exit 1
    failed=()
    for t in "${TARGETS[@]}"; do
      work=$(mktemp -d)
      log "$t: its corpus, then ${seconds}s of mutations"
      run "$t" "$seconds" "$work" 2>&1 | grep -E "^#[0-9]+[[:space:]]+(INITED|DONE)|^stat::(number_of_executed_units|peak_rss_mb)|ERROR|SUMMARY|Test unit written|^Fuzz|Fatal error|deadly|ParseDictionaryFile"
      [ "${PIPESTATUS[0]}" -eq 0 ] || failed+=("$t")
      rm -rf "$work"
    done
    if ((${#failed[@]})); then log "findings in: ${failed[*]} (inputs in $SCRATCH/artifacts/)"; exit 1; fi
    log "no findings in ${#TARGETS[@]} targets"
    ;;
  "" | -*) sed -n '2,17p' "$0" >&2; exit 2 ;;
  *)
    t=$1
    known "$t" || { log "unknown target $t (scripts/fuzz.sh --list)"; exit 2; }
    minutes=${2:?minutes}
    seconds=$(python3 -c "print(max(1, round(float('$minutes') * 60)))")
    build "$t" || exit 1
    work="$SCRATCH/corpus/$t"
    log "$t for ${seconds}s; new inputs in $work, findings in $SCRATCH/artifacts/$t/"
    run "$t" "$seconds" "$work"
    status=$?
    if [ "${FUZZ_UPDATE_CORPUS:-0}" = 1 ]; then
      merged=$(mktemp -d)
      ASAN_OPTIONS=detect_leaks=0 "$BIN/$t" -merge=1 -timeout="$TIMEOUT" -rss_limit_mb="$RSS_MB" -max_len=16384 \
        "$merged" "Tests/Fuzz/corpus/$t" "$work" 2>/dev/null
      rm -rf "Tests/Fuzz/corpus/$t" && mv "$merged" "Tests/Fuzz/corpus/$t"
      log "$t: $(ls "Tests/Fuzz/corpus/$t" | wc -l) inputs in Tests/Fuzz/corpus/$t"
    fi
    exit $status
    ;;
esac
