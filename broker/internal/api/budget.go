package api

import (
	"errors"
	"io"
	"net/http"
	"sync/atomic"
)

// DefaultMaxInflightRequestBytes is the produce memory budget used when
// Options.MaxInflightRequestBytes is not positive: room for 32 full 8 MiB batch bodies, or
// hundreds of typical ones (docs/operating.md, Limits).
const DefaultMaxInflightRequestBytes = 256 << 20

// retryAfterBusySeconds is the Retry-After of a 503 answered because the budget is spent:
// produce bodies are read within milliseconds, so a second is plenty.
const retryAfterBusySeconds = "1"

// chunkedStep is how much more of the budget a body without Content-Length takes each time
// its buffer fills (doubling from here, up to the request's own limit).
const chunkedStep = 64 << 10

// requestBudget is the node-wide budget of produce request bytes held in memory at once
// (Kafka's queued.max.request.bytes). Bytes are reserved before the body is read and
// released when the request ends, so the bytes held never exceed the budget; a reservation
// that does not fit is refused at once, never queued. Safe for concurrent use.
type requestBudget struct {
	limit int64
	used  atomic.Int64
}

func newRequestBudget(limit int64) *requestBudget {
	if limit <= 0 {
		limit = DefaultMaxInflightRequestBytes
	}
	return &requestBudget{limit: limit}
}

// tryReserve takes n bytes if they fit; false leaves the budget unchanged.
func (b *requestBudget) tryReserve(n int64) bool {
	for {
		cur := b.used.Load()
		if n > b.limit-cur {
			return false
		}
		if b.used.CompareAndSwap(cur, cur+n) {
			return true
		}
	}
}

// release returns n bytes taken by tryReserve.
func (b *requestBudget) release(n int64) {
	if b.used.Add(-n) < 0 {
		panic("api: request budget released more than was reserved")
	}
}

// inUse is the number of bytes reserved now.
func (b *requestBudget) inUse() int64 { return b.used.Load() }

// busyError is the 503 of a spent budget.
func busyError() error {
	return &reqError{sentinel: ErrBusy, msg: "too many produce bytes in flight on this node; retry after a moment"}
}

// readBudgetedBody is readBody under the budget: the declared Content-Length (413 above
// limit) is reserved before anything is read or allocated; a body without one reserves as
// its buffer grows, never past limit. The caller must call release once the body and
// everything derived from it are no longer needed (also after an error: release is then a
// no-op).
func (s *server) readBudgetedBody(r *http.Request, limit int64) (body []byte, release func(), err error) {
	noop := func() {}
	if r.ContentLength > limit {
		return nil, noop, tooLargef("request body over %d bytes", limit)
	}
	if r.ContentLength >= 0 {
		n := r.ContentLength
		if !s.budget.tryReserve(n) {
			return nil, noop, busyError()
		}
		release = func() { s.budget.release(n) }
		b, err := readBody(r, limit)
		if err != nil {
			release()
			return nil, noop, err
		}
		return b, release, nil
	}
	var held int64
	release = func() { s.budget.release(held) }
	buf := make([]byte, 0)
	for {
		if len(buf) == cap(buf) {
			if int64(len(buf)) == limit {
				var one [1]byte
				if n, _ := io.ReadFull(r.Body, one[:]); n > 0 {
					release()
					return nil, noop, tooLargef("request body over %d bytes", limit)
				}
				return buf, release, nil
			}
			grow := min(max(int64(cap(buf)), chunkedStep), limit-int64(cap(buf)))
			if !s.budget.tryReserve(grow) {
				release()
				return nil, noop, busyError()
			}
			held += grow
			next := make([]byte, len(buf), int64(cap(buf))+grow)
			copy(next, buf)
			buf = next
		}
		n, err := r.Body.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, release, nil
		}
		if err != nil {
			release()
			var mbe *http.MaxBytesError
			if errors.As(err, &mbe) {
				return nil, noop, tooLargef("request body over %d bytes", mbe.Limit)
			}
			return nil, noop, invalidf("reading request body: %v", err)
		}
	}
}
