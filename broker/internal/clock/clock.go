// Package clock holds the waits that honour a context. It imports nothing from this module,
// so every package may use it.
//
// Invariant: a wait never outlives its context; a wait of d ≤ 0 does not block.
package clock

import (
	"context"
	"time"
)

// Sleep waits d or until ctx ends, whichever is first: nil when the full wait elapsed, ctx's
// error when ctx ended (also when it had already ended, whatever d).
func Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
