// Package testwait is the one polling wait of this module's tests: For re-checks a condition
// until it holds or a deadline passes, then fails the test naming what it waited for.
//
// Only _test.go files import it. It imports nothing from this module.
package testwait

import (
	"testing"
	"time"
)

// Polling starts at firstPoll and doubles up to maxPoll, so a condition that holds soon is
// seen within a millisecond or two and a slow one (an HTTP round trip, a cluster election) is
// not re-checked more than every maxPoll.
const (
	firstPoll = time.Millisecond
	maxPoll   = 10 * time.Millisecond
)

// For calls cond until it returns true, or fails t (Fatal) once d has passed without it.
// what names the awaited state in the failure message. cond runs on the caller's goroutine.
func For(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	poll := firstPoll
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(poll)
		poll = min(2*poll, maxPoll)
	}
}
