#!/usr/bin/env bash
# Runs every Go fuzz target in broker/ for a short time each (default 3000x executions; count budgets avoid a Go 1.26 fuzz-coordinator race seen with time budgets on a loaded CPU).
# Usage: hack/fuzz.sh [duration]
set -euo pipefail
cd "$(dirname "$0")/../broker"
fuzztime="${1:-3000x}"
status=0
while IFS= read -r line; do
  file="${line%%:*}"
  name="$(sed -E 's/^func (Fuzz[A-Za-z0-9_]*)\(.*/\1/' <<<"${line#*:}")"
  pkg="./$(dirname "$file")"
  echo "fuzz ${pkg} ${name} (${fuzztime})"
  if ! go test -run='^$' -fuzz="^${name}\$" -fuzztime="${fuzztime}" "${pkg}" >/tmp/narad-fuzz.log 2>&1; then
    cat /tmp/narad-fuzz.log
    status=1
  fi
done < <(grep -rn --include='*_test.go' -E '^func Fuzz[A-Za-z0-9_]*\(' . | sed 's|^\./||')
exit $status
