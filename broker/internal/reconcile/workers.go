package reconcile

import (
	"context"
	"sync"
)

// Workers is a keyed set of worker goroutines of type W (the caller's handle on a worker).
// An entry stays in the set from its start until a Reconcile or StopAll after it exited, so
// a key is busy while its worker drains. All methods are safe for concurrent use.
type Workers[K comparable, W any] struct {
	onExit func()

	mu sync.Mutex
	m  map[K]*entry[W]
	wg sync.WaitGroup
}

type entry[W any] struct {
	w        W
	cancel   context.CancelFunc
	done     chan struct{} // closed when the goroutine returned
	stopping bool          // cancelled by Reconcile or StopAll
}

func (e *entry[W]) exited() bool {
	select {
	case <-e.done:
		return true
	default:
		return false
	}
}

// NewWorkers returns an empty set. onExit (may be nil) runs on a worker's goroutine after
// that worker has exited and its key reads as free (Get reports it exited).
func NewWorkers[K comparable, W any](onExit func()) *Workers[K, W] {
	return &Workers[K, W]{onExit: onExit, m: map[K]*entry[W]{}}
}

// startLocked runs run(ctx') on a new goroutine under key k, ctx' a child of ctx cancelled
// when the worker is stopped or run returns. Caller holds s.mu; k is free.
func (s *Workers[K, W]) startLocked(ctx context.Context, k K, w W, run func(context.Context)) {
	wctx, cancel := context.WithCancel(ctx)
	e := &entry[W]{w: w, cancel: cancel, done: make(chan struct{})}
	s.m[k] = e
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer func() {
			if s.onExit != nil {
				s.onExit()
			}
		}()
		defer close(e.done)
		defer cancel()
		run(wctx)
	}()
}

// Get returns the worker under k: ok when an entry exists (running, draining or exited but
// not yet removed), live when its goroutine has not returned.
func (s *Workers[K, W]) Get(k K) (w W, ok, live bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.m[k]
	if !ok {
		return w, false, false
	}
	return e.w, true, !e.exited()
}

// Live returns the number of workers whose goroutine has not returned.
func (s *Workers[K, W]) Live() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, e := range s.m {
		if !e.exited() {
			n++
		}
	}
	return n
}

// StopAll cancels every worker, waits until all of them have returned and empties the set.
func (s *Workers[K, W]) StopAll() {
	s.mu.Lock()
	for _, e := range s.m {
		e.stopping = true
		e.cancel()
	}
	s.mu.Unlock()
	s.wg.Wait()
	s.mu.Lock()
	clear(s.m)
	s.mu.Unlock()
}
