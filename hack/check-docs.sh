#!/usr/bin/env bash
# Checks that docs/ and the code's comments describe the system as it is,
# not its history (that belongs in commit messages). Run by `make lint`.
# Fails, naming file and line, on:
#
#   1. a numbered notebook entry ("Stop" or "stops" and a number), anywhere
#      in the tree;
#   2. a dated history heading in docs/ or README.md: a Markdown heading that
#      holds a date (2006-01-02), a clock time (15:04) or a numbered issue,
#      item or round ("issue 5", "item 8");
#   3. a dated run in docs/, README.md or a Go comment: a date followed by a
#      clock time ("2006-01-02 15:04", not the ISO "2006-01-02T15:04:05Z" of
#      example output) or a clock time or range in UTC ("15:04 UTC",
#      "15:04–15:40 UTC");
#   4. a gateway/... path in docs/ or README.md that names no file or
#      directory (a package that moved or was deleted); a trailing
#      .Identifier (gateway/tasks.SubmissionOf) names the package's;
#   5. a rule cited by number ("rule 3", "rules 4 and 7") in docs/, README.md
#      or a Go comment: the contract's rules are not in the repository, so a
#      page or comment states the rule it relies on;
#   6. the fuzz-target table of docs/development.md ("Fuzzing") not listing
#      exactly the module's fuzz targets, package by package: the
#      `func FuzzX(f *testing.F)` declarations of the test files, which is
#      what `hack/fuzz.sh -list` lists. `hack/check-docs.sh -exact` compares
#      with `hack/fuzz.sh -list` itself (slower: it builds the test binaries).
#
# Everything but -exact reads the tracked files with git grep: a second or so.
set -euo pipefail
cd "$(dirname "$0")/.."

exact=false
case ${1:-} in
  -exact) exact=true ;;
  "") ;;
  *) echo "usage: $0 [-exact]" >&2; exit 2 ;;
esac

failed=0
# report HEADLINE: prints the headline and the file:line: lines read from
# stdin, and fails the run when there are any (call it with input
# redirected, not at the end of a pipe, which would run it in a subshell).
report() {
  local hits
  hits=$(cat)
  if [[ -n $hits ]]; then
    echo "check-docs: $1:" >&2
    sed 's/^/  /' <<<"$hits" >&2
    failed=1
  fi
}

docs=(docs README.md)
date='[0-9]{4}-[0-9]{2}-[0-9]{2}'
clock='[0-9]{1,2}:[0-9]{2}'

# 1. Numbered notebook entries. The pattern is written so that this file
# does not match it.
report 'numbered notebook entry (state the reason in place; history goes in commit messages)' < <(
  git grep -n -I -i -E '\b[s]tops? [0-9]+' -- . || true)

# 2. Dated history headings.
report 'dated history heading (docs describe the system as it is)' < <(
  git grep -n -I -E "^#{1,6} .*(${date}|\\b${clock}\\b|\\b(issue|item|round) [0-9]+)" -- "${docs[@]}" || true)

# 3. Dated runs: in the docs a date with a clock time or a time in UTC; in
# Go comments a time in UTC (a test may well say when DST starts).
utc="${clock}( ?(–|-) ?${clock})? UTC"
report 'dated run (give the command and the machine, not the day)' < <(
  git grep -n -I -E "(${date} ${clock}|${utc})" -- "${docs[@]}" || true
  git grep -n -I -E "//.*${utc}" -- '*.go' || true)

# 4. gateway/... paths in the docs that exist no more. A path is taken where
# it starts a word or follows ./ (not inside a URL or a JSON pointer such as
# '/gateway/replicas'); {a,b} and * expand as the shell does. A trailing
# .Name must be declared in the package.
declared() { # declared DIR NAME
  git grep -q -E "^func (\([^)]*\) )?$2\(|^type $2\b|^(var|const) $2\b|^\s+$2\b[^:]*=" -- "$1/*.go" ':!*_test.go'
}
gone() {
  git grep -h -o -I -E '(^|\./|[^A-Za-z0-9_/.-])gateway/[A-Za-z0-9_./{},*-]+' -- "${docs[@]}" \
    | sed -E 's#^[^g]*##; s#[.,:;)]+$##' | sort -u \
    | while read -r p; do
        path=${p%/} name=
        if [[ $path =~ ^(.*)\.([A-Z][A-Za-z0-9_]*)$ ]]; then
          path=${BASH_REMATCH[1]} name=${BASH_REMATCH[2]}
        fi
        found=false
        # shellcheck disable=SC2086 # expand braces and globs on purpose
        for f in $(eval "echo $path"); do [[ -e $f ]] && found=true; done
        if $found && [[ -n $name ]] && ! declared "$path" "$name"; then
          found=false
        fi
        $found || git grep -n -I -F "$p" -- "${docs[@]}" | cut -d: -f1,2 | sed "s#\$#: $p#"
      done
}
report 'name of a path or declaration that does not exist (moved or deleted?)' < <(gone)

# 5. Rules cited by number.
report 'rule cited by number (state what the rule says)' < <(
  git grep -n -I -i -E '\brules? [0-9]+' -- "${docs[@]}" || true
  git grep -n -I -i -E '//.*\brules? [0-9]+' -- '*.go' || true)

# 6. The fuzz-target table against the module's fuzz targets.
if $exact; then
  want=$(hack/fuzz.sh -list | sed 's#^\./##' | sort)
else
  want=$(git grep -I -E '^func Fuzz[A-Za-z0-9_]*\([A-Za-z_][A-Za-z0-9_]* \*testing\.F\)' -- '*_test.go' \
    | sed -E 's#^(.*)/[^/]*_test\.go:func (Fuzz[A-Za-z0-9_]*)\(.*#\1:\2#' | sort -u)
fi
# Table rows: | `FuzzA`, `FuzzB` | package | property |
have=$(awk '/^## Fuzzing/{on=1; next} /^## /{on=0} on && /^\| `Fuzz/' docs/development.md \
  | awk -F'|' '{ pkg=$3; gsub(/[ `]/, "", pkg); n=split($2, names, ","); for (i = 1; i <= n; i++) { x=names[i]; gsub(/[ `]/, "", x); print pkg ":" x } }' \
  | sort)
report 'fuzz-target table of docs/development.md differs from hack/fuzz.sh -list' < <(
  comm -23 <(echo "$want") <(echo "$have") | sed 's#^#docs/development.md: missing from the table: #'
  comm -13 <(echo "$want") <(echo "$have") | sed 's#^#docs/development.md: not a fuzz target: #')

if ((failed)); then
  exit 1
fi
echo "check-docs: ok"
