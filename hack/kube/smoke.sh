#!/usr/bin/env bash
# smoke.sh: proof that the cluster of hack/kube-up.sh runs Narad for real. In namespace
# narad-smoke it runs a 2-replica StatefulSet of the narad image built from the tree (one
# single-node broker per pod, --dev) on local PersistentVolumes, waits for both pods to be
# Running and Ready, writes a topic and a message to broker 0, deletes pod 0, and checks the
# pod comes back on the same claim with the message still there. Prints the timings.
#
#   hack/kube/smoke.sh          (make kube-smoke)   NARAD_KUBE_SMOKE_KEEP=1 keeps the namespace
set -euo pipefail
# shellcheck source=hack/kube/lib.sh
source "$(dirname "$0")/lib.sh"
# shellcheck source=hack/kube/storage.sh
source "${ROOT}/hack/kube/storage.sh"
load_kube_bin

NS=narad-smoke
STS=narad-smoke

# ready_pod NAME: NAME's pod uid if it is Ready, else fails.
ready_pod() {
	local out
	out="$(ctl -n "$NS" get pod "$1" -o jsonpath='{.metadata.uid} {.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null)" || return 1
	[[ "$out" == *" True" ]] || return 1
	printf '%s\n' "${out% *}"
}

# back_ready NAME OLDUID: NAME is Ready again as a new pod.
back_ready() {
	local uid
	uid="$(ready_pod "$1")" || return 1
	[[ "$uid" != "$2" ]]
}

pod_ip() { ctl -n "$NS" get pod "$1" -o jsonpath='{.status.podIP}'; }

cleanup() {
	if [[ "${NARAD_KUBE_SMOKE_KEEP:-0}" != 1 ]]; then
		ctl delete namespace "$NS" --wait=true --timeout=120s >/dev/null 2>&1 || true
		recycle_volumes
	fi
}

ctl delete namespace "$NS" --ignore-not-found --wait=true --timeout=120s >/dev/null
recycle_volumes
ctl create namespace "$NS" >/dev/null
trap cleanup EXIT

t0=$SECONDS
ctl -n "$NS" apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Service
metadata:
  name: ${STS}
spec:
  clusterIP: None
  selector: {app: ${STS}}
  ports: [{name: http, port: 7942}]
---
apiVersion: apps/v1
kind: StatefulSet
metadata:
  name: ${STS}
spec:
  serviceName: ${STS}
  replicas: 2
  selector:
    matchLabels: {app: ${STS}}
  template:
    metadata:
      labels: {app: ${STS}}
    spec:
      terminationGracePeriodSeconds: 10
      securityContext:
        runAsNonRoot: true
        runAsUser: 65532
        runAsGroup: 65532
        fsGroup: 65532
        fsGroupChangePolicy: OnRootMismatch
        seccompProfile: {type: RuntimeDefault}
      containers:
      - name: narad
        image: ${NARAD_IMAGE}
        imagePullPolicy: Never
        command: [narad, serve, --dev, --http-addr, "0.0.0.0:7942", --cluster-addr, "127.0.0.1:7943",
                  --data-dir, /var/lib/narad]
        env:
        - name: NARAD_NODE_ID
          valueFrom: {fieldRef: {fieldPath: metadata.name}}
        ports: [{name: http, containerPort: 7942}]
        readinessProbe:
          httpGet: {path: /readyz, port: http}
          periodSeconds: 1
        volumeMounts: [{name: data, mountPath: /var/lib/narad}]
  volumeClaimTemplates:
  - metadata: {name: data}
    spec:
      accessModes: [ReadWriteOnce]
      storageClassName: local-path
      resources: {requests: {storage: 1Gi}}
EOF
ctl -n "$NS" rollout status "statefulset/${STS}" --timeout=180s >/dev/null ||
	kdie "StatefulSet ${STS} did not become ready: kubectl -n ${NS} describe pods"
running_s=$((SECONDS - t0))
klog "2-replica StatefulSet Running and Ready in ${running_s}s"

ip="$(pod_ip "${STS}-0")"
pv="$(ctl -n "$NS" get pvc "data-${STS}-0" -o jsonpath='{.spec.volumeName}')"
curl -sS --fail-with-body -X POST "http://${ip}:7942/v1/topics" -d '{"name":"smoke","partitions":3}' >/dev/null
curl -sS --fail-with-body -X POST "http://${ip}:7942/v1/topics/smoke/produce?partition=0" -d 'survives-the-pod' >/dev/null
uid="$(ready_pod "${STS}-0")"

t1=$SECONDS
ctl -n "$NS" delete pod "${STS}-0" --wait=false >/dev/null
wait_for "pod ${STS}-0 back and Ready" 120 back_ready "${STS}-0" "$uid" ||
	kdie "pod ${STS}-0 did not come back"
back_s=$((SECONDS - t1))
klog "deleted pod ${STS}-0 back and Ready in ${back_s}s"

pv2="$(ctl -n "$NS" get pvc "data-${STS}-0" -o jsonpath='{.spec.volumeName}')"
[[ "$pv2" == "$pv" ]] || kdie "claim data-${STS}-0 moved from ${pv} to ${pv2}"
ip="$(pod_ip "${STS}-0")"
body="$(curl -sS --fail-with-body "http://${ip}:7942/v1/topics/smoke/consume?partition=0&offset=0")"
[[ "$body" == *survives-the-pod* ]] || kdie "the message written before the delete is gone: ${body}"
klog "pod ${STS}-0 is back on claim data-${STS}-0 (${pv}) with its data"
printf 'statefulset_ready_s=%s pod_back_ready_s=%s\n' "$running_s" "$back_s"
