#!/usr/bin/env bash
# lib.sh: settings and process helpers shared by hack/kube-up.sh, hack/kube-down.sh and the
# steps under hack/kube/. Sourced, never run. See docs/internals/kube-test-cluster.md.
#
# Addresses (everything listens on loopback or on the bridge the scripts create):
#   NARAD_KUBE_NET        10.213  pods get $NET.0.0/24 on bridge $BRIDGE, whose address $NET.0.1
#                                 is the node IP (kube-apiserver on :6443, kubelet on :10250);
#                                 Services get $NET.1.0/24
#   NARAD_KUBE_LOOPBACK   127.0.213.1  etcd (:2379, :2380), controller-manager (:10257),
#                                 scheduler (:10259), kubelet healthz (:10248)
#   NARAD_KUBE_BRIDGE     narad0
#   NARAD_KUBE_DIR        ./.narad/kube  the state directory: pids/, logs/, pki/, etcd/,
#                                 containerd/, kubelet/, cni/, images/, volumes/
#   NARAD_KUBE_NODE       narad-node  the node name

# The settings are used by the scripts that source this file.
# shellcheck disable=SC2034

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
STATE="$(realpath -m "${NARAD_KUBE_DIR:-${ROOT}/.narad/kube}")"
NET="${NARAD_KUBE_NET:-10.213}"
BRIDGE="${NARAD_KUBE_BRIDGE:-narad0}"
LO="${NARAD_KUBE_LOOPBACK:-127.0.213.1}"
NODE_NAME="${NARAD_KUBE_NODE:-narad-node}"
NODE_IP="${NET}.0.1"
POD_CIDR="${NET}.0.0/24"
SVC_CIDR="${NET}.1.0/24"
SVC_IP="${NET}.1.1" # the `kubernetes` Service: the first address of SVC_CIDR
APISERVER="https://${NODE_IP}:6443"
PKI="${STATE}/pki"
ADMIN_KUBECONFIG="${STATE}/admin.kubeconfig"
CONTAINERD_SOCK="${STATE}/containerd/containerd.sock"

# Images built from the tree (hack/kube/images.sh); the tag is not `latest`, so the kubelet's
# default pull policy is IfNotPresent and nothing is ever pulled.
IMAGE_TAG="${NARAD_KUBE_IMAGE_TAG:-dev}"
NARAD_IMAGE="narad.local/narad:${IMAGE_TAG}"
OPERATOR_IMAGE="narad.local/narad-operator:${IMAGE_TAG}"
PAUSE_IMAGE="narad.local/pause:${IMAGE_TAG}"

# The Debian packages' binaries.
CNI_BIN_DIR=/usr/lib/cni

klog() { printf 'kube: %s\n' "$*" >&2; }
kdie() {
	klog "error: $*"
	exit 1
}

# load_kube_bin: KUBE_BIN from the last `kube-up.sh` (the directory of kubectl and the rest).
load_kube_bin() {
	[[ -s "${STATE}/kube-bin" ]] || kdie "no cluster in ${STATE}: run hack/kube-up.sh"
	KUBE_BIN="$(<"${STATE}/kube-bin")"
}

# ctl ARGS...: kubectl as the cluster admin.
ctl() { "${KUBE_BIN}/kubectl" --kubeconfig "$ADMIN_KUBECONFIG" "$@"; }

# kube_bin_dir: the directory of the kubernetes binaries, built once into the envtest cache
# by hack/setup-envtest.sh (with the node binaries), niced so a cold build (~30 min) yields to
# everything else on the machine.
kube_bin_dir() {
	NARAD_ENVTEST_NODE=1 nice -n "${NARAD_KUBE_NICE:-19}" "${ROOT}/hack/setup-envtest.sh"
}

# pidfile NAME
pidfile() { printf '%s/pids/%s.pid\n' "$STATE" "$1"; }

# running NAME: the process of NAME's PID file is alive and still runs the binary it started
# (guards against a reused PID).
running() {
	local f pid exe
	f="$(pidfile "$1")"
	[[ -f "$f" ]] || return 1
	pid="$(<"$f")"
	[[ "$pid" =~ ^[0-9]+$ ]] || return 1
	exe="$(readlink "/proc/${pid}/exe" 2>/dev/null)" || return 1
	[[ "$exe" == "$(<"${f%.pid}.exe")" ]]
}

# start NAME BINARY ARGS...: runs BINARY in its own session in the background, output to
# logs/NAME.log, PID to pids/NAME.pid. A NAME already running is left alone.
start() {
	local name="$1"
	shift
	if running "$name"; then
		klog "${name} already running (pid $(<"$(pidfile "$name")"))"
		return 0
	fi
	mkdir -p "${STATE}/pids" "${STATE}/logs"
	setsid "$@" >>"${STATE}/logs/${name}.log" 2>&1 </dev/null &
	local pid=$!
	printf '%s\n' "$pid" >"$(pidfile "$name")"
	readlink -f "$1" >"${STATE}/pids/${name}.exe"
	klog "started ${name} (pid ${pid}, log ${STATE}/logs/${name}.log)"
}

# stop NAME [GRACE]: SIGTERM, then SIGKILL after GRACE seconds (default 15); removes the PID file.
stop() {
	local name="$1" grace="${2:-15}" f pid i
	f="$(pidfile "$name")"
	if running "$name"; then
		pid="$(<"$f")"
		kill -TERM "$pid" 2>/dev/null || true
		for ((i = 0; i < grace * 10; i++)); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.1
		done
		if kill -0 "$pid" 2>/dev/null; then
			klog "${name} (pid ${pid}) ignored SIGTERM for ${grace}s: SIGKILL"
			kill -KILL "$pid" 2>/dev/null || true
		fi
		klog "stopped ${name} (pid ${pid})"
	fi
	rm -f "$f" "${f%.pid}.exe"
}

# wait_for WHAT SECONDS CMD...: runs CMD every 0.5 s until it succeeds; fails after SECONDS.
wait_for() {
	local what="$1" secs="$2" i
	shift 2
	for ((i = 0; i < secs * 2; i++)); do
		if "$@" >/dev/null 2>&1; then return 0; fi
		sleep 0.5
	done
	klog "timed out after ${secs}s waiting for ${what}"
	return 1
}

# The kernel settings the kubelet changes at start (protectKernelDefaults off: it sets them
# rather than refuse to run); saved before the first start, restored by kube-down.
KUBELET_SYSCTLS=(vm/overcommit_memory vm/panic_on_oom kernel/panic kernel/panic_on_oops
	kernel/keys/root_maxkeys kernel/keys/root_maxbytes)
# The ones hack/kube/proxy.sh turns on for Service traffic, saved and restored with them.
PROXY_SYSCTLS=(net/ipv4/ip_forward net/bridge/bridge-nf-call-iptables)

save_sysctls() {
	local f="${STATE}/sysctls.saved" k
	[[ -s "$f" ]] && return 0
	for k in "${KUBELET_SYSCTLS[@]}" "${PROXY_SYSCTLS[@]}"; do
		[[ -r "/proc/sys/${k}" ]] && printf '%s %s\n' "$k" "$(<"/proc/sys/${k}")"
	done >"$f"
}

restore_sysctls() {
	local f="${STATE}/sysctls.saved" k v
	[[ -s "$f" ]] || return 0
	while read -r k v; do
		printf '%s\n' "$v" >"/proc/sys/${k}" 2>/dev/null || klog "could not restore ${k}"
	done <"$f"
	rm -f "$f"
}
