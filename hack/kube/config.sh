#!/usr/bin/env bash
# config.sh: the config files of containerd, the CNI bridge and the kubelet, written under
# $STATE on every start (sourced by hack/kube-up.sh; needs lib.sh). The settings this machine
# needs beyond the defaults carry a comment saying why.

write_containerd_config() {
	mkdir -p "${STATE}/containerd" "${STATE}/cni/net.d"
	cat >"${STATE}/containerd/config.toml" <<EOF
version = 2
root = "${STATE}/containerd/root"
state = "${STATE}/containerd/state"
# Snapshotters this machine has no use for; skipped so the log shows no load errors.
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper"]

[grpc]
  address = "${CONTAINERD_SOCK}"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "${PAUSE_IMAGE}"
  # root here lacks CAP_SYS_RESOURCE: runc fails to lower oom_score_adj without this.
  restrict_oom_score_adj = true
  # No hugetlb cgroup controller is mounted on these machines (cgroup v1).
  disable_hugetlb_controller = true
  # The streaming server (exec, logs -f) on loopback, not on every interface.
  stream_server_address = "${LO}"
  stream_server_port = "0"
  # Network namespaces under the state dir, so kube-down finds every mount.
  netns_mounts_under_state_dir = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "${CNI_BIN_DIR}"
    conf_dir = "${STATE}/cni/net.d"
EOF
}

# The pod network: the bridge plugin attaches each pod to $BRIDGE (made by kube-up.sh before
# the kubelet starts, with the node IP on it) and host-local hands out $POD_CIDR. isGateway
# is off and there is no masquerading: pods reach the node and each other, nothing else (no
# forwarding is turned on); the route to the Service range goes through the node.
write_cni_config() {
	mkdir -p "${STATE}/cni/net.d" "${STATE}/cni/ipam"
	cat >"${STATE}/cni/net.d/10-narad.conflist" <<EOF
{
  "cniVersion": "1.0.0",
  "name": "narad-kube",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "${BRIDGE}",
      "isGateway": false,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "dataDir": "${STATE}/cni/ipam",
        "ranges": [[{"subnet": "${POD_CIDR}", "gateway": "${NODE_IP}"}]],
        "routes": [{"dst": "${SVC_CIDR}", "gw": "${NODE_IP}"}]
      }
    }
  ]
}
EOF
}

write_kubelet_config() {
	mkdir -p "${STATE}/kubelet" "${STATE}/logs/pods"
	cat >"${STATE}/kubelet/config.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
# These machines mount cgroup v1, which the kubelet refuses by default; no systemd either.
failCgroupV1: false
cgroupDriver: cgroupfs
containerRuntimeEndpoint: unix://${CONTAINERD_SOCK}
address: ${NODE_IP}
port: 10250
readOnlyPort: 0
healthzBindAddress: ${LO}
healthzPort: 10248
tlsCertFile: ${PKI}/kubelet-serving.crt
tlsPrivateKeyFile: ${PKI}/kubelet-serving.key
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: ${PKI}/ca.crt}
authorization:
  mode: Webhook
clusterDomain: cluster.local
# CoreDNS on the node IP (dns.sh); pods get it and the cluster search path only, never the
# host's resolvers: nothing in a pod looks up outside names.
clusterDNS: [${NODE_IP}]
resolvConf: ""
podLogsDir: ${STATE}/logs/pods
# The shared disk often has less than 15 % free; the default thresholds (imagefs 15 %,
# nodefs 10 %) would put the node under DiskPressure and evict the brokers.
evictionHard:
  memory.available: 100Mi
  nodefs.available: 1%
  nodefs.inodesFree: 1%
  imagefs.available: 1%
imageGCHighThresholdPercent: 99
imageGCLowThresholdPercent: 98
serializeImagePulls: false
EOF
}
