package engine

import (
	"sync"
	"time"
)

// drainedOwners remembers which remote owners a queue probe of this node last found with
// nothing to reserve (docs/internals/consume-and-leases.md §1). A new long-poll skips those
// owners on its first pass while the mark is fresh (younger than reprobeInterval) and no
// commit notice for the topic arrived since it was made: with consumers faster than
// producers, every consume would otherwise cost one empty probe RPC per remote owner before
// it parks. An owner with records a notice did not announce (a local long-poll there took
// part of a commit) is probed when the mark expires, as a parked long-poll re-probes today.
type drainedOwners struct {
	mu    sync.Mutex
	marks map[drainKey]drainMark
}

type drainKey struct{ topic, owner string }

type drainMark struct {
	at      time.Time // when the empty probe was sent
	notices uint64    // the topic's notice count then (remoteWake.notices)
}

// maxDrainMarks bounds the memory: past it, expired marks are dropped when one is added, and
// if none has expired the new mark is not kept (the owner is simply probed).
const maxDrainMarks = 4096

// fresh returns when topic's owner was found empty, if that mark is younger than life at now
// and the topic's notice count is still notices.
func (d *drainedOwners) fresh(topic, owner string, notices uint64, now time.Time, life time.Duration) (time.Time, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	m, ok := d.marks[drainKey{topic, owner}]
	if !ok || m.notices != notices || now.Sub(m.at) >= life {
		return time.Time{}, false
	}
	return m.at, true
}

// note records the outcome of a probe of owner sent at at, with the topic's notice count
// read before it was sent: empty marks the owner drained, anything else (messages, a
// failure) clears the mark.
func (d *drainedOwners) note(topic, owner string, empty bool, at time.Time, notices uint64, life time.Duration) {
	k := drainKey{topic, owner}
	d.mu.Lock()
	defer d.mu.Unlock()
	if !empty {
		delete(d.marks, k)
		return
	}
	if d.marks == nil {
		d.marks = map[drainKey]drainMark{}
	}
	if _, ok := d.marks[k]; !ok && len(d.marks) >= maxDrainMarks {
		for mk, m := range d.marks {
			if at.Sub(m.at) >= life {
				delete(d.marks, mk)
			}
		}
		if len(d.marks) >= maxDrainMarks {
			return
		}
	}
	d.marks[k] = drainMark{at: at, notices: notices}
}
