package server

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"narad.dev/broker/internal/metrics"
)

// TestHTTPObserverKeepsSeriesApart proves the cached children land in the series of their
// own route, method and status, as WithLabelValues per request did.
func TestHTTPObserverKeepsSeriesApart(t *testing.T) {
	m := metrics.New()
	o := newHTTPObserver(m)
	const route = "POST /v1/topics/{topic}/produce"
	for range 3 {
		o.ObserveRequest(route, "POST", 200, time.Millisecond, 100, 20)
	}
	o.ObserveRequest(route, "POST", 503, time.Millisecond, 0, 30)
	o.ObserveRequest("unmatched", "GET", 404, time.Millisecond, 0, 40)

	for _, c := range []struct {
		got  float64
		want float64
		what string
	}{
		{testutil.ToFloat64(m.HTTPRequests.WithLabelValues(route, "POST", "200")), 3, "produce 200"},
		{testutil.ToFloat64(m.HTTPRequests.WithLabelValues(route, "POST", "503")), 1, "produce 503"},
		{testutil.ToFloat64(m.HTTPRequests.WithLabelValues("unmatched", "GET", "404")), 1, "unmatched 404"},
		{testutil.ToFloat64(m.HTTPBytesIn.WithLabelValues(route)), 300, "produce bytes in"},
		{testutil.ToFloat64(m.HTTPBytesOut.WithLabelValues(route)), 90, "produce bytes out"},
		{testutil.ToFloat64(m.HTTPBytesOut.WithLabelValues("unmatched")), 40, "unmatched bytes out"},
		{testutil.ToFloat64(m.Errors.WithLabelValues("http", "5xx")), 1, "5xx errors"},
	} {
		if c.got != c.want {
			t.Errorf("%s: %v, want %v", c.what, c.got, c.want)
		}
	}
	if n := testutil.CollectAndCount(m.HTTPDuration); n != 3 {
		t.Errorf("duration series: %d, want 3", n)
	}
}

// TestHTTPObserverSeenSeriesDoesNotAllocate proves a request of a series seen before costs
// no allocation (the per-request status string and label lookups are gone).
func TestHTTPObserverSeenSeriesDoesNotAllocate(t *testing.T) {
	o := newHTTPObserver(metrics.New())
	const route = "GET /v1/topics/{topic}/consume"
	o.ObserveRequest(route, "GET", 200, time.Millisecond, 0, 10)
	allocs := testing.AllocsPerRun(100, func() {
		o.ObserveRequest(route, "GET", 200, time.Millisecond, 0, 10)
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per observed request, want 0", allocs)
	}
}

func BenchmarkHTTPObserver(b *testing.B) {
	o := newHTTPObserver(metrics.New())
	b.ReportAllocs()
	for b.Loop() {
		o.ObserveRequest("POST /v1/topics/{topic}/ack", "POST", 204, time.Millisecond, 0, 0)
	}
}
