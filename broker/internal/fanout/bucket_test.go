package fanout

import (
	"hash/fnv"
	"sync/atomic"
	"testing"
	"time"

	plog "narad.dev/broker/internal/log"
	"narad.dev/broker/internal/testwait"
)

func TestBucketizeKeyedByFNV1a32KeepsSlabOrder(t *testing.T) {
	var es []plog.Entry
	for i := 0; i < 200; i++ {
		es = append(es, plog.Entry{Key: keyed(i % 17), Payload: keyed(i)})
	}
	buckets, targets := bucketize(es, placement{partitions: 5})
	last := map[int]int{}
	total := 0
	for p, b := range buckets {
		total += len(b)
		for _, e := range b {
			h := fnv.New32a()
			h.Write(e.Key)
			if int(h.Sum32()%5) != p {
				t.Fatalf("key %s in partition %d, want FNV-1a-32 mod 5", e.Key, p)
			}
			i := atoiM(string(e.Payload))
			if prev, ok := last[p]; ok && i <= prev {
				t.Fatalf("bucket %d out of slab order: %d after %d", p, i, prev)
			}
			last[p] = i
		}
	}
	if total != len(es) || len(targets) != len(es) {
		t.Fatalf("bucketed %d of %d", total, len(es))
	}
}

func TestKeylessKeepsParentIndexWhenCountsMatch(t *testing.T) {
	h, _, cfg, _ := setup(t, 3)
	dir := openParent(t, h, t.TempDir(), 2, plog.Options{})
	h.set(func(h *fakeHost) { h.parentParts = 3 })
	produce(t, h.logs[2], 0, 12, keyless, 1000)
	d := desired(dir, []int64{0, 0, 0})
	d.Partition = 2
	startCursor(t, cfg, d)
	testwait.For(t, 10*time.Second, "advance", fileAt(t, dir, 12))
	got := h.payloads(2)
	if len(got) != 12 || len(h.payloads(0))+len(h.payloads(1)) != 0 {
		t.Fatalf("keyless records landed %v / %v / %v, want all in child partition 2", h.payloads(0), h.payloads(1), got)
	}
	for i, s := range got {
		if atoiM(s) != i {
			t.Fatalf("keyless order lost: %v", got)
		}
	}
}

func TestKeylessRoundRobinsWhenCountsDifferAndAfreshOnRetry(t *testing.T) {
	rr := new(atomic.Uint32)
	es := make([]plog.Entry, 8)
	buckets, _ := bucketize(es, placement{partitions: 4, parentIdx: 1, rr: rr})
	for p, b := range buckets {
		if len(b) != 2 {
			t.Fatalf("partition %d got %d keyless records, want round-robin 2 each", p, len(b))
		}
	}
	_, t1 := bucketize(es[:1], placement{partitions: 4, rr: rr})
	_, t2 := bucketize(es[:1], placement{partitions: 4, rr: rr})
	if t1[0] == t2[0] {
		t.Fatalf("a retried keyless record was placed on the same partition %d again", t1[0])
	}
}
