#!/usr/bin/env bash
# Many seeds of the seeded upload fault test (Tests/EndToEnd/test_odata_upload_faults.py, issue 19 item 3):
# for each seed, both `upstreamSupportsRepeatability` settings — queued creates, updates and changesets
# uploaded through a proxy that answers a seeded share of committed writes with garbage, malformed heads,
# truncations, silence or resets, and `kill -9` of the gateway at seeded points of an upload. Counts
# duplicates and losses on the upstream; stops at the first failing seed and prints it (replay it with
# `MG_FAULT_SEED=N` on the test). Each seed is bounded (150 s per setting); the whole run by SEEDS.
#   bash bench/soak/upload_faults.sh            # seeds 1..20
#   FIRST=100 SEEDS=50 bash bench/soak/upload_faults.sh
# Env knobs: FIRST (1), SEEDS (20), MIRRORGATE_BIN (.build/release/mirrorgate, built when unset),
#   PYTHON (.e2e-venv/bin/python).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$here/env.sh"
first="${FIRST:-1}"
count="${SEEDS:-20}"
echo "commit $(git -C "$repo" rev-parse --short HEAD), $(date -u '+%Y-%m-%d %H:%M UTC'), seeds $first..$((first + count - 1))" >&2
cd "$repo/Tests/EndToEnd"
for ((seed = first; seed < first + count; seed++)); do
  if ! MG_FAULT_SEED="$seed" "$py" -m pytest -q -p no:cacheprovider -s test_odata_upload_faults.py \
      | grep -E "^seed |passed|failed|Error"; then
    echo "seed $seed: FAILED (replay: MG_FAULT_SEED=$seed)" >&2
    exit 1
  fi
done
echo "all $count seeds: 0 duplicates, 0 losses" >&2
