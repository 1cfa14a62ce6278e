package consume

import (
	"errors"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestPC13SingleLiveHolder runs 50 consumers against one shard and checks, with bookkeeping
// kept under its own lock, that no offset is ever handed to a second holder while a first
// one holds it, and that every offset ends up acked exactly once.
func TestPC13SingleLiveHolder(t *testing.T) {
	const (
		consumers = 50
		total     = 3000
	)
	src := newSource(total)
	s, err := OpenShard(0, t.TempDir(), src, ShardOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	l := Limits{VisibilityTimeout: time.Hour, MaxInFlight: 64, MaxAckedAhead: 16}

	var (
		bk      sync.Mutex
		holder  = map[int64]int{}
		acked   = map[int64]int{}
		badOnce sync.Once
		bad     error
		failed  atomic.Bool
	)
	fail := func(err error) {
		badOnce.Do(func() { bad = err })
		failed.Store(true)
	}
	done := func() bool { return s.State().Committed == total-1 }

	var wg sync.WaitGroup
	deadline := time.Now().Add(30 * time.Second)
	for g := 1; g <= consumers; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 7))
			var pending []Delivery
			for !done() && time.Now().Before(deadline) && !failed.Load() {
				ds, _ := s.Reserve(l, 1+rng.IntN(3), 0)
				bk.Lock()
				for _, d := range ds {
					if h := holder[d.Handle.Offset]; h != 0 {
						fail(errors.New("offset held by two live leases"))
					}
					holder[d.Handle.Offset] = g
				}
				bk.Unlock()
				pending = append(pending, ds...)
				kept := pending[:0]
				for _, d := range pending {
					off, nonce := d.Handle.Offset, d.Handle.Nonce
					if rng.IntN(10) == 0 {
						bk.Lock()
						delete(holder, off) // released before the shard can re-issue it
						bk.Unlock()
						if err := s.Nack(off, nonce); err != nil {
							fail(err)
						}
						continue
					}
					switch err := s.Ack(off, nonce, l); {
					case err == nil:
						bk.Lock()
						delete(holder, off)
						acked[off]++
						bk.Unlock()
					case errors.Is(err, ErrAckedAheadFull):
						kept = append(kept, d) // lease kept: retry later
					default:
						fail(err)
					}
				}
				pending = kept
				if len(ds) == 0 {
					runtime.Gosched()
				}
			}
		}(g)
	}
	wg.Wait()
	if bad != nil {
		t.Fatal(bad)
	}
	if !done() {
		t.Fatalf("did not finish: %+v", s.State())
	}
	for o := int64(0); o < total; o++ {
		if acked[o] != 1 {
			t.Fatalf("offset %d acked %d times", o, acked[o])
		}
	}
	if st := s.State(); st.InFlight != 0 || st.AckedAhead != 0 {
		t.Fatalf("leftover state %+v", st)
	}
}

func TestReserveAckAllocatesOnlyTheResult(t *testing.T) {
	s, err := OpenShard(0, t.TempDir(), newSource(1<<40), ShardOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	l := Limits{VisibilityTimeout: time.Minute, MaxInFlight: 1024, MaxAckedAhead: 1024}
	// Warm up the map and heaps.
	for i := 0; i < 5000; i++ {
		ds, _ := s.Reserve(l, 1, 0)
		_ = s.Ack(ds[0].Handle.Offset, ds[0].Handle.Nonce, l)
	}
	allocs := testing.AllocsPerRun(2000, func() {
		ds, _ := s.Reserve(l, 1, 0)
		_ = s.Ack(ds[0].Handle.Offset, ds[0].Handle.Nonce, l)
	})
	if allocs > 1.05 {
		t.Fatalf("reserve+ack allocates %.2f per call, want only the result slice", allocs)
	}
}

// BenchmarkReserveAck is the hot path: one reserve and one in-order ack.
func BenchmarkReserveAck(b *testing.B) {
	s, err := OpenShard(0, b.TempDir(), newSource(1<<40), ShardOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	l := Limits{VisibilityTimeout: 30 * time.Second, MaxInFlight: 1024, MaxAckedAhead: 1024}
	b.ReportAllocs()
	for b.Loop() {
		ds, _ := s.Reserve(l, 1, 0)
		if err := s.Ack(ds[0].Handle.Offset, ds[0].Handle.Nonce, l); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkReserveAckParallel contends on one shard from GOMAXPROCS goroutines. Acks land out
// of order, so some reserves are Capped while the frontier hole's holder catches up.
func BenchmarkReserveAckParallel(b *testing.B) {
	s, err := OpenShard(0, b.TempDir(), newSource(1<<40), ShardOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	l := Limits{VisibilityTimeout: 30 * time.Second, MaxInFlight: 1024, MaxAckedAhead: 1024}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			ds, _ := s.Reserve(l, 1, 0)
			for _, d := range ds {
				for {
					err := s.Ack(d.Handle.Offset, d.Handle.Nonce, l)
					if err == nil {
						break
					}
					if !errors.Is(err, ErrAckedAheadFull) {
						b.Fatal(err)
					}
					runtime.Gosched() // the frontier hole's holder always gets through
				}
			}
		}
	})
}
