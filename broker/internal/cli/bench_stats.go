package cli

import (
	"fmt"
	"io"
	"math"
	"slices"
	"time"
)

// benchResult is what `narad bench` reports; with --json it is printed as one object.
// Rates are messages per second; latencies are of accepted produce requests, in ms.
type benchResult struct {
	Topic           string  `json:"topic"`
	Count           int     `json:"count"`
	Size            int     `json:"size"`
	Workers         int     `json:"workers"`
	Consumers       int     `json:"consumers"`
	Batch           int     `json:"batch"`
	Produced        int64   `json:"produced"`
	ProduceRequests int64   `json:"produce_requests"`
	ProduceErrors   int64   `json:"produce_errors"`
	FailedMessages  int64   `json:"produce_failed_messages"`
	ProduceSeconds  float64 `json:"produce_seconds"`
	ProduceRate     float64 `json:"produce_msgs_per_sec"`
	P50Ms           float64 `json:"p50_ms"`
	P95Ms           float64 `json:"p95_ms"`
	P99Ms           float64 `json:"p99_ms"`
	MaxMs           float64 `json:"max_ms"`
	MeanMs          float64 `json:"mean_ms"`
	Consumed        int64   `json:"consumed"`
	Acked           int64   `json:"acked"`
	ConsumeErrors   int64   `json:"consume_errors"`
	AckErrors       int64   `json:"ack_errors"`
	FullFlowSeconds float64 `json:"full_flow_seconds"`
	FullFlowRate    float64 `json:"full_flow_msgs_per_sec"`
	TimedOut        bool    `json:"timed_out"`
	LastError       string  `json:"last_error,omitempty"`
}

// percentile returns the nearest-rank p-th percentile (0 < p ≤ 100) of ascending sorted;
// 0 for an empty slice.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	rank = min(max(rank, 1), len(sorted))
	return sorted[rank-1]
}

func ms(d time.Duration) float64 { return math.Round(float64(d)/float64(time.Microsecond)) / 1000 }

func perSec(n int64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return math.Round(float64(n)/d.Seconds()*10) / 10
}

// result assembles the report from the counters and latencies.
func (r *benchRun) result(produceWall, flowWall time.Duration) benchResult {
	var all []time.Duration
	for _, l := range r.lat {
		all = append(all, l...)
	}
	slices.Sort(all)
	var sum time.Duration
	for _, d := range all {
		sum += d
	}
	res := benchResult{
		Topic: r.cfg.Topic, Count: r.cfg.Count, Size: r.cfg.Size, Workers: r.cfg.Workers, Batch: r.cfg.Batch,
		Produced: r.produced.Load(), ProduceRequests: r.produceReqs.Load(), ProduceErrors: r.produceErrs.Load(),
		FailedMessages: r.failedMsgs.Load(),
		ProduceSeconds: math.Round(produceWall.Seconds()*1000) / 1000,
		P50Ms:          ms(percentile(all, 50)), P95Ms: ms(percentile(all, 95)), P99Ms: ms(percentile(all, 99)),
	}
	res.ProduceRate = perSec(res.Produced, produceWall)
	if len(all) > 0 {
		res.MaxMs = ms(all[len(all)-1])
		res.MeanMs = ms(sum / time.Duration(len(all)))
	}
	if r.cfg.Consume {
		res.Consumers = r.cfg.Consumers
		res.Consumed, res.Acked = r.consumed.Load(), r.acked.Load()
		res.ConsumeErrors, res.AckErrors = r.consumeErrs.Load(), r.ackErrs.Load()
		res.FullFlowSeconds = math.Round(flowWall.Seconds()*1000) / 1000
		res.FullFlowRate = perSec(res.Acked, flowWall)
	}
	return res
}

// writeText prints the human-readable report.
func (res benchResult) writeText(w io.Writer) error {
	mode := "single"
	if res.Batch > 0 {
		mode = fmt.Sprintf("batch %d", res.Batch)
	}
	_, err := fmt.Fprintf(w, "topic %s: %d × %d B, %d producers, %s\n", res.Topic, res.Count, res.Size, res.Workers, mode)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "produce    %d accepted in %.3fs = %.1f msg/s (%d requests, %d failed)\n",
		res.Produced, res.ProduceSeconds, res.ProduceRate, res.ProduceRequests, res.ProduceErrors)
	fmt.Fprintf(w, "latency    p50 %.3fms  p95 %.3fms  p99 %.3fms  max %.3fms  mean %.3fms\n",
		res.P50Ms, res.P95Ms, res.P99Ms, res.MaxMs, res.MeanMs)
	if res.Consumers > 0 {
		fmt.Fprintf(w, "full flow  %d acked in %.3fs = %.1f msg/s (%d consumers, %d consumed, %d consume errors, %d ack errors)\n",
			res.Acked, res.FullFlowSeconds, res.FullFlowRate, res.Consumers, res.Consumed, res.ConsumeErrors, res.AckErrors)
	}
	if res.LastError != "" {
		_, err = fmt.Fprintf(w, "last error %s\n", res.LastError)
	}
	return err
}
