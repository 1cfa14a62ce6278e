package httpload

import (
	"encoding/json"
	"testing"
)

func TestLedgerCountsLostDuplicatesAndUnexpected(t *testing.T) {
	l := newLedger(5)
	for _, seq := range []int64{0, 1, 2, 3} { // 4's produce failed
		l.accept(seq)
	}
	for _, seq := range []int64{0, 1, 1, 4} { // 1 twice, 4 although it failed, 2 and 3 never
		if err := l.consume(seq); err != nil {
			t.Fatal(err)
		}
		l.ack(seq)
	}
	got := l.tally()
	want := tally{Accepted: 4, Deliveries: 4, Acked: 2, Lost: 2, Duplicates: 1, Unexpected: 1}
	if got != want {
		t.Fatalf("tally = %+v, want %+v", got, want)
	}
	if l.settled() {
		t.Fatal("settled with two accepted messages never acked")
	}
}

func TestLedgerSettlesWhenTheAckIsBookedBeforeTheAccept(t *testing.T) {
	l := newLedger(2)
	l.accept(0)
	if err := l.consume(1); err != nil { // consumer faster than the producer's bookkeeping
		t.Fatal(err)
	}
	l.ack(1)
	l.ack(0)
	l.accept(1)
	if !l.settled() {
		t.Fatalf("not settled though both accepted messages were acked: %+v", l.tally())
	}
}

func TestLedgerRefusesASequenceOutsideTheRun(t *testing.T) {
	l := newLedger(3)
	for _, seq := range []int64{-1, 3} {
		if err := l.consume(seq); err == nil {
			t.Fatalf("consume(%d) accepted", seq)
		}
	}
	if got := l.tally(); got.Deliveries != 0 {
		t.Fatalf("refused sequences were counted: %+v", got)
	}
}

func TestPayloadHasTheConfiguredSizeAndCarriesItsSequence(t *testing.T) {
	for _, size := range []int{MinSize, 100, 1024} {
		p := payload("abcdef0123456789", 1234567, size)
		if len(p) != size {
			t.Fatalf("size %d: payload is %d bytes", size, len(p))
		}
		seq, err := parsePayload("abcdef0123456789", json.RawMessage(p))
		if err != nil || seq != 1234567 {
			t.Fatalf("size %d: parse = %d, %v", size, seq, err)
		}
		if _, err := parsePayload("another-run", json.RawMessage(p)); err != errForeign {
			t.Fatalf("another run's payload: err = %v, want errForeign", err)
		}
	}
}
