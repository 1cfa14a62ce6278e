package testwait

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// fatalRecorder records Fatalf's message instead of ending the test.
type fatalRecorder struct {
	testing.TB
	msg string
}

func (r *fatalRecorder) Helper() {}

func (r *fatalRecorder) Fatalf(format string, args ...any) { r.msg = fmt.Sprintf(format, args...) }

func TestForReturnsOnceTheConditionHolds(t *testing.T) {
	n := 0
	For(t, 5*time.Second, "three calls", func() bool { n++; return n == 3 })
	if n != 3 {
		t.Fatalf("cond called %d times, want 3", n)
	}
}

func TestForFailsAfterItsDeadlineNamingWhatItWaitedFor(t *testing.T) {
	r := &fatalRecorder{TB: t}
	start := time.Now()
	calls := 0
	// A real Fatalf ends the goroutine; with the recorder the condition ends the loop.
	For(r, 20*time.Millisecond, "the impossible", func() bool { calls++; return r.msg != "" })
	if !strings.Contains(r.msg, "waiting for the impossible") || !strings.Contains(r.msg, "20ms") {
		t.Fatalf("failure message %q", r.msg)
	}
	if waited := time.Since(start); waited < 20*time.Millisecond || calls < 3 {
		t.Fatalf("failed after %v and %d calls: before its deadline", waited, calls)
	}
}
