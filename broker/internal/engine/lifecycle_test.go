package engine

import (
	"context"
	"testing"
	"time"

	"narad.dev/broker/internal/meta"
)

// Run's end waits for the goroutines metastore events started: a topic purge still running
// (here held on the topic's guard) keeps Run from returning, so none outlives the engine.
func TestRunWaitsForGoroutinesStartedByMetaEvents(t *testing.T) {
	n := startNode(t, t.TempDir(), nil)
	g := n.e.parts.Guard("gone")
	g.Lock()
	n.e.OnMetaEvent(meta.Event{Op: meta.OpDeleteTopic, Topic: "gone", Incarnation: "inc", Partition: -1})

	n.stopped = true // this test runs the stop sequence itself
	n.stopIn()
	if err := <-n.inDone; err != nil {
		t.Fatalf("ingress Run: %v", err)
	}
	n.stopEng()
	select {
	case err := <-n.engDone:
		g.Unlock()
		t.Fatalf("engine Run returned (%v) while a purge it started was still running", err)
	case <-time.After(100 * time.Millisecond):
	}
	g.Unlock()
	select {
	case err := <-n.engDone:
		if err != nil {
			t.Fatalf("engine Run: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("engine Run did not return after the purge finished")
	}
	if err := n.store.Close(); err != nil {
		t.Fatalf("metastore close: %v", err)
	}
	// After Run ended, an event starts nothing.
	if n.e.eventTasks.goTask(func(context.Context) { t.Error("a task ran after the engine stopped") }) {
		t.Fatal("the closed group accepted a task")
	}
}

func TestTaskGroupCloseCancelsAndWaits(t *testing.T) {
	var g taskGroup
	started, finished := make(chan struct{}), make(chan struct{})
	if !g.goTask(func(ctx context.Context) {
		close(started)
		<-ctx.Done()
		time.Sleep(20 * time.Millisecond) // close must wait for this too
		close(finished)
	}) {
		t.Fatal("an open group refused a task")
	}
	<-started
	g.close()
	select {
	case <-finished:
	default:
		t.Fatal("close returned before its task did")
	}
	g.close() // idempotent
	if g.goTask(func(context.Context) {}) {
		t.Fatal("a closed group accepted a task")
	}
}
