package harness

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"narad.dev/broker/client"
)

// refusedErr dials a closed loopback port and returns the client-visible error.
func refusedErr(t *testing.T) error {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	c, err := client.New("http://" + addr)
	if err != nil {
		t.Fatal(err)
	}
	err = c.Produce(context.Background(), "t", []byte("x"), client.ProduceOptions{})
	if err == nil {
		t.Fatal("produce to a closed port succeeded")
	}
	return err
}

func TestClassifyProduceSeparatesDefiniteFromAmbiguousEnds(t *testing.T) {
	cases := []struct {
		name string
		err  error
		want Outcome
	}{
		{"202 is accepted", nil, OutcomeAccepted},
		{"400 is a definite refusal", &client.Error{Status: http.StatusBadRequest}, OutcomeRejected},
		{"404 is a definite refusal", &client.Error{Status: http.StatusNotFound}, OutcomeRejected},
		{"wrapped 413 is a definite refusal", fmt.Errorf("x: %w", &client.Error{Status: http.StatusRequestEntityTooLarge}), OutcomeRejected},
		{"503 is ambiguous", &client.Error{Status: http.StatusServiceUnavailable}, OutcomeUnknown},
		{"500 is ambiguous", &client.Error{Status: http.StatusInternalServerError}, OutcomeUnknown},
		{"a timeout is ambiguous", context.DeadlineExceeded, OutcomeUnknown},
		{"a reset is ambiguous", errors.New("read: connection reset by peer"), OutcomeUnknown},
		{"a refused connection never reached a process", refusedErr(t), OutcomeRejected},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := ClassifyProduce(tc.err); got != tc.want {
				t.Fatalf("ClassifyProduce(%v) = %s, want %s", tc.err, got, tc.want)
			}
		})
	}
}

// del is a queue delivery of id at p@off on topic "t".
func del(id string, p int, off int64) DeliveryRecord {
	return DeliveryRecord{ID: id, Topic: "t", Node: "n1", Partition: p, Offset: off}
}

func prod(id string, o Outcome) ProduceRecord {
	return ProduceRecord{ID: id, Topic: "t", Node: "n1", Outcome: o}
}

func TestCheckVerdicts(t *testing.T) {
	cases := []struct {
		name        string
		produces    []ProduceRecord
		deliveries  []DeliveryRecord
		ok          bool
		missing     []string
		phantom     []string
		resurrected []string
		conflicts   int
		duplicates  int
		copies      int
	}{
		{
			name:     "every accepted message delivered once passes",
			produces: []ProduceRecord{prod("a", OutcomeAccepted), prod("b", OutcomeAccepted)},
			deliveries: []DeliveryRecord{
				del("a", 0, 0), del("b", 1, 0),
			},
			ok: true,
		},
		{
			name:       "an accepted message never delivered is missing",
			produces:   []ProduceRecord{prod("a", OutcomeAccepted), prod("b", OutcomeAccepted)},
			deliveries: []DeliveryRecord{del("a", 0, 0)},
			missing:    []string{"b"},
		},
		{
			name:       "a delivery nobody produced is a phantom",
			produces:   []ProduceRecord{prod("a", OutcomeAccepted)},
			deliveries: []DeliveryRecord{del("a", 0, 0), del("zz", 0, 1)},
			phantom:    []string{"zz"},
		},
		{
			name:       "an ambiguous produce may be delivered or not",
			produces:   []ProduceRecord{prod("a", OutcomeUnknown), prod("b", OutcomeUnknown)},
			deliveries: []DeliveryRecord{del("a", 0, 0)},
			ok:         true,
		},
		{
			name:       "a refused produce that is delivered is resurrected",
			produces:   []ProduceRecord{prod("a", OutcomeRejected)},
			deliveries: []DeliveryRecord{del("a", 0, 0)},
			resurrected: []string{
				"a",
			},
		},
		{
			name:       "a refused attempt followed by an accepted retry must be delivered",
			produces:   []ProduceRecord{prod("a", OutcomeRejected), prod("a", OutcomeAccepted)},
			deliveries: nil,
			missing:    []string{"a"},
		},
		{
			name:       "an accepted attempt is not undone by a later failed retry",
			produces:   []ProduceRecord{prod("a", OutcomeAccepted), prod("a", OutcomeRejected)},
			deliveries: []DeliveryRecord{del("a", 0, 0)},
			ok:         true,
		},
		{
			name:     "redeliveries of one record are counted, not failed",
			produces: []ProduceRecord{prod("a", OutcomeAccepted)},
			deliveries: []DeliveryRecord{
				del("a", 0, 0), del("a", 0, 0), del("a", 0, 0),
			},
			ok: true, duplicates: 2,
		},
		{
			name:     "a payload stored twice counts an extra copy",
			produces: []ProduceRecord{prod("a", OutcomeAccepted)},
			deliveries: []DeliveryRecord{
				del("a", 0, 0), del("a", 2, 5),
			},
			ok: true, duplicates: 1, copies: 1,
		},
		{
			name:     "replay reads are not duplicate deliveries",
			produces: []ProduceRecord{prod("a", OutcomeAccepted)},
			deliveries: []DeliveryRecord{
				del("a", 0, 0), {ID: "a", Topic: "t", Partition: 0, Offset: 0, Replay: true},
			},
			ok: true,
		},
		{
			name:     "two payloads at one position is a conflict",
			produces: []ProduceRecord{prod("a", OutcomeAccepted), prod("b", OutcomeAccepted)},
			deliveries: []DeliveryRecord{
				del("a", 0, 0), del("b", 0, 0),
			},
			conflicts: 1,
		},
		{
			name:     "the same offset in another partition or topic is no conflict",
			produces: []ProduceRecord{prod("a", OutcomeAccepted), prod("b", OutcomeAccepted), prod("c", OutcomeAccepted)},
			deliveries: []DeliveryRecord{
				del("a", 0, 0), del("b", 1, 0), {ID: "c", Topic: "u", Partition: 0, Offset: 0},
			},
			ok: true,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := NewHistory()
			for _, p := range tc.produces {
				h.RecordProduce(p)
			}
			for _, d := range tc.deliveries {
				h.RecordDelivery(d)
			}
			r := h.Check()
			if r.OK() != tc.ok {
				t.Fatalf("OK() = %v, want %v: %s", r.OK(), tc.ok, r)
			}
			if (r.Err() == nil) != tc.ok {
				t.Fatalf("Err() = %v with OK() = %v", r.Err(), r.OK())
			}
			if !slices.Equal(r.Missing, tc.missing) {
				t.Errorf("missing = %v, want %v", r.Missing, tc.missing)
			}
			if !slices.Equal(r.Phantom, tc.phantom) {
				t.Errorf("phantom = %v, want %v", r.Phantom, tc.phantom)
			}
			if !slices.Equal(r.Resurrected, tc.resurrected) {
				t.Errorf("resurrected = %v, want %v", r.Resurrected, tc.resurrected)
			}
			if len(r.Conflicts) != tc.conflicts {
				t.Errorf("conflicts = %v, want %d", r.Conflicts, tc.conflicts)
			}
			if r.Duplicates != tc.duplicates {
				t.Errorf("duplicates = %d, want %d", r.Duplicates, tc.duplicates)
			}
			if r.DuplicateCopies != tc.copies {
				t.Errorf("copies = %d, want %d", r.DuplicateCopies, tc.copies)
			}
		})
	}
}

func TestMissingIsScopedToTopicAndShrinksAsDeliveriesArrive(t *testing.T) {
	h := NewHistory()
	h.Produce("t", "n1", "a", nil)
	h.Produce("u", "n1", "b", nil)
	h.Produce("t", "n1", "c", &client.Error{Status: http.StatusServiceUnavailable})
	if got := h.Missing("t"); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("Missing(t) = %v, want [a]", got)
	}
	if got := h.Missing(""); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("Missing(all) = %v, want [a b]", got)
	}
	h.Deliver("t", "n2", []Delivery{{Payload: "a", Partition: 1, Offset: 7}}, false)
	if got := h.Missing(""); !slices.Equal(got, []string{"b"}) {
		t.Fatalf("after delivery Missing(all) = %v, want [b]", got)
	}
	if acc := h.Accepted("t"); len(acc) != 1 || !acc["a"] {
		t.Fatalf("Accepted(t) = %v, want {a}", acc)
	}
	if _, ok := h.AcceptedAt("c"); ok {
		t.Fatal("an ambiguous produce has no acceptance time")
	}
}

func TestHistoryIsSafeForConcurrentRecording(t *testing.T) {
	h := NewHistory()
	const workers, per = 8, 200
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range per {
				id := fmt.Sprintf("w%d-%d", w, i)
				h.Produce("t", "n1", id, nil)
				h.RecordDelivery(DeliveryRecord{ID: id, Topic: "t", Partition: w, Offset: int64(i), At: time.Now()})
				_ = h.Missing("t")
			}
		}()
	}
	wg.Wait()
	r := h.Check()
	if !r.OK() || r.Accepted != workers*per || r.Delivered != workers*per || r.Attempts != workers*per {
		t.Fatalf("concurrent recording lost entries: %s", r)
	}
}

func TestLatenciesMeasureFromFirstAcceptToFirstDelivery(t *testing.T) {
	h := NewHistory()
	t0 := time.Now()
	h.RecordProduce(ProduceRecord{ID: "a", Topic: "t", Outcome: OutcomeAccepted, At: t0})
	h.RecordProduce(ProduceRecord{ID: "b", Topic: "t", Outcome: OutcomeAccepted, At: t0.Add(time.Second)})
	h.RecordProduce(ProduceRecord{ID: "c", Topic: "t", Outcome: OutcomeUnknown, At: t0})
	h.RecordProduce(ProduceRecord{ID: "d", Topic: "u", Outcome: OutcomeAccepted, At: t0})
	h.RecordDelivery(DeliveryRecord{ID: "a", Topic: "t", At: t0.Add(3 * time.Second)})
	h.RecordDelivery(DeliveryRecord{ID: "a", Topic: "t", At: t0.Add(2 * time.Second)})
	if got := h.AcceptedBetween("t", t0, t0.Add(time.Second)); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("AcceptedBetween = %v, want [a] (half-open window, accepted only, one topic)", got)
	}
	lat, undelivered := h.Latencies([]string{"a", "b", "c", "zz"})
	if len(lat) != 1 || lat["a"] != 2*time.Second {
		t.Fatalf("latencies = %v, want a=2s (first delivery)", lat)
	}
	if !slices.Equal(undelivered, []string{"b"}) {
		t.Fatalf("undelivered = %v, want [b] (ambiguous and unknown ids are not owed)", undelivered)
	}
}

func TestQuantileIsNearestRank(t *testing.T) {
	ds := []time.Duration{5, 1, 4, 2, 3}
	for _, tc := range []struct {
		q    float64
		want time.Duration
	}{{0, 1}, {0.5, 3}, {0.9, 5}, {1, 5}} {
		if got := Quantile(ds, tc.q); got != tc.want {
			t.Errorf("Quantile(%v) = %v, want %v", tc.q, got, tc.want)
		}
	}
	if Quantile(nil, 0.5) != 0 {
		t.Error("Quantile of nothing is 0")
	}
}

func TestErrorKindGroupsFailuresWithoutTheirAddresses(t *testing.T) {
	cases := []struct {
		err  error
		want string
	}{
		{nil, ""},
		{&client.Error{Status: 404, Message: `topic "t" not found`}, `http 404: topic "t" not found`},
		{fmt.Errorf("POST: %w", &client.Error{Status: 503, Message: "no raft leader"}), "http 503: no raft leader"},
		{refusedErr(t), "connection refused"},
		{fmt.Errorf("Post \"http://127.0.0.9:4242/v1\": %w", context.DeadlineExceeded), "timeout"},
		{errors.New(`Post "http://127.0.0.9:4242/v1/topics/t/produce": EOF`), "EOF"},
	}
	for _, tc := range cases {
		if got := ErrorKind(tc.err); got != tc.want {
			t.Errorf("ErrorKind(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
}

func TestReportCountsFailedProducesPerNodeAndKind(t *testing.T) {
	h := NewHistory()
	h.Produce("t", "n1", "a", &client.Error{Status: 404, Message: "nope"})
	h.Produce("t", "n1", "b", &client.Error{Status: 404, Message: "nope"})
	h.Produce("t", "n2", "c", &client.Error{Status: 503, Message: "busy"})
	h.Produce("t", "n2", "d", nil)
	h.RecordDelivery(del("d", 0, 0))
	r := h.Check()
	if r.ProduceErrors["n1 http 404: nope"] != 2 || r.ProduceErrors["n2 http 503: busy"] != 1 || len(r.ProduceErrors) != 2 {
		t.Fatalf("ProduceErrors = %v", r.ProduceErrors)
	}
	if !r.OK() {
		t.Fatalf("failed produces are not violations: %s", r)
	}
}
