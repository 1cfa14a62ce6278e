package cluster

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Decommission results counted by narad_operator_decommissions_total.
const (
	resultStarted   = "started"   // the operator marked a node draining
	resultRefused   = "refused"   // the brokers refused a scale-down (counted once per generation)
	resultCompleted = "completed" // a drained node left Raft and the StatefulSet shrank past it
)

// The operator's scale-down metrics, served with controller-runtime's own on the manager's
// metrics endpoint. They are registered once per process (registerMetrics), whatever the
// number of Reconcilers.
var (
	drainingNodes = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "narad_operator_draining_nodes",
		Help: "Nodes of a NaradCluster the operator is decommissioning (marked draining, not yet removed from the StatefulSet).",
	}, []string{"namespace", "cluster"})

	decommissions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "narad_operator_decommissions_total",
		Help: "Node decommissions by result: started (node marked draining), refused (the brokers refused a scale-down; once per spec generation), completed (node left Raft and its pod was scaled away).",
	}, []string{"namespace", "cluster", "result"})

	scalePreviews = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "narad_operator_scale_preview_total",
		Help: "Scale previews computed in answer to the narad.dev/scale-preview annotation.",
	}, []string{"namespace", "cluster"})

	registerOnce sync.Once
)

// registerMetrics adds the collectors above to controller-runtime's registry; safe to call
// from every reconcile.
func registerMetrics() {
	registerOnce.Do(func() {
		metrics.Registry.MustRegister(drainingNodes, decommissions, scalePreviews)
	})
}
