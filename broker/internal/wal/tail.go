package wal

import (
	"sort"
	"unsafe"
)

// entrySize is the in-memory cost of one tail Entry, excluding the bytes it points to.
const entrySize = int64(unsafe.Sizeof(Entry{}))

// chunk is one durable batch kept in memory. Invariant: entries[i].Seq == first+i, and every
// Payload aliases the batch's immutable frame buffer.
type chunk struct {
	first   uint64
	entries []Entry
	bytes   int64 // memory charged against the tail bound
}

func (c *chunk) end() uint64 { return c.first + uint64(len(c.entries)) }

// tail is the dispatcher's hot read path: the decoded entries of a contiguous seq range
// [lo, hi) that are still above the checkpoint. Batches are added while the total stays within
// limit and they extend the range; once one batch is skipped the tail stops growing until the
// checkpoint drains it, so seqs outside the range are read from disk. Guarded by WAL.mu.
type tail struct {
	chunks []*chunk
	bytes  int64
	limit  int64 // < 0: disabled
}

// add retains c if it extends the range and fits the bound; it reports whether it did.
func (t *tail) add(c *chunk) bool {
	if t.limit < 0 || t.bytes+c.bytes > t.limit {
		return false
	}
	if n := len(t.chunks); n > 0 && t.chunks[n-1].end() != c.first {
		return false
	}
	t.chunks = append(t.chunks, c)
	t.bytes += c.bytes
	return true
}

// dropBelow releases chunks whose every seq is below cp.
func (t *tail) dropBelow(cp uint64) {
	k := 0
	for k < len(t.chunks) && t.chunks[k].end() <= cp {
		t.bytes -= t.chunks[k].bytes
		k++
	}
	if k == 0 {
		return
	}
	n := copy(t.chunks, t.chunks[k:])
	clear(t.chunks[n:])
	t.chunks = t.chunks[:n]
}

// bounds returns the range [lo, hi) the tail holds (lo == hi when empty).
func (t *tail) bounds() (lo, hi uint64) {
	if len(t.chunks) == 0 {
		return 0, 0
	}
	return t.chunks[0].first, t.chunks[len(t.chunks)-1].end()
}

// read appends up to max entries starting at seq to dst; seq must lie in bounds().
func (t *tail) read(dst []Entry, seq uint64, max int) []Entry {
	i := sort.Search(len(t.chunks), func(i int) bool { return t.chunks[i].end() > seq })
	for ; i < len(t.chunks) && max > 0; i++ {
		c := t.chunks[i]
		es := c.entries[seq-c.first:]
		if len(es) > max {
			es = es[:max]
		}
		dst = append(dst, es...)
		max -= len(es)
		seq += uint64(len(es))
	}
	return dst
}
