#!/usr/bin/env bash
# Every module stands on its own: outside the workspace (GOWORK=off) it builds, vets, and
# `go mod tidy` would not change its go.mod or go.sum. operator/ and test/ require narad.dev/api
# and narad.dev/broker (test/ also narad.dev/operator) with replace directives to the local
# directories, so a requirement that go.work alone would satisfy fails here. Run by `make lint`.
#
#   hack/check-modules.sh              check api, broker, operator and test
#   hack/check-modules.sh operator     check the modules named
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}

modules=("$@")
if [[ ${#modules[@]} -eq 0 ]]; then
	modules=(api broker operator test)
fi

# not_tidy: modules whose go.mod keeps, on purpose, a requirement `go mod tidy` would drop.
# broker/go.mod pins the google.golang.org/genproto umbrella module: without it an older one,
# reached through pebble, also provides googleapis/rpc/status and gRPC fails to build
# (ambiguous import). They still have to build and vet.
not_tidy=" broker "

status=0
for m in "${modules[@]}"; do
	echo "== ${m} (GOWORK=off)"
	if [[ "${not_tidy}" == *" ${m} "* ]]; then
		echo "${m}: tidiness not checked (see not_tidy)"
	elif ! out=$(cd "${m}" && GOWORK=off "${GO}" mod tidy -diff 2>&1); then
		echo "${m}: go mod tidy would change go.mod/go.sum (run: cd ${m} && GOWORK=off go mod tidy):"
		echo "${out}"
		status=1
		continue
	fi
	if ! (cd "${m}" && GOWORK=off "${GO}" build ./... && GOWORK=off "${GO}" vet ./...); then
		echo "${m}: does not build or vet outside the workspace"
		status=1
	fi
done
exit "${status}"
