package log

// boundaryPos is the committed boundary (docs/internals/storage-format.md §8): the byte position, in the boundary
// segment (the last segment whose base ≤ hwm), of the first frame whose base ≥ hwm, or that
// segment's size if it has none. Bytes before it hold only records below the HWM.
type boundaryPos struct {
	segBase int64
	pos     int64
}

// CommittedBoundary returns the committed boundary: the base of the boundary segment and the
// byte position in it where committed bytes end. A transfer of the open log never serves
// bytes at or past it; later segments hold only hidden-tail records.
func (l *Log) CommittedBoundary() (segmentBase, pos int64) {
	b := l.bound.Load()
	return b.segBase, b.pos
}

// computeBoundary walks frame headers of the boundary segment of hwm (from its nearest index
// anchor when it has an index). Caller holds wmu (or is Open).
func (l *Log) computeBoundary(hwm int64) (boundaryPos, error) {
	seg := l.segmentFor(hwm)
	if seg == nil {
		seg = l.segs[0]
		return boundaryPos{segBase: seg.base}, nil
	}
	size := seg.size.Load()
	start := int64(0)
	if seg.idx != nil {
		if a := seg.idx.floor(hwm); a.base >= 0 {
			start = a.pos
		}
	}
	b := boundaryPos{segBase: seg.base, pos: size}
	w := newWindowReader(seg.f, size)
	err := walkHeaders(w, seg, size, start, func(pos int64, h frameHeader) bool {
		if h.base >= hwm {
			b.pos = pos
			return true
		}
		return false
	})
	return b, err
}
