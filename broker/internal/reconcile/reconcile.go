package reconcile

import "context"

// Pass is one comparison's input: what should run, and how to tell and start workers.
type Pass[K comparable, D, W any] struct {
	// Want is the wanted workers by key, with the parameters each should run with.
	Want map[K]D
	// Complete reports that Want lists every wanted worker. When false, a worker missing
	// from Want (or differing from it) is left running: the read may have missed it.
	Complete bool
	// CaughtUp reports that the local replica is current; when false nothing starts.
	CaughtUp bool
	// Same reports whether the running worker w is the one d asks for; when not, w is
	// stopped and d's worker starts on a later pass, once w has exited.
	Same func(w W, d D) bool
	// Start builds the worker of k and returns its handle and its body; Reconcile runs the
	// body on the worker's goroutine with a context cancelled when the worker is stopped. It
	// is called with the set's lock held: it must not call back into the set.
	Start func(k K, d D) (W, func(context.Context))
}

// Result is what a comparison left undone.
type Result struct {
	// Draining: a stopped worker has not exited yet (its replacement, if any, waits).
	Draining bool
	// Deferred: a wanted worker was not started because the replica is not caught up.
	Deferred bool
}

// Reconcile brings s towards p.Want: it drops entries of exited workers, stops workers no
// longer wanted (only when p.Complete), and starts every wanted worker whose key is free
// while p.CaughtUp. Workers run under ctx.
func Reconcile[K comparable, D, W any](ctx context.Context, s *Workers[K, W], p Pass[K, D, W]) Result {
	var res Result
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, e := range s.m {
		if e.exited() {
			delete(s.m, k)
			continue
		}
		d, in := p.Want[k]
		if (!in || !p.Same(e.w, d)) && p.Complete && !e.stopping {
			e.stopping = true
			e.cancel()
		}
		if e.stopping {
			res.Draining = true
		}
	}
	for k, d := range p.Want {
		if _, busy := s.m[k]; busy {
			continue
		}
		if !p.CaughtUp {
			res.Deferred = true
			continue
		}
		w, run := p.Start(k, d)
		s.startLocked(ctx, k, w, run)
	}
	return res
}
