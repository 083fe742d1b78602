#!/usr/bin/env bash
# Runs each fuzz target (package:Name) for FUZZTIME on top of its corpus.
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
