#!/usr/bin/env bash
# e2e-smoke.sh: the operator on the cluster of hack/kube-up.sh, end to end (make
# kube-e2e-smoke). It installs charts/narad-operator with the Helm SDK (test/kube/cmd/kube-chart)
# and the operator image built from the tree, creates in namespace narad-e2e a NaradCluster of
# 3 brokers on the local volumes and waits for it to be Ready (the brokers find each other by
# their headless-Service names through CoreDNS), applies a Topic with kubectl and waits for it,
# produces one message from a pod through the client Service's DNS name and one from the node
# through its cluster IP (both through kube-proxy), and consumes both through the cluster IP.
# Prints the timings. See docs/internals/kube-test-cluster.md §6.
#
#   hack/kube/e2e-smoke.sh     NARAD_KUBE_E2E_KEEP=1 keeps the namespace (the operator stays
#                              installed either way; the next run upgrades it)
set -euo pipefail
# shellcheck source=hack/kube/lib.sh
source "$(dirname "$0")/lib.sh"
# shellcheck source=hack/kube/storage.sh
source "${ROOT}/hack/kube/storage.sh"
load_kube_bin

NS=narad-e2e
OPERATOR_NS=narad-system
TOPIC=orders

cleanup() {
	if [[ "${NARAD_KUBE_E2E_KEEP:-0}" != 1 ]]; then
		# The NaradCluster's finalizer needs the operator, which stays installed.
		ctl delete namespace "$NS" --wait=true --timeout=180s >/dev/null 2>&1 || true
		recycle_volumes
	fi
}

# admin_curl ARGS...: curl as the broker user admin; the password goes to curl on stdin (a
# config line), never on its command line.
admin_curl() {
	printf 'user = "admin:%s"\n' "$PASS" | curl -sS --fail-with-body --max-time 30 -K - "$@"
}

# consumed_all: consumes (and acks) what the Service gives within a second, appending the
# payloads to $GOT; succeeds once both messages were seen.
consumed_all() {
	local body h
	body="$(admin_curl "http://${CIP}:7942/v1/topics/${TOPIC}/consume?wait=1s&max_messages=100")" || return 1
	GOT+="${body}"$'\n'
	for h in $(printf '%s' "$body" | grep -o '"receipt_handle":"[^"]*"' | cut -d'"' -f4); do
		admin_curl -X POST "http://${CIP}:7942/v1/topics/${TOPIC}/ack?receipt_handle=${h}" >/dev/null || return 1
	done
	[[ "$GOT" == *from-a-pod* && "$GOT" == *from-the-node* ]]
}

t0=$SECONDS
ctl delete namespace "$NS" --ignore-not-found --wait=true --timeout=180s >/dev/null
recycle_volumes

klog "installing charts/narad-operator (Helm SDK) with ${OPERATOR_IMAGE}"
(cd "${ROOT}/test" && nice -n 10 go run ./kube/cmd/kube-chart -kubeconfig "$ADMIN_KUBECONFIG" \
	-chart "${ROOT}/charts/narad-operator" -namespace "$OPERATOR_NS" -release narad-operator \
	-set "image.repository=${OPERATOR_IMAGE%:*},image.tag=${IMAGE_TAG},image.pullPolicy=Never" \
	-set "brokerImage=${NARAD_IMAGE}" -timeout 5m) || kdie "helm install of the operator failed"
operator_s=$((SECONDS - t0))
klog "operator installed and available in ${operator_s}s"

ctl create namespace "$NS" >/dev/null
trap cleanup EXIT
t1=$SECONDS
ctl -n "$NS" apply -f - >/dev/null <<EOF
apiVersion: narad.dev/v1alpha1
kind: NaradCluster
metadata:
  name: narad
spec:
  replicas: 3
  initialClusterSize: 3
  image: ${NARAD_IMAGE}
  imagePullPolicy: Never
  storage:
    size: 1Gi
    storageClassName: local-path
    pvcRetentionOnScaleDown: Delete
  # Small requests: three brokers and the operator share the node's 2 cores.
  resources:
    requests: {cpu: 50m, memory: 64Mi}
    limits: {memory: 512Mi}
  service:
    type: ClusterIP
EOF
ctl -n "$NS" wait naradcluster/narad --for=condition=Ready --timeout=600s >/dev/null ||
	kdie "NaradCluster narad not Ready: kubectl -n ${NS} describe nc narad; kubectl -n ${NS} get pods"
cluster_s=$((SECONDS - t1))
klog "NaradCluster of 3 brokers Ready in ${cluster_s}s"

t2=$SECONDS
ctl -n "$NS" apply -f - >/dev/null <<EOF
apiVersion: narad.dev/v1alpha1
kind: Topic
metadata:
  name: ${TOPIC}
spec:
  clusterRef: {name: narad}
  partitions: 3
EOF
ctl -n "$NS" wait "topic.narad.dev/${TOPIC}" --for=condition=Ready --timeout=180s >/dev/null ||
	kdie "Topic ${TOPIC} not Ready: kubectl -n ${NS} describe ntopic ${TOPIC}"
topic_s=$((SECONDS - t2))
klog "Topic ${TOPIC} Ready in ${topic_s}s"

# From a pod: the client Service by its DNS name; the password from the Secret, as env.
ctl -n "$NS" apply -f - >/dev/null <<EOF
apiVersion: batch/v1
kind: Job
metadata:
  name: produce
spec:
  backoffLimit: 3
  template:
    spec:
      restartPolicy: Never
      securityContext:
        runAsNonRoot: true
        runAsUser: 65532
        seccompProfile: {type: RuntimeDefault}
      containers:
      - name: pub
        image: ${NARAD_IMAGE}
        imagePullPolicy: Never
        command: [narad, pub, ${TOPIC}, from-a-pod]
        env:
        - {name: NARAD_ADDR, value: "http://narad.${NS}.svc:7942"}
        - {name: NARAD_USER, value: admin}
        - name: NARAD_PASS
          valueFrom: {secretKeyRef: {name: narad-security, key: admin-password}}
EOF
ctl -n "$NS" wait job/produce --for=condition=Complete --timeout=120s >/dev/null ||
	kdie "the produce Job failed: kubectl -n ${NS} logs job/produce"
klog "produced from a pod through http://narad.${NS}.svc:7942"

# From the node: the client Service's cluster IP.
CIP="$(ctl -n "$NS" get service narad -o jsonpath='{.spec.clusterIP}')"
PASS="$(ctl -n "$NS" get secret narad-security -o jsonpath='{.data.admin-password}' | base64 -d)"
code="$(admin_curl -o /dev/null -w '%{http_code}' -X POST "http://${CIP}:7942/v1/topics/${TOPIC}/produce" -d from-the-node)"
[[ "$code" == 202 ]] || kdie "produce through ${CIP}:7942 answered ${code}, not 202"
klog "produced from the node through the cluster IP ${CIP}:7942 (202)"

GOT=""
wait_for "both messages consumed through ${CIP}:7942" 60 consumed_all ||
	kdie "consumed through ${CIP}:7942: ${GOT:-nothing}"
klog "consumed and acked both messages through the cluster IP"
printf 'operator_available_s=%s naradcluster_ready_s=%s topic_ready_s=%s total_s=%s\n' \
	"$operator_s" "$cluster_s" "$topic_s" "$((SECONDS - t0))"
