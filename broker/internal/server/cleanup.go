package server

import "errors"

// cleanup is the process's stack of closes. open pushes each resource's close as soon as the
// resource is open, so a failure at any later step unwinds exactly what was opened, newest
// first. The graceful shutdown runs a few closes ahead of their turn (closer.close) because
// the shutdown order is not the reverse of the open order; unwind then skips them.
//
// Invariant: every pushed close runs at most once, whether early or by unwind. A cleanup is
// used by one goroutine at a time (open, then stop).
type cleanup struct {
	closers []*closer
}

// closer is one entry of a cleanup: a named close that runs at most once.
type closer struct {
	name string
	fn   func() error
	done bool
}

// push adds fn as the close of the resource just opened and returns its entry, for a
// shutdown that must run it early.
func (c *cleanup) push(name string, fn func() error) *closer {
	cl := &closer{name: name, fn: fn}
	c.closers = append(c.closers, cl)
	return cl
}

// close runs the entry's close unless it already ran, and returns its error.
func (cl *closer) close() error {
	if cl.done {
		return nil
	}
	cl.done = true
	return cl.fn()
}

// unwind runs every close that has not run yet, newest first, and returns their joined
// errors (nil when none failed).
func (c *cleanup) unwind() error {
	var errs []error
	for i := len(c.closers) - 1; i >= 0; i-- {
		errs = append(errs, c.closers[i].close())
	}
	return errors.Join(errs...)
}
