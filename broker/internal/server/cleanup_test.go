package server

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"
)

// A failure at open step k unwinds steps k-1 … 1, newest first, each once.
func TestCleanupUnwindsWhatWasOpenedInReverseOnce(t *testing.T) {
	for failAt := 1; failAt <= 5; failAt++ {
		t.Run(fmt.Sprintf("step %d fails", failAt), func(t *testing.T) {
			var c cleanup
			var closed []int
			open := func(k int) error {
				if k == failAt {
					return errors.New("open failed")
				}
				c.push(fmt.Sprint(k), func() error { closed = append(closed, k); return nil })
				return nil
			}
			for k := 1; k <= 5; k++ {
				if err := open(k); err != nil {
					break
				}
			}
			if err := c.unwind(); err != nil {
				t.Fatal(err)
			}
			if err := c.unwind(); err != nil { // a second unwind closes nothing again
				t.Fatal(err)
			}
			var want []int
			for k := failAt - 1; k >= 1; k-- {
				want = append(want, k)
			}
			if !slices.Equal(closed, want) {
				t.Fatalf("closed %v, want %v", closed, want)
			}
		})
	}
}

// A close run early (the graceful shutdown's order) is skipped by unwind; the rest still
// unwind newest first.
func TestCleanupSkipsWhatClosedEarly(t *testing.T) {
	var c cleanup
	var closed []string
	entry := func(name string) *closer {
		return c.push(name, func() error { closed = append(closed, name); return nil })
	}
	entry("mux")
	entry("pool")
	entry("store")
	in := entry("ingress")
	grpc := entry("grpc")
	http := entry("http")
	for _, cl := range []*closer{http, in, grpc, in, http} {
		if err := cl.close(); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.unwind(); err != nil {
		t.Fatal(err)
	}
	want := []string{"http", "ingress", "grpc", "store", "pool", "mux"}
	if !slices.Equal(closed, want) {
		t.Fatalf("closed %v, want %v", closed, want)
	}
}

// unwind runs every close even when some fail and returns all their errors.
func TestCleanupJoinsTheErrorsOfEveryClose(t *testing.T) {
	var c cleanup
	errA, errC := errors.New("a"), errors.New("c")
	ran := 0
	c.push("a", func() error { ran++; return errA })
	c.push("b", func() error { ran++; return nil })
	early := c.push("c", func() error { ran++; return errC })
	if err := early.close(); !errors.Is(err, errC) {
		t.Fatalf("early close: %v", err)
	}
	err := c.unwind()
	if !errors.Is(err, errA) || errors.Is(err, errC) || ran != 3 {
		t.Fatalf("unwind: %v after %d closes; want a's error only, every close run once", err, ran)
	}
	var empty cleanup
	if err := empty.unwind(); err != nil {
		t.Fatalf("empty unwind: %v", err)
	}
}

// stop cancels every loop of a group and returns only once all have returned; a second stop
// is a no-op, and a group that ran nothing stops at once.
func TestGroupStopWaitsForEveryLoop(t *testing.T) {
	g := newGroup()
	var returned atomic.Int32
	for range 3 {
		g.run(func(ctx context.Context) {
			<-ctx.Done()
			time.Sleep(10 * time.Millisecond)
			returned.Add(1)
		})
	}
	g.stop()
	if n := returned.Load(); n != 3 {
		t.Fatalf("stop returned with %d of 3 loops done", n)
	}
	g.stop()
	newGroup().stop()
}
