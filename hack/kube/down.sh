#!/usr/bin/env bash
# down.sh: stops the test cluster by PID and leaves nothing running or mounted (sourced by
# hack/kube-up.sh; needs lib.sh). The state directory (certs, etcd, volumes) is kept, so the
# next `kube-up.sh` brings back the same cluster; `kube-up.sh purge` deletes it.
#
# Order: the scheduler and controller-manager first (nothing is recreated), then every pod is
# deleted through the API so the kubelet stops its containers and the CRI tears down its
# network (CNI DEL, network namespace); whatever is left is killed through containerd; then
# the kubelet, kube-proxy, CoreDNS, containerd, the API server and etcd. Finally the mounts
# under the state directory, the bridge, the iptables chains of kube-proxy and the kubelet
# (proxy.sh) and the kubelet's empty cgroups go, and the kernel settings the kubelet and
# proxy.sh changed are set back.

# tasks: IDs of the containers containerd still runs.
tasks() { ctr --address "$CONTAINERD_SOCK" -n k8s.io tasks ls -q 2>/dev/null; }
no_tasks() { [[ -z "$(tasks)" ]]; }

down() {
	[[ -s "${STATE}/kube-bin" ]] && KUBE_BIN="$(<"${STATE}/kube-bin")"
	stop kube-scheduler
	stop kube-controller-manager
	if [[ -n "${KUBE_BIN:-}" ]] && running kube-apiserver && running kubelet && running containerd; then
		ctl delete pods --all --all-namespaces --grace-period=0 --force --wait=false >/dev/null 2>&1 || true
		wait_for "the kubelet to stop every pod" 60 no_tasks || true
	fi
	stop kubelet
	stop kube-proxy
	stop coredns
	restore_sysctls
	proxy_cleanup
	if running containerd; then
		local id
		for id in $(tasks); do
			ctr --address "$CONTAINERD_SOCK" -n k8s.io tasks kill -s SIGKILL "$id" >/dev/null 2>&1 || true
		done
		wait_for "killed containers to exit" 20 no_tasks_running || true
		for id in $(tasks); do
			ctr --address "$CONTAINERD_SOCK" -n k8s.io tasks delete -f "$id" >/dev/null 2>&1 || true
		done
	fi
	stop containerd
	kill_shims
	# The shims' sockets and fifos and runc's state live under /run/containerd whatever the
	# config says; the directories are left empty: remove them when they are.
	rmdir /run/containerd/runc/k8s.io /run/containerd/runc /run/containerd/fifo \
		/run/containerd/s /run/containerd 2>/dev/null || true
	stop kube-apiserver
	stop etcd
	unmount_state
	ip link show "$BRIDGE" >/dev/null 2>&1 && ip link del "$BRIDGE"
	remove_cgroups
	klog "down: nothing of the cluster runs; data kept in ${STATE}"
}

no_tasks_running() {
	! ctr --address "$CONTAINERD_SOCK" -n k8s.io tasks ls 2>/dev/null | awk 'NR > 1 {print $3}' | grep -qx RUNNING
}

# kill_shims: a runc shim outlives containerd; each writes its PID to shim.pid in its bundle
# under the state directory. Only processes that are such a shim are killed.
kill_shims() {
	local f pid exe
	for f in "${STATE}"/containerd/state/io.containerd.runtime.v2.task/*/*/shim.pid; do
		[[ -f "$f" ]] || continue
		pid="$(<"$f")"
		exe="$(readlink "/proc/${pid}/exe" 2>/dev/null)" || continue
		[[ "$exe" == *containerd-shim* ]] || continue
		klog "killing leftover shim ${pid} ($(basename "$(dirname "$f")"))"
		kill -KILL "$pid" 2>/dev/null || true
	done
}

# unmount_state: every mount under the state directory (container root filesystems, the
# kubelet's secret and projected volumes, local volume bind mounts, network namespaces),
# deepest first.
unmount_state() {
	local m
	findmnt -rn -o TARGET | awk -v p="${STATE}/" 'index($0, p) == 1' | sort -r | while read -r m; do
		umount "$m" 2>/dev/null || umount -l "$m" || klog "could not unmount ${m}"
	done
}

# remove_cgroups: the kubelet's QoS and pod cgroups (empty once the pods are gone).
remove_cgroups() {
	local d
	for d in /sys/fs/cgroup/*/kubepods /sys/fs/cgroup/*/kubepods.slice /sys/fs/cgroup/kubepods; do
		[[ -d "$d" ]] || continue
		find "$d" -depth -type d -exec rmdir {} + 2>/dev/null || true
	done
}
