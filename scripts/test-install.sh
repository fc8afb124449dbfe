#!/usr/bin/env bash
# Checks scripts/install.sh and what it installs, into a scratch prefix: the binary runs; the man page
# (swift-argument-parser's generate-manual plugin) is found by man, renders without a groff warning and
# documents every subcommand; the bash completion completes subcommands, options and --config files; the
# zsh and fish completions parse; the systemd unit passes `systemd-analyze verify`.
#   bash scripts/test-install.sh          (scripts/setup.sh --test installs groff, man-db, zsh, fish, systemd)
# About 1 minute after a release build (the plugin builds its generate-manual tool once).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

log() { printf '[test-install] %s\n' "$*" >&2; }
fail() { log "FAILED: $*"; exit 1; }
for tool in groff man zsh fish systemd-analyze; do
  command -v "$tool" >/dev/null 2>&1 || fail "$tool is missing: bash scripts/setup.sh --test installs it"
done

tmp=$(mktemp -d /tmp/mg-install-test.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/usr
bash scripts/install.sh --prefix "$prefix" --sysconfdir "$tmp/etc" --systemd

"$prefix/bin/mirrorgate" --version >/dev/null || fail "the installed binary does not run"
log "ok  $prefix/bin/mirrorgate runs"

# man page
page=$(MANPATH=$prefix/share/man man -w mirrorgate) || fail "man does not find the page under $prefix/share/man"
[ "$page" = "$prefix/share/man/man1/mirrorgate.1" ] || fail "man found $page"
warnings=$(groff -mandoc -Tutf8 -ww -z "$page" 2>&1)
[ -z "$warnings" ] || fail "groff warnings: $warnings"
text=$(MANPATH=$prefix/share/man MANWIDTH=100 man mirrorgate 2>/dev/null | col -b)
for word in serve status sync upload build check --config --listen --data-dir "Exit status"; do
  grep -q -- "$word" <<<"$text" || fail "the man page does not mention '$word'"
done
log "ok  man mirrorgate: found, no groff warnings, every subcommand and the exit status documented"

# bash completion: as bash calls it on <TAB>
bash_completion=$prefix/share/bash-completion/completions/mirrorgate
complete_words() { # the words completed for a command line (the last word is the one being completed)
  (
    cd "$tmp"
    # shellcheck disable=SC1090
    source "$bash_completion"
    fn=$(complete -p mirrorgate | sed -E 's/.*-F ([^ ]+).*/\1/')
    COMP_LINE="$*"
    COMP_POINT=${#COMP_LINE}
    read -r -a COMP_WORDS <<<"$*"
    [[ "$COMP_LINE" == *" " ]] && COMP_WORDS+=("")
    COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
    COMPREPLY=()
    "$fn" mirrorgate "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD - 1]}"
    printf '%s\n' "${COMPREPLY[@]}"
  )
}
touch "$tmp/site.yaml" "$tmp/notes.txt"
[ "$(complete_words mirrorgate se)" = serve ] || fail "bash: 'mirrorgate se<TAB>' gave: $(complete_words mirrorgate se)"
complete_words mirrorgate serve --da | grep -qx -- --data-dir || fail "bash: 'serve --da<TAB>'"
complete_words mirrorgate check --config "" | grep -qx site.yaml || fail "bash: 'check --config <TAB>' lists no .yaml"
complete_words mirrorgate check --config "" | grep -q notes.txt && fail "bash: 'check --config <TAB>' offers a .txt"
log "ok  bash completion: subcommands, options, --config offers *.yaml files"

zsh -n "$prefix/share/zsh/site-functions/_mirrorgate" || fail "zsh completion does not parse"
fish --no-execute "$prefix/share/fish/vendor_completions.d/mirrorgate.fish" || fail "fish completion does not parse"
log "ok  zsh and fish completions parse"

unit=$tmp/etc/systemd/system/mirrorgate.service
grep -q "^ExecStart=$prefix/bin/mirrorgate serve --config $tmp/etc/mirrorgate/mirrorgate.yaml$" "$unit" \
  || fail "the unit's ExecStart does not name the installed binary: $(grep ExecStart "$unit")"
out=$(MANPATH=$prefix/share/man systemd-analyze verify "$unit" 2>&1) || fail "systemd-analyze verify: $out"
[ -z "$out" ] || fail "systemd-analyze verify printed: $out"
log "ok  systemd-analyze verify $unit: clean"
log "all checks passed"
