#!/usr/bin/env bash
# Runs every Go fuzz target of the main module for FUZZTIME each (default
# 30s), one after the other, and prints one line per target. `go test`
# already runs each target's seed corpus (f.Add and testdata/fuzz/<Name>/);
# this is the search for new crashes. A crash leaves its input in
# testdata/fuzz/<Name>/ of the package: commit it as a regression seed
# together with the fix.
#
#   hack/fuzz.sh [FUZZTIME]          FUZZ_MATCH=<regexp> limits the targets
set -euo pipefail
cd "$(dirname "$0")/.."
fuzztime="${1:-${FUZZTIME:-30s}}"
match="${FUZZ_MATCH:-.}"
# every "func FuzzX(" in a _test.go file of the main module (test/*/ has
# modules of its own and no fuzz targets)
mapfile -t targets < <(grep -rl --include='*_test.go' -E '^func Fuzz[A-Za-z0-9_]*\(' internal cmd api 2>/dev/null |
  while read -r f; do
    for n in $(grep -oE '^func Fuzz[A-Za-z0-9_]*' "$f" | sed 's/^func //'); do
      echo "./$(dirname "$f") $n"
    done
  done | sort -u | grep -E -- "$match" || true)
if [ "${#targets[@]}" -eq 0 ]; then
  echo "fuzz: no targets match '$match'" >&2
  exit 1
fi
echo "fuzz: ${#targets[@]} targets, $fuzztime each"
failed=()
start=$(date +%s)
for t in "${targets[@]}"; do
  read -r pkg name <<<"$t"
  log=$(mktemp)
  t0=$(date +%s)
  if go test "$pkg" -run '^$' -fuzz "^${name}\$" -fuzztime "$fuzztime" >"$log" 2>&1; then
    res=ok
  else
    res=FAIL
    failed+=("$pkg $name")
  fi
  execs=$(grep -oE 'execs: [0-9]+' "$log" | tail -1 | awk '{print $2}')
  printf 'fuzz: %-4s %-48s %-22s execs=%s took=%ss\n' "$res" "$pkg" "$name" "${execs:-?}" "$(( $(date +%s) - t0 ))"
  if [ "$res" = FAIL ]; then
    tail -40 "$log" | sed 's/^/    /'
  fi
  rm -f "$log"
done
echo "fuzz: ${#targets[@]} targets, ${#failed[@]} failed, wall $(( $(date +%s) - start ))s"
[ "${#failed[@]}" -eq 0 ]
