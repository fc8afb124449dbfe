# Sourced by bench/soak/*.sh: `repo`, `py` (the e2e venv's Python) and MIRRORGATE_BIN (the release binary,
# built when unset).
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
export PATH="$PATH:/opt/swift/usr/bin"
if [ -z "${MIRRORGATE_BIN:-}" ]; then
  (cd "$repo" && swift build -c release --product mirrorgate)
  export MIRRORGATE_BIN="$repo/.build/release/mirrorgate"
fi
py="${PYTHON:-$repo/.e2e-venv/bin/python}"
[[ -x "$py" ]] || py="$repo/../main/.e2e-venv/bin/python"
[[ -x "$py" ]] || py=python3
