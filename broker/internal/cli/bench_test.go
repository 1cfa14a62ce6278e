package cli

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"
)

func runBench(t *testing.T, srv string, args ...string) (benchResult, result) {
	t.Helper()
	env := map[string]string{EnvAddr: srv, EnvConfigDir: t.TempDir()}
	r := runCLI(context.Background(), testApp(env), "", append([]string{"bench", "bench"}, args...)...)
	var res benchResult
	if r.code == 0 {
		if err := json.Unmarshal([]byte(r.stdout), &res); err != nil {
			t.Fatalf("stdout is not one JSON object: %v\n%s", err, r.stdout)
		}
	}
	return res, r
}

func checkLatencies(t *testing.T, res benchResult) {
	t.Helper()
	if !(res.P50Ms > 0 && res.P50Ms <= res.P95Ms && res.P95Ms <= res.P99Ms && res.P99Ms <= res.MaxMs) {
		t.Fatalf("percentiles out of order: %+v", res)
	}
	if res.ProduceRate <= 0 {
		t.Fatalf("produce rate %v", res.ProduceRate)
	}
}

func TestBenchFullFlowCountsEveryMessageProducedConsumedAndAcked(t *testing.T) {
	b := newFakeBroker(t)
	res, r := runBench(t, b.srv.URL, "--count", "300", "--workers", "4", "--consumers", "3", "--consume", "--json", "--size", "64")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	if res.Produced != 300 || res.ProduceRequests != 300 || res.ProduceErrors != 0 || res.Acked != 300 || res.Consumed != 300 ||
		res.Consumers != 3 || res.TimedOut || res.FullFlowRate <= 0 {
		t.Fatalf("result %+v", res)
	}
	checkLatencies(t, res)
	if produces, ready, inflight := b.stats(); produces != 300 || ready != 0 || inflight != 0 {
		t.Fatalf("broker left produces=%d ready=%d inflight=%d", produces, ready, inflight)
	}
}

func TestBenchBatchModeUsesBatchEndpoints(t *testing.T) {
	b := newFakeBroker(t)
	res, r := runBench(t, b.srv.URL, "--count", "250", "--workers", "3", "--batch", "16", "--consume", "--json")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	if res.Produced != 250 || res.ProduceRequests != 16 || res.Acked != 250 || res.Batch != 16 {
		t.Fatalf("result %+v", res)
	}
	checkLatencies(t, res)
	if produces, _, inflight := b.stats(); produces != 16 || inflight != 0 {
		t.Fatalf("broker saw %d produce requests, %d in flight", produces, inflight)
	}
}

func TestBenchCountsOnlyItsOwnMessagesWhenTheTopicHasOlderOnes(t *testing.T) {
	b := newFakeBroker(t)
	b.add([]byte("left over from a previous run"), []byte(`{"old":true}`))
	res, r := runBench(t, b.srv.URL, "--count", "50", "--workers", "2", "--consume", "--json")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	if res.Produced != 50 || res.Acked != 50 || res.Consumed != 50 {
		t.Fatalf("result %+v", res)
	}
}

func TestBenchProduceOnlyPrintsTextReport(t *testing.T) {
	b := newFakeBroker(t)
	env := map[string]string{EnvAddr: b.srv.URL, EnvConfigDir: t.TempDir()}
	r := runCLI(context.Background(), testApp(env), "", "bench", "bench", "--count", "40", "--workers", "2")
	if r.code != 0 || !strings.Contains(r.stdout, "produce    40 accepted") || !strings.Contains(r.stdout, "p99") ||
		strings.Contains(r.stdout, "full flow") {
		t.Fatalf("got %+v", r)
	}
}

func TestBenchStopsOnNonRetryableErrorWithNaradPrefix(t *testing.T) {
	f := newFakeAPI(t)
	f.fixed("POST /v1/topics/bench/produce", 404, `{"error":"topic not found"}`)
	_, r := runBench(t, f.srv.URL, "--count", "1000", "--workers", "2", "--json")
	if r.code != 1 || !strings.HasSuffix(r.stderr, "narad: produce: http 404: topic not found\n") {
		t.Fatalf("got %+v", r)
	}
	if n := len(f.callsTo("POST", "/v1/topics/bench/produce")); n > 2 {
		t.Fatalf("%d produce calls after a 404", n)
	}
}

func TestBenchCreateMakesMissingTopicWithPartitions(t *testing.T) {
	b := newFakeBroker(t)
	f := newFakeAPI(t)
	f.fixed("GET /v1/topics/bench", 404, `{"error":"topic not found"}`)
	f.fixed("POST /v1/topics", 201, `{"name":"bench","partitions":12,"role":"standalone"}`)
	f.handle("POST /v1/topics/bench/produce", func(w http.ResponseWriter, r *http.Request) { b.produce(w, r) })
	_, r := runBench(t, f.srv.URL, "--count", "5", "--workers", "1", "--create", "--partitions", "12", "--json")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	if got := strings.TrimSpace(f.callsTo("POST", "/v1/topics")[0].Body); got != `{"name":"bench","partitions":12}` {
		t.Fatalf("create body %s", got)
	}
}

func TestBenchRejectsBadFlagsBeforeAnyCall(t *testing.T) {
	f := newFakeAPI(t)
	for _, args := range [][]string{{"--count", "0"}, {"--size", "0"}, {"--workers", "0"}, {"--batch", "5000"}, {"--consume", "--consumers", "0"}} {
		if _, r := runBench(t, f.srv.URL, args...); r.code != 1 {
			t.Fatalf("%v accepted", args)
		}
	}
	if len(f.allCalls()) != 0 {
		t.Fatal("a call was made")
	}
}

func TestBenchPinsThePartitionAndHoldsTheRate(t *testing.T) {
	for _, batch := range []string{"0", "4"} {
		f := newFakeAPI(t)
		f.fixed("POST /v1/topics/bench/produce", 202, "")
		f.fixed("POST /v1/topics/bench/produce/batch", 202, `{"accepted":4}`)
		began := time.Now()
		res, r := runBench(t, f.srv.URL, "--count", "40", "--workers", "4", "--batch", batch, "--partition", "2", "--rate", "100", "--json")
		if r.code != 0 {
			t.Fatalf("batch %s: exit %d: %s", batch, r.code, r.stderr)
		}
		if res.Produced != 40 {
			t.Fatalf("batch %s: produced %d, want 40", batch, res.Produced)
		}
		// 40 messages at 100/s with a burst of one request: at least ~0.35 s however fast the
		// machine (a lower bound only; a slow machine just takes longer).
		if took := time.Since(began); took < 350*time.Millisecond {
			t.Fatalf("batch %s: 40 messages at --rate 100 took %s", batch, took)
		}
		for _, c := range f.allCalls() {
			pinned := c.Query.Get("partition") == "2" || strings.Count(c.Body, `"partition":2`) == 4
			if c.Method == "POST" && strings.HasPrefix(c.Path, "/v1/topics/bench/produce") && !pinned {
				t.Fatalf("batch %s: produce not pinned to partition 2: %+v", batch, c)
			}
		}
	}
}
