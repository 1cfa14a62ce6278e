#!/usr/bin/env bash
# proxy.sh: kube-proxy for the test cluster, so pods and the node reach Service cluster IPs
# (sourced by hack/kube-up.sh and hack/kube/down.sh; needs lib.sh).
#
# Mode iptables: the kernel has nf_tables and Debian's `iptables` is iptables-nft, which
# kube-proxy drives like the legacy one; the nftables mode would need the `nft` tool, which
# these machines lack. kube-proxy runs as system:kube-proxy (bound to system:node-proxier by
# the API server's bootstrap policy), with its client certificate from certs.sh.
#
# A pod's packet to a cluster IP goes to the node (the pod route of config.sh), is DNATed to
# a pod on the bridge and forwarded back onto it: that needs IP forwarding, and the reply,
# which is bridged between two pods, must pass conntrack to be un-NATed, which needs
# bridge-nf-call-iptables. Both are set before kube-proxy starts and restored by kube-down
# (PROXY_SYSCTLS in lib.sh, saved with the kubelet's). Pods have no default route, so
# forwarding gives them nothing beyond the bridge and the Service range.

# write_proxy_config: kube-proxy watches its configuration file and exits when it is written
# to, even with the same content: a kube-up on a running cluster once ended it that way, in a
# race with start_proxy's "already running". The file is written only when its content
# changes, and a running kube-proxy is stopped first, so start_proxy starts it on the new one.
write_proxy_config() {
	local f="${STATE}/kube-proxy/config.yaml" want
	mkdir -p "${STATE}/kube-proxy"
	want="$(proxy_config)"
	[[ -f "$f" && "$(<"$f")" == "$want" ]] && return 0
	stop kube-proxy
	printf '%s\n' "$want" >"$f"
}

proxy_config() {
	cat <<EOF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: iptables
clientConnection:
  kubeconfig: ${STATE}/kube-proxy.kubeconfig
hostnameOverride: ${NODE_NAME}
bindAddress: ${NODE_IP}
healthzBindAddress: ${LO}:10256
metricsBindAddress: ${LO}:10249
clusterCIDR: ${POD_CIDR}
detectLocalMode: ClusterCIDR
# NodePorts on the node IP only, never on the machine's other interfaces; none on loopback
# (that would need route_localnet, a machine-wide setting).
nodePortAddresses: ["${NODE_IP}/32"]
iptables:
  localhostNodePorts: false
  masqueradeAll: false
  syncPeriod: 30s
  minSyncPeriod: 0s
# 0 leaves the machine's conntrack table size and timeouts alone (they are the machine's).
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
# root here lacks CAP_SYS_RESOURCE: kube-proxy cannot lower its oom_score_adj (-999 by default).
oomScoreAdj: 0
EOF
}

# start_proxy: the two kernel settings of the header, then kube-proxy; waits until it has
# written the rules of the `kubernetes` Service.
start_proxy() {
	local k
	for k in "${PROXY_SYSCTLS[@]}"; do
		[[ -w "/proc/sys/${k}" ]] || kdie "/proc/sys/${k} is not writable: Service traffic needs it"
		printf '1\n' >"/proc/sys/${k}"
	done
	start kube-proxy "${KUBE_BIN}/kube-proxy" --config "${STATE}/kube-proxy/config.yaml"
	wait_for "kube-proxy healthz" 60 curl -fsS "http://${LO}:10256/healthz" ||
		kdie "kube-proxy not healthy (logs/kube-proxy.log)"
	wait_for "the kubernetes Service's rules" 60 kubernetes_service_rules ||
		kdie "kube-proxy wrote no rules for ${SVC_IP} (logs/kube-proxy.log)"
}

kubernetes_service_rules() { iptables-save -t nat | grep -q -- "-d ${SVC_IP}/32 .*--dport 443"; }

# proxy_cleanup: removes every chain and rule kube-proxy made (its own --cleanup), then the
# kubelet's (KUBE-FIREWALL and its canaries, which the kubelet never removes), in iptables and
# ip6tables. Only chains of those exact names are touched.
proxy_cleanup() {
	if [[ -n "${KUBE_BIN:-}" && -x "${KUBE_BIN}/kube-proxy" ]]; then
		"${KUBE_BIN}/kube-proxy" --cleanup >>"${STATE}/logs/kube-proxy.log" 2>&1 || true
	fi
	local ipt table chain
	for ipt in iptables ip6tables; do
		command -v "$ipt" >/dev/null || continue
		for table in filter nat mangle; do
			for chain in INPUT OUTPUT; do
				while "$ipt" -t "$table" -D "$chain" -j KUBE-FIREWALL 2>/dev/null; do :; done
			done
			for chain in KUBE-FIREWALL KUBE-KUBELET-CANARY KUBE-IPTABLES-HINT; do
				{ "$ipt" -t "$table" -F "$chain" && "$ipt" -t "$table" -X "$chain"; } 2>/dev/null || true
			done
		done
	done
	return 0
}
