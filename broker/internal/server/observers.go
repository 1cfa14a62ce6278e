package server

import (
	"strconv"
	"time"

	"narad.dev/broker/internal/dispatch"
	"narad.dev/broker/internal/metrics"
)

// httpObserver records HTTP request metrics.
type httpObserver struct{ m *metrics.Metrics }

func (o httpObserver) ObserveRequest(route, method string, status int, d time.Duration, bytesIn, bytesOut int64) {
	s := strconv.Itoa(status)
	o.m.HTTPRequests.WithLabelValues(route, method, s).Inc()
	o.m.HTTPDuration.WithLabelValues(route, method, s).Observe(d.Seconds())
	if bytesIn > 0 {
		o.m.HTTPBytesIn.WithLabelValues(route).Add(float64(bytesIn))
	}
	o.m.HTTPBytesOut.WithLabelValues(route).Add(float64(bytesOut))
	if status >= 500 {
		o.m.Errors.WithLabelValues("http", "5xx").Inc()
	}
}

func (o httpObserver) InFlight(delta int) { o.m.HTTPInFlight.Add(float64(delta)) }

// apiObserver records produce rejections and consume outcomes.
type apiObserver struct{ m *metrics.Metrics }

func (o apiObserver) ProduceRejected(topic, reason string) {
	o.m.ProduceRejections.WithLabelValues(topic, reason).Inc()
}
func (o apiObserver) ConsumeEmpty(topic string) { o.m.ConsumeEmpty.WithLabelValues(topic).Inc() }
func (o apiObserver) ConsumeWait(topic, outcome string, d time.Duration) {
	o.m.ConsumeWait.WithLabelValues(topic, outcome).Observe(d.Seconds())
}

// dispatchObserver counts discarded records of deleted topics.
type dispatchObserver struct{ m *metrics.Metrics }

func (o dispatchObserver) ObserveDiscard(topic string) {
	o.m.Errors.WithLabelValues("ingress", "discard_deleted_topic").Inc()
}

// ObservePass feeds the dispatcher backlog gauge after every pass.
func (o dispatchObserver) ObservePass(p dispatch.PassStats) {
	o.m.IngressUndispatched.Set(float64(p.Undispatched))
}
