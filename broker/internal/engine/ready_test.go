package engine

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestReadinessDoesNotFlapWhileMetadataApplies: /readyz stays ready while entries are being
// applied (the strict AppliedCaughtUp is false for the instant an entry applies), and goes
// unready once the metastore is really gone for longer than the grace.
func TestReadinessDoesNotFlapWhileMetadataApplies(t *testing.T) {
	n := startNode(t, t.TempDir(), nil)
	n.e.SetReady(true)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // a stream of applied entries, like heartbeats under load
		defer wg.Done()
		for i := int64(1); ctx.Err() == nil; i++ {
			_ = n.store.MemberHeartbeat(ctx, "n1", i)
		}
	}()
	var strictFalse, readyErrs atomic.Int64
	for ctx.Err() == nil {
		if !n.store.AppliedCaughtUp() {
			strictFalse.Add(1)
		}
		if err := n.e.Ready(); err != nil {
			readyErrs.Add(1)
		}
	}
	wg.Wait()
	if readyErrs.Load() != 0 {
		t.Fatalf("Ready() failed %d times on a caught-up node while entries applied (strict check false %d times)",
			readyErrs.Load(), strictFalse.Load())
	}
	t.Logf("strict AppliedCaughtUp was false %d times; readiness never flapped", strictFalse.Load())

	n.store.Close()
	deadline := time.Now().Add(readyGrace + 3*time.Second)
	for n.e.Ready() == nil {
		if time.Now().After(deadline) {
			t.Fatal("still ready long after the metastore closed")
		}
		time.Sleep(50 * time.Millisecond)
	}
}
