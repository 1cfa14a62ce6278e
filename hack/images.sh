#!/usr/bin/env bash
# images.sh: the broker and operator container images, built from the tree. `make images` runs
# it; hack/kube/images.sh sources it for the test cluster's images, so both pack the same files
# the same way (only the names differ).
#
#   hack/images.sh    writes two OCI image layout tars under $NARAD_IMAGE_OUT (bin/images):
#                       narad-<tag>.tar           <registry>/narad:<tag>
#                       narad-operator-<tag>.tar  <registry>/narad-operator:<tag>
#                     then prints their names and sizes. Load one with `docker load -i`,
#                     `podman load -i`, `ctr -n k8s.io images import` or push it with
#                     `skopeo copy oci-archive:<tar> docker://<registry>/<name>:<tag>`.
#
# Environment:
#   NARAD_IMAGE_REGISTRY  ghcr.io/narad-dev  the repository prefix of both names
#   NARAD_IMAGE_TAG       the VERSION file    the tag: a release version, never `latest`
#   NARAD_IMAGE_OUT       bin/images
#   NARAD_IMAGE_BUILDER   ociimage            or docker / podman: build broker/Dockerfile and
#                                             operator/Dockerfile with it instead (needs its
#                                             daemon and network access to the base images)
#
# No registry and no container builder are needed by default: each image is one static Go
# binary packed by hack/kube/ociimage (reproducible: epoch timestamps, sorted entries), laid out
# as broker/Dockerfile and operator/Dockerfile lay theirs out, running as 65532.
set -euo pipefail

IMAGES_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
IMAGE_PATH_ENV=PATH=/usr/local/bin:/usr/bin:/bin

# image_tools BIN: builds the ociimage packer into BIN.
image_tools() {
	(cd "$IMAGES_ROOT" && "${GO:-go}" build -o "$1/ociimage" ./hack/kube/ociimage/main.go)
}

# broker_image BIN OUT NAME VERSION: a static narad (main.version=VERSION) packed as NAME into
# the OCI layout tar OUT: /usr/local/bin/narad, an empty /var/lib/narad owned by 65532, runs
# `narad serve` as 65532 (broker/Dockerfile).
broker_image() {
	local bin="$1" out="$2" name="$3" version="$4"
	(cd "$IMAGES_ROOT" && CGO_ENABLED=0 "${GO:-go}" build -trimpath -ldflags "-s -w -X main.version=${version}" \
		-o "${bin}/narad" ./broker/cmd/narad)
	"${bin}/ociimage" -o "$out" -name "$name" -user 65532:65532 \
		-entrypoint narad -cmd serve -env "$IMAGE_PATH_ENV" \
		-file "/usr/local/bin/narad=${bin}/narad" \
		-dir /var/lib/narad=65532:65532:0755 -dir /tmp=0:0:1777
}

# operator_image BIN OUT NAME: a static manager packed as NAME into OUT: /manager, runs as
# 65532 (operator/Dockerfile).
operator_image() {
	local bin="$1" out="$2" name="$3"
	(cd "$IMAGES_ROOT" && CGO_ENABLED=0 "${GO:-go}" build -trimpath -ldflags "-s -w" -o "${bin}/manager" ./operator/cmd/manager)
	"${bin}/ociimage" -o "$out" -name "$name" -user 65532:65532 \
		-entrypoint /manager -env "$IMAGE_PATH_ENV" \
		-file "/manager=${bin}/manager" -dir /tmp=0:0:1777
}

# release_images: what `make images` builds.
release_images() {
	local registry="${NARAD_IMAGE_REGISTRY:-ghcr.io/narad-dev}"
	local tag="${NARAD_IMAGE_TAG:-$(tr -d '[:space:]' <"${IMAGES_ROOT}/VERSION")}"
	local out="${NARAD_IMAGE_OUT:-${IMAGES_ROOT}/bin/images}"
	local builder="${NARAD_IMAGE_BUILDER:-ociimage}"
	local version
	if [[ -z "$tag" || "$tag" == latest ]]; then
		echo "images.sh: the tag must be a release version, not '${tag}'" >&2
		exit 2
	fi
	version="$(git -C "$IMAGES_ROOT" describe --tags --always --dirty 2>/dev/null || echo "$tag")"
	case "$builder" in
	ociimage)
		local bin="${out}/bin"
		mkdir -p "$bin"
		image_tools "$bin"
		broker_image "$bin" "${out}/narad-${tag}.tar" "${registry}/narad:${tag}" "$version"
		operator_image "$bin" "${out}/narad-operator-${tag}.tar" "${registry}/narad-operator:${tag}"
		rm -rf "$bin"
		ls -l "${out}/narad-${tag}.tar" "${out}/narad-operator-${tag}.tar"
		;;
	docker | podman)
		"$builder" build -f "${IMAGES_ROOT}/broker/Dockerfile" --build-arg "VERSION=${version}" \
			-t "${registry}/narad:${tag}" "$IMAGES_ROOT"
		"$builder" build -f "${IMAGES_ROOT}/operator/Dockerfile" -t "${registry}/narad-operator:${tag}" "$IMAGES_ROOT"
		;;
	*)
		echo "images.sh: NARAD_IMAGE_BUILDER must be ociimage, docker or podman, not '${builder}'" >&2
		exit 2
		;;
	esac
}

# Run, not sourced: build the release images.
if [[ "${BASH_SOURCE[0]}" == "$0" ]]; then
	release_images
fi
