#!/usr/bin/env bash
# CI's real-cluster step (docs/internals/kube-test-cluster.md): `make e2e-kube`, then
# `make kube-down`, when this machine already has the cluster's binaries built (the kubernetes
# node binaries and CoreDNS in the envtest cache, from an earlier `make kube-up` or
# `make e2e-kube`). On a machine without them it says so and runs nothing: their first build
# takes 25 – 60 minutes on two cores, more than the test budget. The cluster needs root
# (containerd, mounts, iptables, a bridge), so a non-root run says so too.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
say() { echo "ci-kube: $*"; }
if [ "$(id -u)" -ne 0 ]; then
  say "not root: the real-cluster suite is not run here (make e2e-kube as root runs it)"
  exit 0
fi
if ! dest="$(NARAD_ENVTEST_CHECK=1 NARAD_ENVTEST_NODE=1 "$root/hack/setup-envtest.sh" 2>/dev/null)" ||
  [ ! -x "$dest/coredns" ]; then
  say "the kubernetes node binaries or CoreDNS are not built on this machine (a first build takes"
  say "25 - 60 min): the real-cluster suite is not run; make e2e-kube builds them and runs it"
  exit 0
fi
say "node binaries cached in $dest: running the real-cluster suite"
trap 'make -C "$root" kube-down' EXIT
start=$(date +%s)
make -C "$root" e2e-kube
say "real-cluster suite passed in $(( $(date +%s) - start )) s"
