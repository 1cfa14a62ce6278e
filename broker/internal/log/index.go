package log

import "slices"

// Sparse index geometry (docs/internals/storage-format.md §11): one anchor per ~32 KiB, stride widened so a
// segment has at most ~2048 anchors; at most 2 sealed-segment indexes are hot at once.
const (
	indexStride     = 32 << 10
	indexMaxAnchors = 2048
	hotSealedIndex  = 2
)

// anchor is a frame start: the frame's base offset and byte position.
type anchor struct {
	base int64
	pos  int64
}

// sparseIndex maps offsets to a nearby frame start of one segment. Anchors are sorted by both
// base and pos; a frame whose base would break the order is not anchored.
type sparseIndex struct {
	stride  int64
	anchors []anchor
}

func newSparseIndex(segBytes int64) *sparseIndex {
	return &sparseIndex{stride: max(indexStride, segBytes/indexMaxAnchors)}
}

// observe offers a frame start in walk order; force anchors it regardless of stride (the
// first frame after a damaged region).
func (x *sparseIndex) observe(pos, base int64, force bool) {
	n := len(x.anchors)
	if n > 0 {
		last := x.anchors[n-1]
		if base <= last.base || pos <= last.pos {
			return
		}
		if !force && pos-last.pos < x.stride {
			return
		}
	}
	x.anchors = append(x.anchors, anchor{base: base, pos: pos})
}

// floor returns the anchor with the largest base ≤ off (pos 0 when none).
func (x *sparseIndex) floor(off int64) anchor {
	i, found := slices.BinarySearchFunc(x.anchors, off, func(a anchor, o int64) int { return cmpInt64(a.base, o) })
	if found {
		return x.anchors[i]
	}
	if i == 0 {
		return anchor{base: -1}
	}
	return x.anchors[i-1]
}

// buildSealedIndex walks a sealed segment's headers (no CRC) and anchors every stride and
// every resync point.
func buildSealedIndex(seg *segment) (*sparseIndex, error) {
	size := seg.size.Load()
	x := newSparseIndex(size)
	w := newWindowReader(seg.f, size)
	err := walkHeaders(w, seg, size, 0, func(pos int64, h frameHeader) bool {
		_, isResync := slices.BinarySearchFunc(seg.resyncs, pos, func(a anchor, p int64) int { return cmpInt64(a.pos, p) })
		x.observe(pos, h.base, isResync)
		return false
	})
	return x, err
}
