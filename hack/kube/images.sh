#!/usr/bin/env bash
# images.sh: the test cluster's images, built from the tree without a registry or a container
# builder (sourced by hack/kube-up.sh; needs lib.sh).
#
#   narad.local/narad:TAG           /usr/local/bin/narad (static), /var/lib/narad owned by 65532;
#                                   runs as 65532, `narad serve` (as broker/Dockerfile)
#   narad.local/narad-operator:TAG  /manager (static), runs as 65532 (as operator/Dockerfile)
#   narad.local/pause:TAG           /pause (hack/kube/pause), containerd's sandbox image
#
# Each is a static Go binary packed by hack/kube/ociimage into an OCI image layout tar under
# $STATE/images (the broker and operator images by hack/images.sh, which `make images` runs
# too), then imported into containerd's k8s.io namespace with ctr.
# NARAD_KUBE_OPERATOR_IMAGE=0 skips the operator image (nothing needs it before the Helm step).

# shellcheck source=hack/images.sh
source "${ROOT}/hack/images.sh"

build_images() {
	local out="${STATE}/images" bin="${STATE}/images/bin" version
	mkdir -p "$bin"
	version="$(git -C "$ROOT" describe --tags --always --dirty 2>/dev/null || echo dev)"
	klog "building static narad, pause and manager binaries"
	(cd "$ROOT" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "${bin}/pause" ./hack/kube/pause/main.go)
	image_tools "$bin"
	broker_image "$bin" "${out}/narad.tar" "$NARAD_IMAGE" "$version"
	"${bin}/ociimage" -o "${out}/pause.tar" -name "$PAUSE_IMAGE" -user 65535:65535 \
		-entrypoint /pause -file "/pause=${bin}/pause"
	if [[ "${NARAD_KUBE_OPERATOR_IMAGE:-1}" == 1 ]]; then
		# The slowest of the three the first time (static: no build cache shared with make operator).
		operator_image "$bin" "${out}/narad-operator.tar" "$OPERATOR_IMAGE"
	fi
}

# import_images: loads the three layouts into containerd (and unpacks them for the overlayfs
# snapshotter the CRI plugin uses).
import_images() {
	local t
	for t in pause narad narad-operator; do
		[[ -f "${STATE}/images/${t}.tar" ]] || continue
		ctr --address "$CONTAINERD_SOCK" -n k8s.io images import \
			"${STATE}/images/${t}.tar" >/dev/null || kdie "ctr import of ${t}.tar failed"
	done
	klog "images: $(ctr --address "$CONTAINERD_SOCK" -n k8s.io images ls -q | grep -c '^narad\.local/') narad.local images in containerd"
}
