package httpload

import (
	"math"
	"slices"
	"time"
)

// Result is the run's report, with the field names of `narad bench --json` where the two
// measure the same thing. Rates are messages per second; latencies are of accepted produce
// requests, in milliseconds.
type Result struct {
	Generator       string  `json:"generator"` // "net/http"
	Topic           string  `json:"topic"`
	Count           int     `json:"count"`
	Size            int     `json:"size"`
	Workers         int     `json:"workers"`
	Consumers       int     `json:"consumers"`
	Produced        int64   `json:"produced"`
	ProduceRequests int64   `json:"produce_requests"`
	ProduceRetries  int64   `json:"produce_retries"` // 503 answers retried
	ProduceErrors   int64   `json:"produce_errors"`
	ProduceSeconds  float64 `json:"produce_seconds"`
	ProduceRate     float64 `json:"produce_msgs_per_sec"`
	P50Ms           float64 `json:"p50_ms"`
	P95Ms           float64 `json:"p95_ms"`
	P99Ms           float64 `json:"p99_ms"`
	MaxMs           float64 `json:"max_ms"`
	Consumed        int64   `json:"consumed"` // deliveries of this run's messages, redeliveries included
	Acked           int64   `json:"acked"`    // accepted messages acked with 204
	Lost            int64   `json:"lost"`     // accepted, never consumed
	Duplicates      int64   `json:"duplicates"`
	Unexpected      int64   `json:"unexpected"` // consumed, though their produce failed
	Foreign         int64   `json:"foreign"`    // messages of other runs, acked
	ConsumeErrors   int64   `json:"consume_errors"`
	AckErrors       int64   `json:"ack_errors"`
	FullFlowSeconds float64 `json:"full_flow_seconds"`
	FullFlowRate    float64 `json:"full_flow_msgs_per_sec"`
	TimedOut        bool    `json:"timed_out"`
	LastError       string  `json:"last_error,omitempty"`
}

// result assembles the report. Lost is counted only for a full flow.
func (r *run) result(lat [][]time.Duration, produceWall, flowWall time.Duration, timedOut bool) Result {
	all := slices.Concat(lat...)
	slices.Sort(all)
	t := r.book.tally()
	res := Result{
		Generator: "net/http", Topic: r.cfg.Topic, Count: r.cfg.Count, Size: r.cfg.Size,
		Workers: r.cfg.Workers, Consumers: r.cfg.Consumers,
		Produced: t.Accepted, ProduceRequests: r.produceReqs.Load(), ProduceRetries: r.produceRetries.Load(),
		ProduceErrors: r.produceErrs.Load(), ProduceSeconds: seconds(produceWall),
		ProduceRate: perSec(t.Accepted, produceWall),
		P50Ms:       ms(percentile(all, 50)), P95Ms: ms(percentile(all, 95)), P99Ms: ms(percentile(all, 99)),
		TimedOut: timedOut,
	}
	if len(all) > 0 {
		res.MaxMs = ms(all[len(all)-1])
	}
	if r.cfg.Consumers > 0 {
		res.Consumed, res.Acked, res.Lost = t.Deliveries, t.Acked, t.Lost
		res.Duplicates, res.Unexpected, res.Foreign = t.Duplicates, t.Unexpected, r.foreign.Load()
		res.ConsumeErrors, res.AckErrors = r.consumeErrs.Load(), r.ackErrs.Load()
		res.FullFlowSeconds, res.FullFlowRate = seconds(flowWall), perSec(t.Acked, flowWall)
	}
	r.mu.Lock()
	if r.lastErr != nil {
		res.LastError = r.lastErr.Error()
	}
	r.mu.Unlock()
	return res
}

// percentile returns the nearest-rank p-th percentile (0 < p ≤ 100) of ascending sorted; 0 for
// an empty slice.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := min(max(int(math.Ceil(p/100*float64(len(sorted)))), 1), len(sorted))
	return sorted[rank-1]
}

func ms(d time.Duration) float64 { return math.Round(float64(d)/float64(time.Microsecond)) / 1000 }

func seconds(d time.Duration) float64 { return math.Round(d.Seconds()*1000) / 1000 }

func perSec(n int64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return math.Round(float64(n)/d.Seconds()*10) / 10
}
