package consume

import (
	"errors"
)

// Reserve hands out up to max messages (max < 1 counts as 1), each under its own lease
// (docs/internals/consume-and-leases.md §4). The lease is created under the shard lock before the record
// is read, and the read happens without the lock. An unreadable record is skipped for good
// (corrupt set, frontier advances over it) and the next offset is tried; a record that aged
// out meanwhile resolves the same way. Any other read error releases that lease and ends the
// call. taken is how many key and payload bytes the answer these messages join holds already
// (from other partitions): the first message that would take the answer past lim.MaxBytes
// ends the call, and its lease and those after it are released unread by anyone, except
// that an answer still empty gets its first message whatever its size; lim.Take, when set,
// can end it before any message. The Outcome is Reserved whenever at least one message is
// returned.
func (s *Shard) Reserve(lim Limits, max, taken int) ([]Delivery, Outcome) {
	if max < 1 {
		max = 1
	}
	lim = lim.normalized()
	if taken < 0 {
		taken = 0
	}
	var out []Delivery
	outcome := Empty
	broadcast := false
	bytes := taken // key and payload bytes in the answer
	for len(out) < max {
		start := len(out)
		nowMs := s.now().UnixMilli()
		s.mu.Lock()
		if s.purgeLocked(nowMs) > 0 { // step 1
			broadcast = true
		}
		var dropped int64
		switch {
		case s.closed:
			outcome = Empty
		case s.frozen: // step 2
			outcome = Frozen
		default:
			outcome, dropped = s.reserveLocked(lim, nowMs, max-start, &out)
		}
		s.mu.Unlock()
		s.observeDropped(dropped)
		if len(out) == start {
			break
		}
		// step 9: read only after the reservations exist.
		w, again, full := start, true, false
		for i := start; i < len(out); i++ {
			d := out[i]
			msg, err := s.src.Read(d.Handle.Offset)
			if err != nil {
				if !s.readFailed(d.Handle, err) {
					again = false
				}
				continue
			}
			// step 10: the byte bound and the node's budget. The leases past them go back
			// unread by anyone.
			size := len(msg.Key) + len(msg.Payload)
			if ((w > 0 || bytes > 0) && bytes+size > lim.MaxBytes) || (lim.Take != nil && !lim.Take(size)) {
				s.release(out[i:])
				broadcast, full = true, true
				break
			}
			bytes += size
			msg.Offset = d.Handle.Offset
			out[w] = Delivery{Message: msg, Handle: d.Handle}
			w++
		}
		skipped := len(out) - w
		clear(out[w:])
		out = out[:w]
		// Another round only when offsets were skipped for good: each such round makes
		// progress, so the loop ends.
		if full || !again || len(out) >= max || skipped == 0 {
			break
		}
	}
	if broadcast {
		s.src.Broadcast()
	}
	if len(out) > 0 {
		return out, Reserved
	}
	if outcome == Reserved {
		outcome = Empty
	}
	return out, outcome
}

// reserveLocked runs steps 3–8 for up to n offsets, appending a Delivery carrying only the
// handle for each new lease. It returns Reserved if it reserved n, else why it stopped, and
// the number of messages dropped by an aged-out jump. Caller holds mu.
func (s *Shard) reserveLocked(lim Limits, nowMs int64, n int, out *[]Delivery) (Outcome, int64) {
	dropped := s.ageOutLocked() // step 4
	next := s.committed + 1
	hwm := s.src.HighWatermark()
	for k := 0; k < n; k++ {
		if len(s.reservations) >= lim.MaxInFlight { // step 3
			return Capped, dropped
		}
		if next >= hwm { // step 5
			return Empty, dropped
		}
		var off int64
		if len(s.ackedAhead) >= lim.MaxAckedAhead { // step 6: serve only the frontier hole
			if _, held := s.reservations[next]; held || k > 0 {
				return Capped, dropped
			}
			off = next
			s.takeLocked(off)
		} else { // step 7
			off = s.lowestFreeLocked(next, hwm)
			if off >= hwm {
				return Empty, dropped
			}
		}
		// step 8
		nonce := s.nextNonceLocked()
		exp := nowMs + lim.VisibilityTimeout.Milliseconds()
		s.reservations[off] = reservation{nonce: nonce, expiresAt: exp}
		s.pushExpiryLocked(expiryEntry{expiresAt: exp, offset: off, nonce: nonce})
		if *out == nil {
			*out = make([]Delivery, 0, min(n, lim.MaxInFlight))
		}
		*out = append(*out, Delivery{Handle: Handle{Partition: s.partition, Offset: off, Nonce: nonce}})
	}
	return Reserved, dropped
}

// free reports whether off is neither reserved nor resolved above the frontier. Caller holds mu.
func (s *Shard) freeLocked(off int64) bool {
	if off <= s.committed {
		return false
	}
	if _, ok := s.reservations[off]; ok {
		return false
	}
	if _, ok := s.ackedAhead[off]; ok {
		return false
	}
	_, bad := s.corrupt[off]
	return !bad
}

// lowestFreeLocked returns the lowest free offset ≥ next, consuming it from the released
// heap or the fresh cursor; a result ≥ hwm consumes nothing. Caller holds mu.
func (s *Shard) lowestFreeLocked(next, hwm int64) int64 {
	for len(s.released) > 0 {
		o := s.released[0]
		if o < next || !s.freeLocked(o) {
			s.released.pop() // stale: resolved, or re-reserved through the frontier hole
			continue
		}
		if o >= hwm {
			break
		}
		s.released.pop()
		return o
	}
	if s.fresh < next {
		s.fresh = next
	}
	for !s.freeLocked(s.fresh) && s.fresh < hwm {
		s.fresh++ // recovered acked-ahead offsets sit above the fresh cursor
	}
	if s.fresh >= hwm {
		return hwm
	}
	o := s.fresh
	s.fresh++
	return o
}

// takeLocked claims next (the frontier hole) outside the lowest-free search, keeping the
// released heap and fresh cursor consistent. Caller holds mu.
func (s *Shard) takeLocked(next int64) {
	for len(s.released) > 0 && s.released[0] <= next {
		s.released.pop()
	}
	if s.fresh <= next {
		s.fresh = next + 1
	}
}

// readFailed settles a lease whose record could not be read and reports whether Reserve
// should go on to the next offset.
func (s *Shard) readFailed(h Handle, err error) bool {
	s.mu.Lock()
	ours := false
	if r, ok := s.reservations[h.Offset]; ok && r.nonce == h.Nonce {
		delete(s.reservations, h.Offset)
		ours = true
	}
	var dropped int64
	cont, corrupt := true, false
	switch {
	case errors.Is(err, ErrCorrupt):
		corrupt = true
		if h.Offset > s.committed {
			s.corrupt[h.Offset] = struct{}{}
			s.collapseLocked()
		}
	case errors.Is(err, ErrAgedOut):
		dropped = s.ageOutLocked()
	default:
		if ours {
			s.released.push(h.Offset)
		}
		cont = false
	}
	committed := s.committed
	s.mu.Unlock()
	s.observeDropped(dropped)
	switch {
	case corrupt:
		s.logger.Error("skipping permanently unreadable record", "offset", h.Offset, "committed", committed, "err", err)
		if s.obs != nil {
			s.obs.CorruptSkipped()
		}
	case !cont:
		s.logger.Warn("record read failed; lease released", "offset", h.Offset, "err", err)
	}
	return cont
}

// release drops the leases of ds that are still theirs and queues their offsets for the next
// reserve, as an expiry would, without counting a delivery.
func (s *Shard) release(ds []Delivery) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, d := range ds {
		if r, ok := s.reservations[d.Handle.Offset]; ok && r.nonce == d.Handle.Nonce {
			delete(s.reservations, d.Handle.Offset)
			s.released.push(d.Handle.Offset)
		}
	}
}

func (s *Shard) observeDropped(n int64) {
	if n <= 0 || s.obs == nil {
		return
	}
	if a, ok := s.obs.(AgedOutObserver); ok {
		a.AgedOut(n)
	}
}
