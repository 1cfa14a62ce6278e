#!/usr/bin/env bash
# dns.sh: the test cluster's DNS, CoreDNS with its kubernetes plugin, run as a host process on
# the node IP (sourced by hack/kube-up.sh; needs lib.sh). The kubelet's clusterDNS points at
# it (config.sh), so pods resolve Services (`svc.ns.svc.cluster.local`) and the per-pod names
# of a headless Service (`narad-0.narad-headless.ns.svc.cluster.local`), which is how the
# brokers of a NaradCluster find each other.
#
# CoreDNS is built once from its Go module at COREDNS_VERSION, like the kubernetes binaries:
# a throwaway module whose main imports coremain and only the plugins the Corefile below uses
# (upstream's main imports all ~60, with the cloud SDKs), cached next to the kubernetes
# binaries as `coredns`. The module raises client-go and its siblings to the cluster's
# version (a patch or so above CoreDNS's), so the build reuses what the kubernetes build
# compiled. It answers only for cluster.local and the reverse zones and forwards
# nothing (there is no network to forward to): any other name gets REFUSED at once.

COREDNS_VERSION="${NARAD_COREDNS_VERSION:-v1.15.0}"
DNS_READY="${LO}:8181"

# The plugins the Corefile uses (CoreDNS chains them in the order of its own plugin table).
COREDNS_PLUGINS=(bind ready errors log loadbalance cache kubernetes)

# coredns_bin: prints the cached coredns binary, building it first when missing or of another
# version (a few minutes the first time: client-go and the DNS server packages).
coredns_bin() {
	local bin="${KUBE_BIN}/coredns" out
	out="$("$bin" -version 2>/dev/null)" || out=""
	if [[ "$out" != *"CoreDNS-${COREDNS_VERSION#v}"* ]]; then
		build_coredns "$bin" || return 1
	fi
	printf '%s\n' "$bin"
}

# build_coredns DEST: builds CoreDNS COREDNS_VERSION into DEST (through a temp file renamed
# into place, so an interrupted build leaves nothing half-written).
build_coredns() {
	local dest="$1" mod p rc=0 start=$SECONDS k8s
	# KUBE_BIN is .../<k8s version>-<etcd version>; k8s.io/kubernetes v1.X.Y's libraries are v0.X.Y.
	k8s="$(basename "$KUBE_BIN")"
	k8s="v0.${k8s#v1.}"
	k8s="${k8s%%-*}"
	mod="$(mktemp -d "${TMPDIR:-/tmp}/narad-coredns.XXXXXX")"
	{
		printf 'module narad.dev/kube-coredns\n\ngo %s\n\nrequire (\n' \
			"$(go env GOVERSION | sed -E 's/^go([0-9]+\.[0-9]+).*/\1/')"
		printf '\tgithub.com/coredns/coredns %s\n' "$COREDNS_VERSION"
		for p in api apimachinery client-go; do printf '\tk8s.io/%s %s\n' "$p" "$k8s"; done
		printf ')\n'
	} >"${mod}/go.mod"
	{
		printf '// Command coredns is CoreDNS %s with the plugins of hack/kube/dns.sh only.\n' "$COREDNS_VERSION"
		printf 'package main\n\nimport (\n'
		for p in "${COREDNS_PLUGINS[@]}"; do printf '\t_ "github.com/coredns/coredns/plugin/%s"\n' "$p"; done
		printf '\n\t"github.com/coredns/coredns/coremain"\n)\n\nfunc main() { coremain.Run() }\n'
	} >"${mod}/main.go"
	klog "building CoreDNS ${COREDNS_VERSION} (plugins: ${COREDNS_PLUGINS[*]}; log: ${STATE}/logs/coredns-build.log)"
	(cd "$mod" && GOFLAGS="${GOFLAGS:+$GOFLAGS }-mod=mod" GOWORK=off GOTOOLCHAIN=local \
		nice -n "${NARAD_KUBE_NICE:-19}" go build -trimpath -ldflags '-s -w' -o "${dest}.tmp" .) \
		>>"${STATE}/logs/coredns-build.log" 2>&1 || rc=$?
	rm -rf "$mod"
	if ((rc != 0)); then
		rm -f "${dest}.tmp"
		klog "building CoreDNS ${COREDNS_VERSION} failed (logs/coredns-build.log)"
		return 1
	fi
	mv -f "${dest}.tmp" "$dest"
	klog "built CoreDNS ${COREDNS_VERSION} in $((SECONDS - start))s"
}

# write_dns_config: the Corefile, and the RBAC CoreDNS's identity (the client certificate
# `coredns` of certs.sh, user system:narad-coredns) needs to watch Services and EndpointSlices.
write_dns_config() {
	mkdir -p "${STATE}/coredns"
	cat >"${STATE}/coredns/Corefile" <<EOF
cluster.local:53 in-addr.arpa:53 ip6.arpa:53 {
    bind ${NODE_IP}
    ready ${DNS_READY}
    errors
    kubernetes cluster.local in-addr.arpa ip6.arpa {
        kubeconfig ${STATE}/coredns.kubeconfig narad-kube
    }
    cache 30
    loadbalance
}
EOF
}

dns_rbac() {
	ctl apply -f - >/dev/null <<EOF
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: narad:coredns
rules:
- apiGroups: [""]
  resources: [services, namespaces, pods]
  verbs: [list, watch]
- apiGroups: [discovery.k8s.io]
  resources: [endpointslices]
  verbs: [list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: narad:coredns
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: narad:coredns}
subjects:
- {apiGroup: rbac.authorization.k8s.io, kind: User, name: system:narad-coredns}
EOF
}

# start_dns: RBAC, then CoreDNS; waits until its kubernetes plugin has synced with the API.
start_dns() {
	local bin
	bin="$(coredns_bin)" || kdie "no CoreDNS binary"
	dns_rbac || kdie "could not apply the CoreDNS RBAC"
	start coredns "$bin" -conf "${STATE}/coredns/Corefile"
	wait_for "CoreDNS ready" 60 curl -fsS "http://${DNS_READY}/ready" ||
		kdie "CoreDNS not ready (logs/coredns.log)"
}
