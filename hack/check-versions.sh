#!/usr/bin/env bash
# check-versions.sh: fail when the release version disagrees between the VERSION file, the
# chart's appVersion, the kustomize manager image tag and operator/release.Version, or when
# anything under config/ or charts/ names an image by the `latest` tag (a moving tag installs
# whatever was pushed last, and the kubelet then pulls on every start). Run by `make lint`.
set -euo pipefail
cd "$(dirname "$0")/.."

fail=0
bad() {
	echo "check-versions: $*" >&2
	fail=1
}

version="$(tr -d '[:space:]' <VERSION)"
[[ "$version" =~ ^[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$ ]] || bad "VERSION '${version}' is not MAJOR.MINOR.PATCH"

app="$(awk '$1 == "appVersion:" { gsub(/["'"'"']/, "", $2); print $2 }' charts/narad-operator/Chart.yaml)"
[[ "$app" == "$version" ]] || bad "charts/narad-operator/Chart.yaml appVersion '${app}' != VERSION '${version}'"

tag="$(awk '$1 == "newTag:" { gsub(/["'"'"']/, "", $2); print $2 }' config/manager/kustomization.yaml)"
[[ "$tag" == "$version" ]] || bad "config/manager/kustomization.yaml newTag '${tag}' != VERSION '${version}'"

gover="$(sed -n 's/^const Version = "\(.*\)"$/\1/p' operator/release/release.go)"
[[ "$gover" == "$version" ]] || bad "operator/release/release.go Version '${gover}' != VERSION '${version}'"

if latest="$(grep -rnE ':latest([^A-Za-z0-9_.-]|$)|newTag: *"?latest"?' config charts)"; then
	bad "images tagged latest (pin the release version):"
	echo "$latest" >&2
fi
exit "$fail"
