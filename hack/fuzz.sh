#!/usr/bin/env bash
# Runs every Go fuzz target in broker/ and operator/ with a small budget each.
# Usage: hack/fuzz.sh [budget]   (default 3000x executions; count budgets avoid a Go 1.26
# fuzz-coordinator race seen with time budgets on a loaded CPU; a duration like 30s also works)
#
# FUZZ_JOBS targets run at once (default: the number of CPUs, at most 4). Most targets spend
# their time building and starting a test binary rather than fuzzing, one core at a time,
# so two at once on two cores take about two thirds of the time of one after the other. The
# results print in target order, each with its own output on failure.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
budget="${1:-3000x}"
jobs="${FUZZ_JOBS:-$(nproc 2>/dev/null || echo 2)}"
[ "$jobs" -le 4 ] || jobs=4
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# run_one N FILE:DECL runs one target; its output goes to $work/N.log, its verdict line to
# $work/N.res.
run_one() {
  local n="$1" file="${2%%:*}" decl="${2#*:}"
  local name="${decl#func }" mod="${file%%/*}"
  local pkg="./$(dirname "${file#*/}")"
  local start=$SECONDS line
  line="$(printf 'fuzz %-36s %-32s ' "${mod}/${pkg#./}" "$name")"
  if (cd "${root}/${mod}" && go test -run='^$' -fuzz="^${name}\$" -fuzztime="$budget" "$pkg") >"$work/$n.log" 2>&1 &&
    grep -q "^ok" "$work/$n.log" && ! grep -q "no fuzz tests" "$work/$n.log"; then
    echo "${line}ok ($((SECONDS - start))s)" >"$work/$n.res"
  else
    echo "${line}FAIL" >"$work/$n.res"
  fi
}
export -f run_one
export root budget work

mapfile -t targets < <(cd "$root" && grep -rHoE --include='*_test.go' '^func Fuzz[A-Za-z0-9_]*' broker operator | sort)
count=${#targets[@]}
[ "$count" -gt 0 ] || { echo "fuzz: no targets found"; exit 1; }
started=$SECONDS
for i in "${!targets[@]}"; do printf '%s\0%s\0' "$i" "${targets[$i]}"; done |
  xargs -0 -n 2 -P "$jobs" bash -c 'run_one "$0" "$1"'

status=0
for i in "${!targets[@]}"; do
  cat "$work/$i.res"
  if grep -q "FAIL$" "$work/$i.res"; then
    cat "$work/$i.log"
    status=1
  fi
done
echo "fuzz: ${count} targets, budget ${budget}, ${jobs} at a time, $((SECONDS - started))s"
exit $status
