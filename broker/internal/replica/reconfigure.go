package replica

import (
	"fmt"
	"slices"
)

// Reconfigure installs a new replica list and min in-sync count in a running leadership
// (docs/internals/replication.md §9: op 25 changes the replicas and an alter changes M without
// a new epoch). A replica that joins starts out of date, as in NewLeader; one that left is
// forgotten, so it can no longer fetch. The leader must stay a replica and minISR within
// 1 … len(replicas). Waiters are woken and the HWM re-evaluated (a lower M may let it move).
func (l *Leader) Reconfigure(epoch uint64, replicas []string, minISR int) error {
	if !slices.Contains(replicas, l.self) {
		return fmt.Errorf("replica: replicas %v without their leader %s", replicas, l.self)
	}
	if minISR < 1 || minISR > len(replicas) {
		return fmt.Errorf("replica: min in-sync %d for %d replicas", minISR, len(replicas))
	}
	l.advMu.Lock()
	defer l.advMu.Unlock()
	l.mu.Lock()
	if err := l.checkLocked(epoch); err != nil {
		l.mu.Unlock()
		return err
	}
	t := l.now()
	for _, r := range replicas {
		if _, ok := l.followers[r]; !ok && r != l.self {
			l.followers[r] = &followerState{leo: -1, caughtUpAt: t}
		}
	}
	for r := range l.followers {
		if !slices.Contains(replicas, r) {
			delete(l.followers, r)
		}
	}
	l.minISR = minISR
	close(l.changed)
	l.changed = make(chan struct{})
	l.mu.Unlock()
	return l.advanceLocked()
}

// Configured reports whether the leadership runs with exactly these replicas (as a set) and
// min in-sync count.
func (l *Leader) Configured(replicas []string, minISR int) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.minISR != minISR || len(l.followers) != len(replicas)-1 {
		return false
	}
	for _, r := range replicas {
		if _, ok := l.followers[r]; !ok && r != l.self {
			return false
		}
	}
	return true
}

// MinISR is the min in-sync count the leadership runs with.
func (l *Leader) MinISR() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.minISR
}
