#!/usr/bin/env bash
# Runs the black-box suites (test/) as three concurrent jobs and fails if any fails:
#   1. every package but test/cluster (go test runs those packages in parallel itself);
#   2. test/cluster's replication specs, the ones named "(rN) ...";
#   3. the rest of test/cluster.
# test/cluster is the long pole, and its specs spend most of their time waiting on timers
# (failover deadlines, frozen processes, kill loops), so splitting it shortens the wall time
# without starving the others. Concurrent jobs never share an address: every node gets its
# own 127.0.0.x and free ports (test/harness NextHost, FreePorts).
#
# Usage: hack/blackbox.sh <narad binary> [go test flags...]
set -uo pipefail
cd "$(dirname "$0")/../test"

bin=${1:?usage: hack/blackbox.sh <narad binary> [go test flags...]}
shift
export NARAD_BIN=$bin
GO=${GO:-go}

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

# test/kube needs the real cluster of hack/kube-up.sh: only `make e2e-kube` runs it.
others=$("$GO" list ./... | grep -v -e '/test/cluster$' -e '/test/kube$')
replication='\(r[0-9]+\)'

"$GO" test -count=1 -timeout 20m "$@" $others >"$out/others" 2>&1 &
p1=$!
"$GO" test -count=1 -timeout 20m "$@" ./cluster/ -ginkgo.focus "$replication" >"$out/replication" 2>&1 &
p2=$!
"$GO" test -count=1 -timeout 20m "$@" ./cluster/ -ginkgo.skip "$replication" >"$out/cluster" 2>&1 &
p3=$!

rc=0
for job in "others:$p1" "replication:$p2" "cluster:$p3"; do
	name=${job%%:*}
	if wait "${job##*:}"; then
		echo "== $name: ok"
	else
		echo "== $name: FAILED"
		rc=1
	fi
	cat "$out/$name"
done
exit $rc
