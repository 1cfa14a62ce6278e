#!/usr/bin/env bash
# Fail when a docs/ reference (in Go comments, the Makefile, hack/ or docs/) names a page or a
# section that does not exist, or when code still cites the design notes that are not in the
# repository (spec/…, seeds/…, "issue N"). Run by `make lint`.
#
# Before checking the tree it checks itself: against the fixture in hack/testdata/docrefs, the
# checker must accept the good reference and report exactly the two bad ones.
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
"$GO" build -o "$bin/checkdocrefs" ./hack/checkdocrefs/main.go
check() { "$bin/checkdocrefs" "$@"; }

fixture=hack/testdata/docrefs
set +e
out=$(check -root "$fixture" 2>&1)
rc=$?
set -e
want=$'broker/refs.go:7: docs/internals/page.md §3: no section 3 in docs/internals/page.md\nbroker/refs.go:10: spec/storage.md: cites a document that is not in the repository, or an issue number: cite docs/ instead\ncheckdocrefs: 2 broken documentation reference(s)'
if [ "$rc" -ne 1 ] || [ "$out" != "$want" ]; then
	echo "check-doc-refs self-test failed (exit $rc); got:" >&2
	echo "$out" >&2
	echo "want:" >&2
	echo "$want" >&2
	exit 1
fi

check -root .
