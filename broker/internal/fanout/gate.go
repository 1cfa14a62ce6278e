package fanout

import (
	"time"

	plog "narad.dev/broker/internal/log"
)

// gateAt returns the MaxCommittedAt of a read at now (docs/internals/fanout.md §8): every record for a normal
// child, else now − delay on this node's clock, clamped to ≥ 1 so an extreme delay never
// disables the gate.
func gateAt(now time.Time, delayMs int64) int64 {
	if delayMs <= 0 {
		return plog.NoDueLimit
	}
	g := now.UnixMilli() - delayMs
	if g < 1 {
		g = 1
	}
	return g
}

// dueSleep is how long a delay cursor whose head record (committed at notDueAt) is not due
// sleeps: until notDueAt + delay, capped at wakeCap (docs/internals/fanout.md §8), and at least 1 ms so a record
// that became due between the read and now costs one more read, never a spin.
func dueSleep(now time.Time, notDueAt, delayMs int64, wakeCap time.Duration) time.Duration {
	d := time.Duration(notDueAt+delayMs-now.UnixMilli()) * time.Millisecond
	return max(time.Millisecond, min(d, wakeCap))
}

// dueLag is how far behind the due frontier a delay cursor runs, from the first due record it
// just read (docs/internals/fanout.md §9): max(0, now − (committed_at + delay)), in seconds.
func dueLag(now time.Time, committedAt, delayMs int64) float64 {
	ms := now.UnixMilli() - (committedAt + delayMs)
	if ms < 0 {
		return 0
	}
	return float64(ms) / 1000
}
