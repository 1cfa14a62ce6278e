package consume

// Typed binary min-heaps for the shard. container/heap boxes every element in an interface,
// which allocates on each push; these do not (beyond amortized slice growth).

// expiryEntry is one lease deadline. An entry is live only while the reservation at offset
// still carries the same nonce and deadline; extend, ack and nack leave stale entries behind
// that are skipped on pop (docs/internals/consume-and-leases.md §2).
type expiryEntry struct {
	expiresAt int64 // unix ms
	offset    int64
	nonce     uint64
}

func (a expiryEntry) less(b expiryEntry) bool {
	if a.expiresAt != b.expiresAt {
		return a.expiresAt < b.expiresAt
	}
	return a.offset < b.offset
}

// expiryHeap orders lease deadlines, earliest first.
type expiryHeap []expiryEntry

func (h *expiryHeap) push(e expiryEntry) {
	*h = append(*h, e)
	s := *h
	i := len(s) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !s[i].less(s[p]) {
			break
		}
		s[i], s[p] = s[p], s[i]
		i = p
	}
}

func (h *expiryHeap) pop() expiryEntry {
	s := *h
	top := s[0]
	n := len(s) - 1
	s[0] = s[n]
	*h = s[:n]
	h.down(0)
	return top
}

func (h expiryHeap) down(i int) {
	n := len(h)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		m := l
		if r := l + 1; r < n && h[r].less(h[l]) {
			m = r
		}
		if !h[m].less(h[i]) {
			return
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
}

// init restores the heap property after the slice was rewritten in place.
func (h expiryHeap) init() {
	for i := len(h)/2 - 1; i >= 0; i-- {
		h.down(i)
	}
}

// offsetHeap is a min-heap of offsets: the released offsets (expired or nacked leases) below
// the shard's fresh cursor, which must be handed out again before anything newer.
type offsetHeap []int64

func (h *offsetHeap) push(o int64) {
	*h = append(*h, o)
	s := *h
	i := len(s) - 1
	for i > 0 {
		p := (i - 1) / 2
		if s[i] >= s[p] {
			break
		}
		s[i], s[p] = s[p], s[i]
		i = p
	}
}

func (h *offsetHeap) pop() int64 {
	s := *h
	top := s[0]
	n := len(s) - 1
	s[0] = s[n]
	s = s[:n]
	*h = s
	i := 0
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		m := l
		if r := l + 1; r < n && s[r] < s[l] {
			m = r
		}
		if s[i] <= s[m] {
			break
		}
		s[i], s[m] = s[m], s[i]
		i = m
	}
	return top
}
