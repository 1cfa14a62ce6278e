#!/usr/bin/env bash
# Regenerates what controller-gen owns in the API module: the deepcopy methods
# (api/**/zz_generated.deepcopy.go) and the CRDs (config/crd/bases/*.yaml).
#
#   hack/manifests.sh          regenerate in place
#   hack/manifests.sh --check  regenerate into a temporary copy and exit 1, printing the diff,
#                              when the committed files differ from what the markers produce
#
# controller-gen is installed at the pinned version into ./bin (gitignored) when it is missing or
# at another version. The API module has no local dependencies, so it is loaded with GOWORK=off:
# the result does not depend on which modules go.work lists.
set -euo pipefail

CONTROLLER_GEN_VERSION=v0.23.0

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
controller_gen="${root}/bin/controller-gen"

ensure_controller_gen() {
	if [[ -x "${controller_gen}" ]] &&
		[[ "$("${controller_gen}" --version 2>/dev/null)" == *"${CONTROLLER_GEN_VERSION}" ]]; then
		return
	fi
	echo "installing controller-gen ${CONTROLLER_GEN_VERSION} into ${root}/bin" >&2
	mkdir -p "${root}/bin"
	GOBIN="${root}/bin" GOWORK=off go install \
		"sigs.k8s.io/controller-tools/cmd/controller-gen@${CONTROLLER_GEN_VERSION}"
}

# generate <tree>: runs both generators on <tree>/api, writing the CRDs to <tree>/config/crd/bases.
# <tree> is the repository root or a scratch copy holding api/, config/crd/bases and the header.
generate() {
	local tree="$1"
	(
		cd "${tree}/api"
		GOWORK=off "${controller_gen}" \
			object:headerFile="${tree}/hack/boilerplate.go.txt" \
			paths=./...
		GOWORK=off "${controller_gen}" \
			crd:allowDangerousTypes=false \
			paths=./... \
			output:crd:artifacts:config="${tree}/config/crd/bases"
	)
}

ensure_controller_gen

case "${1:-}" in
"")
	generate "${root}"
	;;
--check)
	scratch="$(mktemp -d)"
	trap 'rm -rf "${scratch}"' EXIT
	# The CRD directory starts empty, so a CRD left over from a removed kind shows in the diff.
	mkdir -p "${scratch}/hack" "${scratch}/config/crd/bases"
	cp -R "${root}/api" "${scratch}/api"
	cp "${root}/hack/boilerplate.go.txt" "${scratch}/hack/"
	generate "${scratch}"
	status=0
	while IFS= read -r -d '' committed; do
		rel="${committed#"${root}/"}"
		diff -u "${committed}" "${scratch}/${rel}" || status=1
	done < <(find "${root}/api" -name 'zz_generated.*.go' -print0)
	while IFS= read -r -d '' generated; do
		rel="${generated#"${scratch}/"}"
		if [[ ! -f "${root}/${rel}" ]]; then
			echo "missing from the tree: ${rel}"
			status=1
		fi
	done < <(find "${scratch}/api" -name 'zz_generated.*.go' -print0)
	diff -ruN "${root}/config/crd/bases" "${scratch}/config/crd/bases" || status=1
	if [[ "${status}" -ne 0 ]]; then
		echo "generated files are stale: run hack/manifests.sh and commit the result" >&2
		exit 1
	fi
	echo "generated files are up to date"
	;;
*)
	echo "usage: $0 [--check]" >&2
	exit 2
	;;
esac
