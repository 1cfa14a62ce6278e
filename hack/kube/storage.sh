#!/usr/bin/env bash
# storage.sh: local PersistentVolumes for the test cluster (sourced by hack/kube-up.sh and
# hack/kube/smoke.sh; needs lib.sh). There is no provisioner: kube-up.sh makes a fixed set of
# volumes on directories under $STATE/volumes, and recycle_volumes makes released ones
# available again.

# Local storage: a StorageClass without a provisioner (the default class) and
# $NARAD_KUBE_PVS PersistentVolumes on directories under volumes/, bound when a pod using the
# claim is scheduled (WaitForFirstConsumer), kept when released (Retain).
make_storage() {
	local n="${NARAD_KUBE_PVS:-6}" i dir
	{
		cat <<EOF
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: local-path
  annotations: {storageclass.kubernetes.io/is-default-class: "true"}
provisioner: kubernetes.io/no-provisioner
volumeBindingMode: WaitForFirstConsumer
reclaimPolicy: Retain
EOF
		for ((i = 0; i < n; i++)); do
			dir="${STATE}/volumes/pv-${i}"
			mkdir -p "$dir"
			cat <<EOF
---
apiVersion: v1
kind: PersistentVolume
metadata:
  name: local-pv-${i}
spec:
  capacity: {storage: 1Gi}
  accessModes: [ReadWriteOnce]
  persistentVolumeReclaimPolicy: Retain
  storageClassName: local-path
  local: {path: ${dir}}
  nodeAffinity:
    required:
      nodeSelectorTerms:
      - matchExpressions:
        - {key: kubernetes.io/hostname, operator: In, values: [${NODE_NAME}]}
EOF
		done
	} | ctl apply -f - >/dev/null
	klog "storage: StorageClass local-path (default), ${n} PersistentVolumes under ${STATE}/volumes"
}

# recycle_volumes: every Released volume (its claim was deleted) is emptied and made
# Available again, which is what a provisioner's delete-and-recreate would give.
recycle_volumes() {
	local pv dir
	for pv in $(ctl get pv -o jsonpath='{range .items[?(@.status.phase=="Released")]}{.metadata.name}{"\n"}{end}'); do
		dir="$(ctl get pv "$pv" -o jsonpath='{.spec.local.path}')"
		[[ "$dir" == "${STATE}/volumes/"* ]] || continue
		find "$dir" -mindepth 1 -delete
		ctl patch pv "$pv" --type json -p '[{"op":"remove","path":"/spec/claimRef"}]' >/dev/null
		klog "recycled ${pv}"
	done
}
