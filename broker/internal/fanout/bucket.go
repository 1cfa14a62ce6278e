package fanout

import (
	"hash/fnv"
	"sync/atomic"

	plog "narad.dev/broker/internal/log"
)

// placement decides the child partition of each record of one commit round (docs/internals/fanout.md §6.1,
// bucketing and keyless records).
type placement struct {
	partitions int            // the child's current partition count (> 0)
	keepIndex  bool           // keyless records keep the parent partition index (counts match)
	parentIdx  int            // the parent partition this cursor tails
	rr         *atomic.Uint32 // round-robin counter of the child topic, for keyless records
}

// target returns the child partition of e: FNV-1a-32(key) mod partitions for a keyed record;
// for a keyless one the parent index when the counts match, else the child's round-robin.
func (pl placement) target(e plog.Entry) int {
	n := uint32(pl.partitions)
	if len(e.Key) > 0 {
		h := fnv.New32a()
		h.Write(e.Key)
		return int(h.Sum32() % n)
	}
	if pl.keepIndex {
		return pl.parentIdx
	}
	return int(pl.rr.Add(1) % n)
}

// hasKeyless reports whether any entry has no key.
func hasKeyless(es []plog.Entry) bool {
	for _, e := range es {
		if len(e.Key) == 0 {
			return true
		}
	}
	return false
}

// bucketize splits entries by child partition with a counting sort: buckets[p] holds the
// entries placed in p in their slab order (hence per-key order); targets[i] is entry i's
// partition. The buckets share one backing array; entries are not copied.
func bucketize(entries []plog.Entry, pl placement) (buckets [][]plog.Entry, targets []int) {
	targets = make([]int, len(entries))
	counts := make([]int, pl.partitions+1)
	for i, e := range entries {
		p := pl.target(e)
		targets[i] = p
		counts[p+1]++
	}
	for p := 1; p <= pl.partitions; p++ {
		counts[p] += counts[p-1] // counts[p] = start of bucket p
	}
	out := make([]plog.Entry, len(entries))
	fill := append([]int(nil), counts[:pl.partitions]...)
	for i, e := range entries {
		out[fill[targets[i]]] = e
		fill[targets[i]]++
	}
	buckets = make([][]plog.Entry, pl.partitions)
	for p := range buckets {
		if lo, hi := counts[p], counts[p+1]; hi > lo {
			buckets[p] = out[lo:hi:hi]
		}
	}
	return buckets, targets
}

// entriesOf turns slab records into commit entries without copying: they alias the parent
// log's decoded frames, which the child commit copies (docs/internals/fanout.md §7).
func entriesOf(recs []plog.Record) []plog.Entry {
	es := make([]plog.Entry, len(recs))
	for i, r := range recs {
		es[i] = plog.Entry{Key: r.Key, Payload: r.Payload}
	}
	return es
}

// cloneEntry copies e off the parent log's buffers, so held records do not pin them during a
// long outage (docs/internals/fanout.md §6.2).
func cloneEntry(e plog.Entry) plog.Entry {
	var c plog.Entry
	if len(e.Key) > 0 {
		c.Key = append([]byte(nil), e.Key...)
	}
	c.Payload = append([]byte{}, e.Payload...)
	return c
}
