#!/usr/bin/env bash
# Runs each fuzz target (package:Name) for FUZZTIME on top of its corpus;
# with no arguments, every fuzz target in the module: the packages whose
# tests declare one, each asked for its list (go test -list '^Fuzz'), so the
# list is never kept by hand. `hack/fuzz.sh -list` prints it.
#
# Go 1.26's fuzz coordinator can fail a target with a bare "context deadline
# exceeded" when -fuzztime runs out while a worker is starved of CPU
# (golang/go#75804, fixed in Go 1.27). That failure writes no failing input.
# It is retried once; a failure that wrote an input, or fails twice, fails.
set -euo pipefail
FUZZTIME=${FUZZTIME:-3s}
log=$(mktemp)
trap 'rm -f "$log"' EXIT

run() { go test -run '^$' -fuzz "^$2\$" -fuzztime "$FUZZTIME" "$1" >"$log" 2>&1; }

deadline_flake() {
  grep -q 'context deadline exceeded' "$log" && ! grep -q 'Failing input written' "$log"
}

# targets prints package:Name for every fuzz target of the module.
targets() {
  local pkgs
  pkgs=$(grep -rl --include='*_test.go' '^func Fuzz' . | xargs -n1 dirname | sort -u)
  for pkg in $pkgs; do
    go test -list '^Fuzz' "$pkg" | grep '^Fuzz' | sed "s|^|$pkg:|"
  done
}

if [[ ${1:-} == -list ]]; then targets; exit 0; fi
if (( $# == 0 )); then
  mapfile -t all < <(targets)
  set -- "${all[@]}"
fi

for t in "$@"; do
  pkg=${t%%:*} name=${t##*:}
  echo "fuzz $pkg $name ($FUZZTIME)"
  if run "$pkg" "$name"; then continue; fi
  if deadline_flake; then
    echo "fuzz $pkg $name: the coordinator's deadline race (golang/go#75804), no failing input; once more"
    run "$pkg" "$name" && continue
  fi
  cat "$log"
  exit 1
done
