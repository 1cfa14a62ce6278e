package httpload

import (
	"fmt"
	"sync"
)

// ledger tracks every sequence of a run. A sequence is acked only after it was consumed, and
// consumed only if it is in range: out-of-range sequences are refused, never counted.
// Accepted sequences (202) are the ones the run must see consumed; consumes of sequences whose
// produce failed are counted apart (a timed-out produce may still have been stored).
type ledger struct {
	mu       sync.Mutex
	accepted []bool
	consumed []uint32 // deliveries per sequence
	acked    []bool

	nAccepted, nAckedAccepted int64
	deliveries, duplicates    int64
}

func newLedger(count int) *ledger {
	return &ledger{accepted: make([]bool, count), consumed: make([]uint32, count), acked: make([]bool, count)}
}

// accept records a 202 for seq.
func (l *ledger) accept(seq int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.accepted[seq] {
		return
	}
	l.accepted[seq] = true
	l.nAccepted++
	if l.acked[seq] { // a consumer was faster than the producer's bookkeeping
		l.nAckedAccepted++
	}
}

// consume records one delivery of seq; an error when seq is outside the run.
func (l *ledger) consume(seq int64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if seq < 0 || seq >= int64(len(l.consumed)) {
		return fmt.Errorf("httpload: consumed sequence %d outside 0…%d", seq, len(l.consumed)-1)
	}
	l.deliveries++
	if l.consumed[seq]++; l.consumed[seq] > 1 {
		l.duplicates++
	}
	return nil
}

// ack records a 204 ack of seq, which consume has already checked to be in range.
func (l *ledger) ack(seq int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.acked[seq] {
		return
	}
	l.acked[seq] = true
	if l.accepted[seq] {
		l.nAckedAccepted++
	}
}

// settled reports whether every accepted sequence has been acked.
func (l *ledger) settled() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.nAckedAccepted == l.nAccepted
}

// tally is the ledger's account at the end of a run.
type tally struct {
	Accepted, Deliveries, Acked  int64
	Lost, Duplicates, Unexpected int64
}

// tally counts lost messages (accepted, never consumed) and unexpected ones (consumed, never
// accepted).
func (l *ledger) tally() tally {
	l.mu.Lock()
	defer l.mu.Unlock()
	t := tally{Accepted: l.nAccepted, Deliveries: l.deliveries, Acked: l.nAckedAccepted, Duplicates: l.duplicates}
	for i, ok := range l.accepted {
		switch {
		case ok && l.consumed[i] == 0:
			t.Lost++
		case !ok && l.consumed[i] > 0:
			t.Unexpected++
		}
	}
	return t
}
