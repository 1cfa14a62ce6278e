#!/usr/bin/env bash
# kube-down.sh: stop the test cluster of hack/kube-up.sh (same as `hack/kube-up.sh down`;
# `--purge` also deletes its state directory).
set -euo pipefail
if [[ "${1:-}" == --purge ]]; then
	exec "$(dirname "$0")/kube-up.sh" purge
fi
exec "$(dirname "$0")/kube-up.sh" down
