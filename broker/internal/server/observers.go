package server

import (
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"narad.dev/broker/internal/dispatch"
	"narad.dev/broker/internal/metrics"
)

// httpObserver records HTTP request metrics. It keeps the metric children of each route,
// method and status it has seen, so a request costs one map load instead of a label lookup
// (and a status string) per metric; the three labels are bounded (route patterns, a fixed
// method set, status codes), so the cache is too. Construct it with newHTTPObserver.
type httpObserver struct {
	m     *metrics.Metrics
	reqs  sync.Map // httpKey → *httpSeries
	bytes sync.Map // route → *routeBytes
}

// httpKey is the label set of one request series.
type httpKey struct {
	route, method string
	status        int
}

// httpSeries holds the children of one httpKey.
type httpSeries struct {
	requests prometheus.Counter
	duration prometheus.Observer
}

// routeBytes holds the per-route byte counters.
type routeBytes struct{ in, out prometheus.Counter }

func newHTTPObserver(m *metrics.Metrics) *httpObserver { return &httpObserver{m: m} }

func (o *httpObserver) ObserveRequest(route, method string, status int, d time.Duration, bytesIn, bytesOut int64) {
	s := o.series(httpKey{route: route, method: method, status: status})
	s.requests.Inc()
	s.duration.Observe(d.Seconds())
	b := o.routeBytes(route)
	if bytesIn > 0 {
		b.in.Add(float64(bytesIn))
	}
	b.out.Add(float64(bytesOut))
	if status >= 500 {
		o.m.Errors.WithLabelValues("http", "5xx").Inc()
	}
}

func (o *httpObserver) series(k httpKey) *httpSeries {
	if v, ok := o.reqs.Load(k); ok {
		return v.(*httpSeries)
	}
	st := strconv.Itoa(k.status)
	v, _ := o.reqs.LoadOrStore(k, &httpSeries{
		requests: o.m.HTTPRequests.WithLabelValues(k.route, k.method, st),
		duration: o.m.HTTPDuration.WithLabelValues(k.route, k.method, st),
	})
	return v.(*httpSeries)
}

func (o *httpObserver) routeBytes(route string) *routeBytes {
	if v, ok := o.bytes.Load(route); ok {
		return v.(*routeBytes)
	}
	v, _ := o.bytes.LoadOrStore(route, &routeBytes{
		in:  o.m.HTTPBytesIn.WithLabelValues(route),
		out: o.m.HTTPBytesOut.WithLabelValues(route),
	})
	return v.(*routeBytes)
}

func (o *httpObserver) InFlight(delta int) { o.m.HTTPInFlight.Add(float64(delta)) }

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
