package cluster

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	naradv1 "narad.dev/api/v1alpha1"
	"narad.dev/operator/naming"
)

// Service roles: the label below tells the headless Service (one DNS name per pod, scraped by
// the ServiceMonitor) from the client Service, which carry the same cluster labels.
const (
	labelServiceRole    = "narad.dev/service"
	serviceRoleHeadless = "headless"
	serviceRoleClient   = "client"
)

// objectMeta is the metadata of an object of nc named name: nc's labels, nc's namespace.
func objectMeta(nc *naradv1.NaradCluster, name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Namespace: nc.Namespace, Labels: naming.Labels(nc)}
}

// brokerConfig renders spec.broker as the brokers' config file: a YAML mapping whose keys are
// `narad serve` flag names, sorted; "{}" when every setting keeps the broker's default.
func brokerConfig(nc *naradv1.NaradCluster) string {
	b := nc.Spec.Broker
	kv := map[string]string{}
	if b.RetentionMs != nil {
		kv["topic-default-retention-ms"] = strconv.FormatInt(*b.RetentionMs, 10)
	}
	if b.MaxConsumeWait != nil {
		kv["max-consume-wait"] = strconv.Quote(b.MaxConsumeWait.Duration.String())
	}
	if b.DefaultPartitions != nil {
		kv["topic-default-partitions"] = strconv.Itoa(int(*b.DefaultPartitions))
	}
	if b.MaxPartitions != nil {
		kv["topic-max-partitions"] = strconv.Itoa(int(*b.MaxPartitions))
	}
	if b.LogLevel != "" {
		kv["log-level"] = strconv.Quote(b.LogLevel)
	}
	replicationConfig(nc, kv)
	if len(kv) == 0 {
		return "{}\n"
	}
	var sb strings.Builder
	for _, k := range slices.Sorted(maps.Keys(kv)) {
		fmt.Fprintf(&sb, "%s: %s\n", k, kv[k])
	}
	return sb.String()
}

// desiredConfigMap holds the brokers' config file (key naming.ConfigFileName).
func desiredConfigMap(nc *naradv1.NaradCluster) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: objectMeta(nc, naming.ConfigMap(nc)),
		Data:       map[string]string{naming.ConfigFileName: brokerConfig(nc)},
	}
}

// desiredHeadlessService gives every pod, ready or not, a stable DNS name (the brokers join
// each other through it before they are ready).
func desiredHeadlessService(nc *naradv1.NaradCluster) *corev1.Service {
	meta := objectMeta(nc, naming.HeadlessService(nc))
	meta.Labels[labelServiceRole] = serviceRoleHeadless
	return &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: meta,
		Spec: corev1.ServiceSpec{
			ClusterIP:                corev1.ClusterIPNone,
			PublishNotReadyAddresses: true,
			Selector:                 naming.Selector(nc),
			Ports: []corev1.ServicePort{
				servicePort(naming.HTTPPortName, naming.HTTPPort),
				servicePort(naming.ClusterPortName, naming.ClusterPort),
			},
		},
	}
}

// desiredClientService load-balances the client API over the ready pods.
func desiredClientService(nc *naradv1.NaradCluster) *corev1.Service {
	meta := objectMeta(nc, naming.ClientService(nc))
	meta.Labels[labelServiceRole] = serviceRoleClient
	if len(nc.Spec.Service.Annotations) > 0 {
		meta.Annotations = maps.Clone(nc.Spec.Service.Annotations)
	}
	typ := nc.Spec.Service.Type
	if typ == "" {
		typ = corev1.ServiceTypeClusterIP
	}
	return &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: meta,
		Spec: corev1.ServiceSpec{
			Type:     typ,
			Selector: naming.Selector(nc),
			Ports:    []corev1.ServicePort{servicePort(naming.HTTPPortName, naming.HTTPPort)},
		},
	}
}

func servicePort(name string, port int32) corev1.ServicePort {
	return corev1.ServicePort{Name: name, Port: port, Protocol: corev1.ProtocolTCP,
		TargetPort: intstr.FromString(name)}
}

// desiredPDB lets voluntary disruptions take one broker at a time, which keeps a Raft
// majority of any cluster of three or more voters, or none at all while blocked (a replicated
// partition has no in-sync replica to spare: see disruption.go).
func desiredPDB(nc *naradv1.NaradCluster, blocked bool) *policyv1.PodDisruptionBudget {
	maxUnavailable := intstr.FromInt32(1)
	if blocked {
		maxUnavailable = intstr.FromInt32(0)
	}
	return &policyv1.PodDisruptionBudget{
		TypeMeta:   metav1.TypeMeta{APIVersion: "policy/v1", Kind: "PodDisruptionBudget"},
		ObjectMeta: objectMeta(nc, naming.PodDisruptionBudget(nc)),
		Spec: policyv1.PodDisruptionBudgetSpec{
			MaxUnavailable: &maxUnavailable,
			Selector:       &metav1.LabelSelector{MatchLabels: naming.Selector(nc)},
		},
	}
}
