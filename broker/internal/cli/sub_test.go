package cli

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"narad.dev/broker/internal/testwait"
)

const oneMessage = `{"topic":"t","partition":1,"offset":7,"key":"k","payload":{"n":1},"timestamp":1700000000,"receipt_handle":"1:7:3"}`

// subServer serves one message on the first consume and then holds every later consume
// open until the client goes away, counting consumes in second.
func subServer(t *testing.T, ackStatuses ...int) (*fakeAPI, *atomic.Int32) {
	f := newFakeAPI(t)
	var consumes, acks atomic.Int32
	var later atomic.Int32
	f.handle("GET /v1/topics/t/consume", func(w http.ResponseWriter, r *http.Request) {
		if consumes.Add(1) == 1 {
			reply(w, 200, oneMessage)
			return
		}
		later.Add(1)
		<-r.Context().Done()
	})
	f.handle("POST /v1/topics/t/ack", func(w http.ResponseWriter, r *http.Request) {
		i := int(acks.Add(1)) - 1
		st := ackStatuses[min(i, len(ackStatuses)-1)]
		if st == 204 {
			w.WriteHeader(204)
			return
		}
		reply(w, st, `{"error":"ack says no"}`)
	})
	return f, &later
}

// runSubUntilIdle runs `sub` and cancels it (as SIGINT would) once it is back in a long poll.
func runSubUntilIdle(t *testing.T, f *fakeAPI, later *atomic.Int32, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan result, 1)
	go func() { done <- runCLI(ctx, testApp(envFor(t, f)), "", append([]string{"sub", "t"}, args...)...) }()
	testwait.For(t, 10*time.Second, "sub to poll again", func() bool { return later.Load() > 0 })
	cancel()
	return <-done
}

func TestSubAcksWithRetryUntil204AndExitsCleanlyOnSignal(t *testing.T) {
	f, later := subServer(t, 503, 503, 204)
	r := runSubUntilIdle(t, f, later)
	if r.code != 0 || r.stderr != "" {
		t.Fatalf("exit %d stderr %q", r.code, r.stderr)
	}
	if want := "[p1 @7] key=k 22:13:20.000\n{\"n\":1}\n"; r.stdout != want {
		t.Fatalf("stdout %q, want %q", r.stdout, want)
	}
	acks := f.callsTo("POST", "/v1/topics/t/ack")
	if len(acks) != 3 {
		t.Fatalf("%d ack calls, want 3", len(acks))
	}
	for _, a := range acks {
		if a.Query.Get("receipt_handle") != "1:7:3" || a.Query.Has("extend") {
			t.Fatalf("ack query %v", a.Query)
		}
	}
	if q := f.callsTo("GET", "/v1/topics/t/consume")[0].Query; q.Get("wait") != "10s" || q.Has("max_messages") {
		t.Fatalf("consume query %v", q)
	}
}

func TestSubTreats410AsFinal(t *testing.T) {
	f, later := subServer(t, 410)
	r := runSubUntilIdle(t, f, later)
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	if n := len(f.callsTo("POST", "/v1/topics/t/ack")); n != 1 {
		t.Fatalf("%d ack calls after 410, want 1", n)
	}
}

func TestSubGivesUpAckAfterFiveTriesAndKeepsConsuming(t *testing.T) {
	f, later := subServer(t, 503)
	r := runSubUntilIdle(t, f, later)
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	if n := len(f.callsTo("POST", "/v1/topics/t/ack")); n != 5 {
		t.Fatalf("%d ack calls, want 5", n)
	}
	if !strings.Contains(r.stderr, "gave up after 5 tries") || !strings.Contains(r.stderr, "redelivered") {
		t.Fatalf("stderr %q", r.stderr)
	}
}

func TestSubNoAckNeverAcksAndRawPrintsPayloadOnly(t *testing.T) {
	f, later := subServer(t, 204)
	r := runSubUntilIdle(t, f, later, "--no-ack", "--raw", "--partition", "1")
	if r.code != 0 || r.stdout != "{\"n\":1}\n" {
		t.Fatalf("got %+v", r)
	}
	if n := len(f.callsTo("POST", "/v1/topics/t/ack")); n != 0 {
		t.Fatalf("%d ack calls with --no-ack", n)
	}
	if q := f.callsTo("GET", "/v1/topics/t/consume")[0].Query; q.Get("partition") != "1" {
		t.Fatalf("consume query %v", q)
	}
}

func TestSubStopsOnNonRetryableConsumeError(t *testing.T) {
	f := newFakeAPI(t)
	f.fixed("GET /v1/topics/t/consume", 403, `{"error":"forbidden"}`)
	r := runCLI(context.Background(), testApp(envFor(t, f)), "", "sub", "t")
	if r.code != 1 || r.stderr != "narad: http 403: forbidden\n" {
		t.Fatalf("got %+v", r)
	}
}

func TestSubPeekReadsFromHighWatermarkJumpsOn410AndNeverReserves(t *testing.T) {
	f := newFakeAPI(t)
	f.handle("GET /v1/topics/t", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("partition") == "1" {
			reply(w, 200, `{"name":"t","partitions":2,"partition_stats":[{"index":1,"owner_node":"n","available":true,"oldest_offset":25,"high_watermark":30}]}`)
			return
		}
		reply(w, 200, `{"name":"t","partitions":2,"partition_stats":[`+
			`{"index":0,"owner_node":"n","available":true,"oldest_offset":0,"high_watermark":10},`+
			`{"index":1,"owner_node":"n","available":true,"oldest_offset":0,"high_watermark":20}]}`)
	})
	var reachedOldest atomic.Bool
	f.handle("GET /v1/topics/t/consume", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		switch q.Get("partition") + "@" + q.Get("offset") {
		case "0@10":
			reply(w, 200, `{"messages":[{"topic":"t","partition":0,"offset":10,"payload":"ten","timestamp":0},{"topic":"t","partition":0,"offset":11,"payload":"eleven","timestamp":0}]}`)
		case "1@20":
			reply(w, 410, `{"error":"offset aged out"}`)
		case "1@25":
			reachedOldest.Store(true)
			w.WriteHeader(204)
		default:
			w.WriteHeader(204)
		}
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan result, 1)
	go func() { done <- runCLI(ctx, testApp(envFor(t, f)), "", "sub", "t", "--peek", "--raw") }()
	testwait.For(t, 10*time.Second, "peek to reach p1's oldest offset", reachedOldest.Load)
	testwait.For(t, 10*time.Second, "p0 to be polled past 11", func() bool {
		for _, c := range f.callsTo("GET", "/v1/topics/t/consume") {
			if c.Query.Get("partition") == "0" && c.Query.Get("offset") == "12" {
				return true
			}
		}
		return false
	})
	cancel()
	r := <-done
	if r.code != 0 || r.stdout != "ten\neleven\n" {
		t.Fatalf("got %+v", r)
	}
	if !strings.Contains(r.stderr, "skipping to 25") {
		t.Fatalf("stderr %q", r.stderr)
	}
	for _, c := range f.allCalls() {
		if c.Method != "GET" {
			t.Fatalf("peek made a %s %s call", c.Method, c.Path)
		}
		if c.Path == "/v1/topics/t/consume" && (!c.Query.Has("offset") || !c.Query.Has("partition")) {
			t.Fatalf("peek made a reserving consume: %v", c.Query)
		}
	}
}

func TestSubFromNeedsPeekAndPartition(t *testing.T) {
	f := newFakeAPI(t)
	for _, args := range [][]string{{"sub", "t", "--from", "3"}, {"sub", "t", "--peek", "--from", "3"}} {
		if r := runCLI(context.Background(), testApp(envFor(t, f)), "", args...); r.code != 1 {
			t.Fatalf("%v accepted", args)
		}
	}
	if len(f.allCalls()) != 0 {
		t.Fatal("a call was made")
	}
}

func TestReplayReadsFromToExclusiveAndSkipsAgedOut(t *testing.T) {
	f := newFakeAPI(t)
	f.fixed("GET /v1/topics/t", 200, `{"name":"t","partitions":3,"partition_stats":[{"index":2,"owner_node":"n","available":true,"oldest_offset":2,"high_watermark":9}]}`)
	f.handle("GET /v1/topics/t/consume", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		switch q.Get("offset") {
		case "0":
			reply(w, 410, `{"error":"aged out"}`)
		case "2":
			if q.Get("max_messages") != "3" {
				reply(w, 400, `{"error":"unexpected max_messages `+q.Get("max_messages")+`"}`)
				return
			}
			reply(w, 200, `{"messages":[{"topic":"t","partition":2,"offset":2,"payload":"a","timestamp":0},{"topic":"t","partition":2,"offset":3,"payload":"b","timestamp":0}]}`)
		case "4":
			reply(w, 200, `{"topic":"t","partition":2,"offset":4,"payload":"c","timestamp":0}`)
		default:
			reply(w, 400, `{"error":"read past --to"}`)
		}
	})
	r := runCLI(context.Background(), testApp(envFor(t, f)), "", "replay", "t", "--partition", "2", "--from", "0", "--to", "5", "--raw")
	if r.code != 0 || r.stdout != "a\nb\nc\n" {
		t.Fatalf("got %+v", r)
	}
	if !strings.Contains(r.stderr, "offsets 0..1 aged out") {
		t.Fatalf("stderr %q", r.stderr)
	}
}

func TestReplayDefaultsToOldestThroughHighWatermark(t *testing.T) {
	f := newFakeAPI(t)
	f.fixed("GET /v1/topics/t", 200, `{"name":"t","partitions":3,"partition_stats":[{"index":0,"owner_node":"n","available":true,"oldest_offset":5,"high_watermark":6}]}`)
	f.fixed("GET /v1/topics/t/consume", 200, `{"topic":"t","partition":0,"offset":5,"payload":"only","timestamp":0}`)
	r := runCLI(context.Background(), testApp(envFor(t, f)), "", "replay", "t", "--partition", "0", "--raw")
	calls := f.callsTo("GET", "/v1/topics/t/consume")
	if r.code != 0 || r.stdout != "only\n" || len(calls) != 1 || calls[0].Query.Get("offset") != "5" || calls[0].Query.Has("max_messages") {
		t.Fatalf("got %+v, calls %+v", r, calls)
	}
	if r := runCLI(context.Background(), testApp(envFor(t, f)), "", "replay", "t"); r.code != 1 {
		t.Fatal("replay without --partition accepted")
	}
}
