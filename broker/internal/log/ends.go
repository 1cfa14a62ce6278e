package log

import "sync"

// appendEnds remembers where the last appends of a replicated log ended (docs/internals/storage-format.md §20).
// The end of an append is a frame boundary by construction, and a replicated log's HWM mostly
// moves to one of them (a follower's to its leader's HWM, which was some member's end offset;
// a leader's to what its ISR has fetched), so AdvanceHWM finds the committed boundary here
// instead of walking frame headers from the nearest index anchor with a read of the segment.
// Appenders add under wmu; AdvanceHWM looks up under hmu; a truncation or reset clears it
// under both, before offsets can be reused by other frames.
type appendEnds struct {
	mu   sync.Mutex
	next int // slot the next add overwrites
	n    int // slots in use
	buf  [appendEndsKept]appendEnd
}

// appendEndsKept is how many append ends are remembered: a leader's HWM trails its end offset
// by the appends of one follower round trip, a few dozen under load at most.
const appendEndsKept = 32

// appendEnd is the committed boundary an HWM of off would have (if off's segment did not
// roll since: find's caller checks the segment).
type appendEnd struct {
	off int64
	b   boundaryPos
}

func (e *appendEnds) add(off int64, b boundaryPos) {
	e.mu.Lock()
	e.buf[e.next] = appendEnd{off: off, b: b}
	e.next = (e.next + 1) % appendEndsKept
	e.n = min(e.n+1, appendEndsKept)
	e.mu.Unlock()
}

// find returns the boundary remembered for off, newest first.
func (e *appendEnds) find(off int64) (boundaryPos, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for i := 1; i <= e.n; i++ {
		a := e.buf[(e.next-i+appendEndsKept)%appendEndsKept]
		if a.off == off {
			return a.b, true
		}
	}
	return boundaryPos{}, false
}

func (e *appendEnds) clear() {
	e.mu.Lock()
	e.n, e.next = 0, 0
	e.mu.Unlock()
}
