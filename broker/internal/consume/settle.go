package consume

// Ack settles the lease (offset, nonce) (docs/internals/consume-and-leases.md §5). The frontier hole
// advances committed over the contiguous run of acked-ahead and corrupt offsets; any other
// offset parks in the acked-ahead window, or — when the window is full — fails with
// ErrAckedAheadFull and the lease stays live for a retry. No live lease → ErrStale.
func (s *Shard) Ack(offset int64, nonce uint64, lim Limits) error {
	lim = lim.normalized()
	nowMs := s.now().UnixMilli()
	s.mu.Lock()
	purged := s.purgeLocked(nowMs)
	err := s.ackLocked(offset, nonce, lim, nowMs)
	s.mu.Unlock()
	s.afterSettle(purged, err)
	return err
}

func (s *Shard) ackLocked(offset int64, nonce uint64, lim Limits, nowMs int64) error {
	if !s.liveLocked(offset, nonce, nowMs) {
		return ErrStale
	}
	switch {
	case offset <= s.committed: // aged out under the lease: already resolved
		delete(s.reservations, offset)
	case offset == s.committed+1:
		delete(s.reservations, offset)
		s.advanceLocked(offset)
	case len(s.ackedAhead) >= lim.MaxAckedAhead:
		return ErrAckedAheadFull
	default:
		delete(s.reservations, offset)
		s.ackedAhead[offset] = struct{}{}
		s.changes++
	}
	return nil
}

// Extend restarts the lease (offset, nonce) as a full window from now with the topic's
// current visibility timeout; the same handle stays valid. No live lease → ErrStale.
func (s *Shard) Extend(offset int64, nonce uint64, lim Limits) error {
	lim = lim.normalized()
	nowMs := s.now().UnixMilli()
	s.mu.Lock()
	purged := s.purgeLocked(nowMs)
	var err error
	if s.liveLocked(offset, nonce, nowMs) {
		exp := nowMs + lim.VisibilityTimeout.Milliseconds()
		s.reservations[offset] = reservation{nonce: nonce, expiresAt: exp}
		s.pushExpiryLocked(expiryEntry{expiresAt: exp, offset: offset, nonce: nonce})
	} else {
		err = ErrStale
	}
	s.mu.Unlock()
	s.afterSettle(purged, err)
	if err == nil && s.obs != nil {
		s.obs.Extended()
	}
	return err
}

// Nack releases the lease (offset, nonce): the offset is reservable at once and long-poll
// waiters are woken. No live lease → ErrStale.
func (s *Shard) Nack(offset int64, nonce uint64) error {
	nowMs := s.now().UnixMilli()
	s.mu.Lock()
	purged := s.purgeLocked(nowMs)
	var err error
	if s.liveLocked(offset, nonce, nowMs) {
		delete(s.reservations, offset)
		s.released.push(offset)
		purged++
	} else {
		err = ErrStale
	}
	s.mu.Unlock()
	s.afterSettle(purged, err)
	if err == nil && s.obs != nil {
		s.obs.Nacked()
	}
	return err
}

// PurgeExpired releases every lapsed lease and wakes waiters if any was released. The engine
// calls it every second (docs/internals/consume-and-leases.md §6) so redelivery does not wait for a poll.
func (s *Shard) PurgeExpired() int {
	nowMs := s.now().UnixMilli()
	s.mu.Lock()
	n := s.purgeLocked(nowMs)
	s.mu.Unlock()
	if n > 0 {
		s.src.Broadcast()
	}
	return n
}

// liveLocked reports whether (offset, nonce) names a reservation that has not lapsed.
// Caller holds mu.
func (s *Shard) liveLocked(offset int64, nonce uint64, nowMs int64) bool {
	if s.closed {
		return false
	}
	r, ok := s.reservations[offset]
	return ok && r.nonce == nonce && nowMs < r.expiresAt
}

// afterSettle wakes waiters when leases were released and reports rejections.
func (s *Shard) afterSettle(released int, err error) {
	if released > 0 {
		s.src.Broadcast()
	}
	if err == nil || s.obs == nil {
		return
	}
	switch err {
	case ErrStale:
		s.obs.AckRejected(RejectStale)
	case ErrAckedAheadFull:
		s.obs.AckRejected(RejectCap)
	}
}
