package fanout

import "narad.dev/broker/internal/metrics"

// MetricsObserver feeds the runner's events into the node's Prometheus metrics
// (docs/internals/metrics.md §4).
type MetricsObserver struct{ m *metrics.Metrics }

// NewMetricsObserver returns the Observer over m.
func NewMetricsObserver(m *metrics.Metrics) MetricsObserver { return MetricsObserver{m} }

var (
	_ Observer       = MetricsObserver{}
	_ StartObserver  = MetricsObserver{}
	_ RemoteObserver = MetricsObserver{}
)

// Lag implements Observer.
func (o MetricsObserver) Lag(parent, child string, p int, msgs int64) {
	o.m.FanoutLag.WithLabelValues(parent, child, metrics.Partition(p)).Set(float64(msgs))
}

// DueLag implements Observer.
func (o MetricsObserver) DueLag(parent, child string, p int, seconds float64) {
	o.m.FanoutDueLag.WithLabelValues(parent, child, metrics.Partition(p)).Set(seconds)
}

// Dropped implements Observer.
func (o MetricsObserver) Dropped(parent, child string, n int64) {
	o.m.FanoutDropped.WithLabelValues(parent, child).Add(float64(n))
}

// CursorCorrupt implements Observer.
func (o MetricsObserver) CursorCorrupt(string, string, int) {
	o.m.Errors.WithLabelValues("fanout", "cursor_corrupt").Inc()
}

// CursorStarted implements StartObserver: the link's counters exist at zero.
func (o MetricsObserver) CursorStarted(parent, child string, _ int, remote bool) {
	if remote {
		o.m.InitRemoteLink(parent, child, RemoteSendErrorStates)
		return
	}
	o.m.InitLink(parent, child)
}

// Forget implements Observer: the stopped cursor's series go away.
func (o MetricsObserver) Forget(parent, child string, p int) {
	o.m.FanoutLag.DeleteLabelValues(parent, child, metrics.Partition(p))
	o.m.FanoutDueLag.DeleteLabelValues(parent, child, metrics.Partition(p))
}

// RemoteLag implements RemoteObserver.
func (o MetricsObserver) RemoteLag(parent, child string, p int, msgs int64) {
	o.m.FanoutRemoteLag.WithLabelValues(parent, child, metrics.Partition(p)).Set(float64(msgs))
}

// RemoteDueLag implements RemoteObserver.
func (o MetricsObserver) RemoteDueLag(parent, child string, p int, seconds float64) {
	o.m.FanoutRemoteDueLag.WithLabelValues(parent, child, metrics.Partition(p)).Set(seconds)
}

// RemoteSent implements RemoteObserver.
func (o MetricsObserver) RemoteSent(parent, child string, bytes int64) {
	o.m.FanoutRemoteSentBytes.WithLabelValues(parent, child).Add(float64(bytes))
}

// RemoteSendError implements RemoteObserver.
func (o MetricsObserver) RemoteSendError(parent, child, state string) {
	o.m.FanoutRemoteSendErrors.WithLabelValues(parent, child, state).Inc()
}

// ForgetRemote implements RemoteObserver.
func (o MetricsObserver) ForgetRemote(parent, child string, p int) {
	o.m.FanoutRemoteLag.DeleteLabelValues(parent, child, metrics.Partition(p))
	o.m.FanoutRemoteDueLag.DeleteLabelValues(parent, child, metrics.Partition(p))
}
