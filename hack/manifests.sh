#!/usr/bin/env bash
# Regenerates what controller-gen owns: the deepcopy methods (api/**/zz_generated.deepcopy.go),
# the CRDs (config/crd/bases/*.yaml, copied byte for byte into the Helm chart's
# charts/narad-operator/crds/) and the manager's ClusterRole (config/rbac/role.yaml, from the
# +kubebuilder:rbac markers in operator/internal/controller/rbac.go).
#
#   hack/manifests.sh          regenerate in place
#   hack/manifests.sh --check  regenerate into a temporary copy and exit 1, printing the diff,
#                              when the committed files differ from what the markers produce
#
# controller-gen is installed at the pinned version into ./bin (gitignored) when it is missing or
# at another version. The API module has no local dependencies, so it is loaded with GOWORK=off:
# the result does not depend on which modules go.work lists. The RBAC markers live in a package
# of the operator module that imports nothing, so it loads with GOWORK=off too, without the
# operator's dependencies (or the other controllers' packages) having to compile.
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

# generate <tree>: runs the generators on <tree>/api and <tree>/operator/internal/controller,
# writing the CRDs to <tree>/config/crd/bases (and a copy to <tree>/charts/narad-operator/crds)
# and the ClusterRole to <tree>/config/rbac/role.yaml. <tree> is the repository root or a scratch
# copy holding api/, operator/go.mod, the rbac.go package, config/ and the header.
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
	(
		cd "${tree}/operator/internal/controller"
		GOWORK=off "${controller_gen}" \
			rbac:roleName=manager-role \
			paths=. \
			output:rbac:artifacts:config="${tree}/config/rbac"
	)
	# Helm installs crds/ as they are: the chart ships exactly the generated CRDs.
	rm -rf "${tree}/charts/narad-operator/crds"
	mkdir -p "${tree}/charts/narad-operator/crds"
	cp "${tree}"/config/crd/bases/*.yaml "${tree}/charts/narad-operator/crds/"
}

ensure_controller_gen

case "${1:-}" in
"")
	generate "${root}"
	;;
--check)
	scratch="$(mktemp -d)"
	trap 'rm -rf "${scratch}"' EXIT
	# The CRD directories start empty, so a CRD left over from a removed kind shows in the diff.
	mkdir -p "${scratch}/hack" "${scratch}/config/crd/bases" "${scratch}/config/rbac" \
		"${scratch}/operator/internal/controller"
	cp -R "${root}/api" "${scratch}/api"
	cp "${root}/operator/go.mod" "${scratch}/operator/"
	cp "${root}/operator/internal/controller/"*.go "${scratch}/operator/internal/controller/"
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
	diff -ruN "${root}/charts/narad-operator/crds" "${scratch}/charts/narad-operator/crds" || status=1
	diff -uN "${root}/config/rbac/role.yaml" "${scratch}/config/rbac/role.yaml" || status=1
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
