#!/usr/bin/env bash
# kube-up.sh: a real single-node Kubernetes cluster on this machine, from the tree, for the
# operator's real-cluster tests. Needs root and Linux; docs/internals/kube-test-cluster.md
# says what it builds and why each setting is there.
#
#   hack/kube-up.sh [up]     install containerd, runc and the CNI plugins (apt) if missing;
#                            build (once, cached) etcd and the kubernetes binaries; build the
#                            narad, operator and pause images from the tree; start etcd,
#                            kube-apiserver, kube-controller-manager, kube-scheduler,
#                            containerd and the kubelet; wait for the node to be Ready; start
#                            kube-proxy and CoreDNS (built once, cached); make the
#                            local-path StorageClass and its PersistentVolumes
#   hack/kube-up.sh down     stop everything by PID, unmount, remove the bridge (data kept)
#   hack/kube-up.sh purge    down, then delete the state directory (certs, etcd, volumes)
#   hack/kube-up.sh status   which processes run
#   hack/kube-up.sh env      print `export KUBECONFIG=...` and the kubectl directory
#
# Then:  eval "$(hack/kube-up.sh env)"; kubectl get nodes
#
# Environment: the addresses and directories of hack/kube/lib.sh (NARAD_KUBE_*), plus
#   NARAD_KUBE_PVS   6    local PersistentVolumes to make (1Gi each, directories under volumes/)
#   NARAD_KUBE_NICE  19   niceness of the kubernetes build
set -euo pipefail

# shellcheck source=hack/kube/lib.sh
source "$(dirname "$0")/kube/lib.sh"
# shellcheck source=hack/kube/certs.sh
source "${ROOT}/hack/kube/certs.sh"
# shellcheck source=hack/kube/config.sh
source "${ROOT}/hack/kube/config.sh"
# shellcheck source=hack/kube/images.sh
source "${ROOT}/hack/kube/images.sh"
# shellcheck source=hack/kube/storage.sh
source "${ROOT}/hack/kube/storage.sh"
# shellcheck source=hack/kube/proxy.sh
source "${ROOT}/hack/kube/proxy.sh"
# shellcheck source=hack/kube/dns.sh
source "${ROOT}/hack/kube/dns.sh"
# shellcheck source=hack/kube/down.sh
source "${ROOT}/hack/kube/down.sh"

T0=$SECONDS
# mark WHAT: logs and records the seconds since the start of this run.
mark() {
	klog "$1 after $((SECONDS - T0))s"
	printf '%s\t%ss\n' "$1" "$((SECONDS - T0))" >>"${STATE}/timings.tsv"
}

install_packages() {
	local need=()
	command -v containerd >/dev/null || need+=(containerd)
	command -v runc >/dev/null || need+=(runc)
	[[ -x "${CNI_BIN_DIR}/bridge" && -x "${CNI_BIN_DIR}/host-local" ]] || need+=(containernetworking-plugins)
	command -v openssl >/dev/null || need+=(openssl)
	((${#need[@]})) || return 0
	klog "installing ${need[*]} with apt-get (log: ${STATE}/logs/apt.log)"
	export DEBIAN_FRONTEND=noninteractive
	{ apt-get install -y --no-install-recommends "${need[@]}" ||
		{ apt-get update && apt-get install -y --no-install-recommends "${need[@]}"; }; } \
		>>"${STATE}/logs/apt.log" 2>&1 || kdie "apt-get install ${need[*]} failed"
}

# The pod bridge, made before the kubelet starts: its address is the node IP (the kubelet
# refuses a loopback node IP) and the API server's address, which pods reach directly.
# The Service range is routed onto the bridge too: the node's own connections to a cluster
# IP leave through it after kube-proxy's DNAT, and one to an address of the range that no
# Service holds goes nowhere instead of out of the machine's default route.
setup_bridge() {
	ip link show "$BRIDGE" >/dev/null 2>&1 || ip link add "$BRIDGE" type bridge
	ip addr replace "${NODE_IP}/${POD_CIDR#*/}" dev "$BRIDGE"
	ip link set "$BRIDGE" up
	ip route replace "$SVC_CIDR" dev "$BRIDGE" src "$NODE_IP"
}

start_control_plane() {
	start etcd "${KUBE_BIN}/etcd" --name narad-kube --data-dir "${STATE}/etcd" \
		--listen-client-urls "http://${LO}:2379" --advertise-client-urls "http://${LO}:2379" \
		--listen-peer-urls "http://${LO}:2380" --initial-advertise-peer-urls "http://${LO}:2380" \
		--initial-cluster "narad-kube=http://${LO}:2380" --log-level warn
	wait_for etcd 60 curl -fsS "http://${LO}:2379/health" || kdie "etcd did not start (logs/etcd.log)"

	# The `kubernetes` Service's endpoints are the advertise address, the node IP, which pods
	# reach through kube-proxy at ${SVC_IP}:443 (a loopback advertise address is refused).
	# --kubelet-preferred-address-types=InternalIP: the node has no resolvable host name.
	start kube-apiserver "${KUBE_BIN}/kube-apiserver" \
		--etcd-servers "http://${LO}:2379" \
		--bind-address "$NODE_IP" --secure-port 6443 --advertise-address "$NODE_IP" \
		--kubelet-preferred-address-types InternalIP \
		--service-cluster-ip-range "$SVC_CIDR" \
		--client-ca-file "${PKI}/ca.crt" \
		--tls-cert-file "${PKI}/apiserver.crt" --tls-private-key-file "${PKI}/apiserver.key" \
		--kubelet-client-certificate "${PKI}/apiserver-kubelet.crt" \
		--kubelet-client-key "${PKI}/apiserver-kubelet.key" \
		--kubelet-certificate-authority "${PKI}/ca.crt" \
		--service-account-issuer https://kubernetes.default.svc.cluster.local \
		--service-account-key-file "${PKI}/sa.pub" \
		--service-account-signing-key-file "${PKI}/sa.key" \
		--authorization-mode Node,RBAC --enable-admission-plugins NodeRestriction \
		--allow-privileged=true --profiling=false
	wait_for kube-apiserver 120 ctl get --raw /readyz || kdie "kube-apiserver not ready (logs/kube-apiserver.log)"
	mark "kube-apiserver ready"

	local kc="${STATE}/controller-manager.kubeconfig"
	start kube-controller-manager "${KUBE_BIN}/kube-controller-manager" \
		--kubeconfig "$kc" --authentication-kubeconfig "$kc" --authorization-kubeconfig "$kc" \
		--bind-address "$LO" --secure-port 10257 --leader-elect=false \
		--service-account-private-key-file "${PKI}/sa.key" --root-ca-file "${PKI}/ca.crt" \
		--use-service-account-credentials=true --cluster-name narad-kube
	kc="${STATE}/scheduler.kubeconfig"
	start kube-scheduler "${KUBE_BIN}/kube-scheduler" \
		--kubeconfig "$kc" --authentication-kubeconfig "$kc" --authorization-kubeconfig "$kc" \
		--bind-address "$LO" --secure-port 10259 --leader-elect=false
}

# ready_since TIME: the node is Ready by a heartbeat at or after TIME (RFC 3339, UTC).
ready_since() {
	local out
	out="$(ctl get node "$NODE_NAME" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status} {.status.conditions[?(@.type=="Ready")].lastHeartbeatTime}')" || return 1
	[[ "$out" == "True "* && ! "${out#True }" < "$1" ]]
}

start_node() {
	start containerd "$(command -v containerd)" --config "${STATE}/containerd/config.toml"
	wait_for containerd 60 ctr --address "$CONTAINERD_SOCK" version ||
		kdie "containerd did not start (logs/containerd.log)"
	import_images
	save_sysctls
	local since
	since="$(date -u +%Y-%m-%dT%H:%M:%SZ)"
	start kubelet "${KUBE_BIN}/kubelet" \
		--config "${STATE}/kubelet/config.yaml" --kubeconfig "${STATE}/kubelet.kubeconfig" \
		--hostname-override "$NODE_NAME" --node-ip "$NODE_IP" --root-dir "${STATE}/kubelet/root"
	wait_for "node ${NODE_NAME} registered" 120 ctl get node "$NODE_NAME" ||
		kdie "the kubelet did not register (logs/kubelet.log)"
	# After a restart the node object still says Ready from before: only a heartbeat from
	# this kubelet counts.
	wait_for "node ${NODE_NAME} Ready" 180 ready_since "$since" ||
		kdie "node ${NODE_NAME} not Ready (logs/kubelet.log, logs/containerd.log)"
	mark "node Ready"
}

up() {
	[[ "$(id -u)" == 0 ]] || kdie "needs root (containerd, the kubelet, the bridge)"
	mkdir -p "${STATE}/logs" "${STATE}/pids"
	: >"${STATE}/timings.tsv"
	install_packages
	KUBE_BIN="$(kube_bin_dir)" || kdie "building the kubernetes binaries failed"
	printf '%s\n' "$KUBE_BIN" >"${STATE}/kube-bin"
	mark "kubernetes binaries ready (${KUBE_BIN})"
	build_images
	mark "images built"
	make_certs
	setup_bridge
	write_containerd_config
	write_cni_config
	write_kubelet_config
	write_proxy_config
	write_dns_config
	start_control_plane
	start_node
	start_proxy
	mark "kube-proxy ready"
	start_dns
	mark "CoreDNS ready"
	make_storage
	recycle_volumes
	klog "up: eval \"\$(hack/kube-up.sh env)\" && kubectl get nodes"
}

status() {
	local n rc=0
	for n in etcd kube-apiserver kube-controller-manager kube-scheduler containerd kubelet \
		kube-proxy coredns; do
		if running "$n"; then
			printf '%-24s running (pid %s)\n' "$n" "$(<"$(pidfile "$n")")"
		else
			printf '%-24s stopped\n' "$n"
			rc=1
		fi
	done
	return "$rc"
}

case "${1:-up}" in
up) up ;;
down) down ;;
purge)
	down
	rm -rf "$STATE"
	klog "removed ${STATE}"
	;;
status) status ;;
env)
	[[ -s "${STATE}/kube-bin" ]] || kdie "no cluster here: run hack/kube-up.sh"
	# shellcheck disable=SC2016 # $PATH is for the shell that evals this
	printf 'export KUBECONFIG=%q\nexport PATH=%q:"$PATH"\n' "$ADMIN_KUBECONFIG" "$(<"${STATE}/kube-bin")"
	;;
*)
	sed -n '2,/^set -euo/p' "$0" | sed -e '/^set -euo/d' -e 's/^# \{0,1\}//' >&2
	exit 2
	;;
esac
