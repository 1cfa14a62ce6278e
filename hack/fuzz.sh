#!/usr/bin/env bash
# Runs every Go fuzz target in broker/ and operator/ with a small budget each.
# Usage: hack/fuzz.sh [budget]   (default 3000x executions; count budgets avoid a Go 1.26
# fuzz-coordinator race seen with time budgets on a loaded CPU; a duration like 30s also works)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
budget="${1:-3000x}"
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
status=0
count=0
while IFS=: read -r file decl; do
  name="${decl#func }"
  mod="${file%%/*}"
  pkg="./$(dirname "${file#*/}")"
  cd "${root}/${mod}"
  count=$((count + 1))
  printf 'fuzz %-36s %-32s ' "${mod}/${pkg#./}" "$name"
  start=$(date +%s)
  if go test -run='^$' -fuzz="^${name}\$" -fuzztime="$budget" "$pkg" >"$log" 2>&1 \
      && grep -q "^ok" "$log" && ! grep -q "no fuzz tests" "$log"; then
    echo "ok ($(( $(date +%s) - start ))s)"
  else
    echo "FAIL"
    cat "$log"
    status=1
  fi
done < <(cd "$root" && grep -rHoE --include='*_test.go' '^func Fuzz[A-Za-z0-9_]*' broker operator | sort)
echo "fuzz: ${count} targets, budget ${budget}"
[ "$count" -gt 0 ] || { echo "fuzz: no targets found"; exit 1; }
exit $status
