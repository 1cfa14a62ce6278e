package consume

import (
	"errors"
	"testing"
	"time"
)

var lim = Limits{VisibilityTimeout: 10 * time.Second, MaxInFlight: 100, MaxAckedAhead: 100}

func TestReserveBeforeReadLeaseExistsAtRead(t *testing.T) {
	fx := newFixture(t, 5)
	checked := 0
	fx.src.onRead = func(off int64) {
		fx.s.mu.Lock()
		_, ok := fx.s.reservations[off]
		fx.s.mu.Unlock()
		if !ok {
			t.Errorf("offset %d read before it was reserved", off)
		}
		checked++
	}
	fx.mustReserve(lim, 5, 0, 1, 2, 3, 4)
	if checked != 5 {
		t.Fatalf("reads = %d, want 5", checked)
	}
}

func TestNonceStrictlyIncreasingAndSeededFromClock(t *testing.T) {
	fx := newFixture(t, 1000)
	seed := uint64(fx.clock.Now().UnixMilli()) * 1024
	var prev uint64
	for i := 0; i < 50; i++ {
		ds := fx.mustReserve(lim, 2, int64(2*i), int64(2*i+1))
		for _, d := range ds {
			if d.Handle.Nonce <= prev || d.Handle.Nonce <= seed {
				t.Fatalf("nonce %d not above previous %d / seed %d", d.Handle.Nonce, prev, seed)
			}
			prev = d.Handle.Nonce
			if err := fx.ack(d, lim); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func TestPC14StaleHandleAfterExpiryAndReReserve(t *testing.T) {
	fx := newFixture(t, 3)
	old := fx.mustReserve(lim, 1, 0)[0]
	fx.clock.Advance(lim.VisibilityTimeout) // lease lapses exactly at its deadline
	fresh := fx.mustReserve(lim, 1, 0)[0]
	if fresh.Handle.Nonce <= old.Handle.Nonce {
		t.Fatalf("re-reservation reused nonce %d", fresh.Handle.Nonce)
	}
	for _, op := range []struct {
		name string
		do   func() error
	}{
		{"ack", func() error { return fx.ack(old, lim) }},
		{"extend", func() error { return fx.s.Extend(old.Handle.Offset, old.Handle.Nonce, lim) }},
		{"nack", func() error { return fx.s.Nack(old.Handle.Offset, old.Handle.Nonce) }},
	} {
		if err := op.do(); !errors.Is(err, ErrStale) {
			t.Fatalf("%s with expired handle = %v, want ErrStale", op.name, err)
		}
	}
	if got := fx.obs.stale.Load(); got != 3 {
		t.Fatalf("stale rejections = %d, want 3", got)
	}
	if err := fx.ack(fresh, lim); err != nil {
		t.Fatalf("new holder's ack: %v", err)
	}
	if err := fx.ack(fresh, lim); !errors.Is(err, ErrStale) {
		t.Fatalf("second ack = %v, want ErrStale", err)
	}
	if st := fx.s.State(); st.Committed != 0 || st.InFlight != 0 {
		t.Fatalf("state %+v, want committed 0, nothing in flight", st)
	}
}

func TestPC15AckedAheadCapServesOnlyFrontierHole(t *testing.T) {
	fx := newFixture(t, 10)
	l := Limits{VisibilityTimeout: time.Minute, MaxInFlight: 100, MaxAckedAhead: 3}
	ds := fx.mustReserve(l, 6, 0, 1, 2, 3, 4, 5)
	for _, d := range ds[1:4] {
		if err := fx.ack(d, l); err != nil {
			t.Fatalf("ack %d: %v", d.Handle.Offset, err)
		}
	}
	// Window full: an out-of-order ack is refused and its lease kept.
	if err := fx.ack(ds[4], l); !errors.Is(err, ErrAckedAheadFull) {
		t.Fatalf("ack 4 with full window = %v, want ErrAckedAheadFull", err)
	}
	if fx.obs.capped.Load() != 1 {
		t.Fatalf("cap rejections = %d, want 1", fx.obs.capped.Load())
	}
	if err := fx.s.Extend(4, ds[4].Handle.Nonce, l); err != nil {
		t.Fatalf("lease of 4 not kept: %v", err)
	}
	// The frontier hole (0) is out, so nothing else is handed out.
	if got, out := fx.reserve(l, 5); out != Capped || len(got) != 0 {
		t.Fatalf("reserve with hole out = %v %v, want capped", offsetsOf(got), out)
	}
	// Release the hole: only it comes back, even when more are asked for.
	if err := fx.s.Nack(0, ds[0].Handle.Nonce); err != nil {
		t.Fatal(err)
	}
	hole := fx.mustReserve(l, 5, 0)[0]
	if err := fx.ack(hole, l); err != nil {
		t.Fatalf("ack hole: %v", err)
	}
	if st := fx.s.State(); st.Committed != 3 || st.AckedAhead != 0 {
		t.Fatalf("after acking the hole: %+v, want committed 3 and empty window", st)
	}
	if err := fx.ack(ds[4], l); err != nil {
		t.Fatalf("retried ack 4: %v", err)
	}
	if st := fx.s.State(); st.Committed != 4 {
		t.Fatalf("committed %d, want 4", st.Committed)
	}
}

func TestPC16InFlightCapUntilAck(t *testing.T) {
	fx := newFixture(t, 10)
	l := Limits{VisibilityTimeout: time.Minute, MaxInFlight: 3, MaxAckedAhead: 100}
	ds := fx.mustReserve(l, 10, 0, 1, 2)
	for i := 0; i < 3; i++ {
		if got, out := fx.reserve(l, 1); out != Capped || len(got) != 0 {
			t.Fatalf("reserve at cap = %v %v, want capped", offsetsOf(got), out)
		}
	}
	if err := fx.ack(ds[1], l); err != nil {
		t.Fatal(err)
	}
	fx.mustReserve(l, 10, 3)
	// A cap lowered live takes effect on the next call.
	l.MaxInFlight = 2
	if _, out := fx.reserve(l, 1); out != Capped {
		t.Fatalf("lowered cap: outcome %v, want capped", out)
	}
}

func TestPC17ExtendPushesExpiryFromCurrentTimeout(t *testing.T) {
	fx := newFixture(t, 2)
	d := fx.mustReserve(lim, 1, 0)[0]
	fx.clock.Advance(8 * time.Second)
	if err := fx.s.Extend(0, d.Handle.Nonce, lim); err != nil {
		t.Fatal(err)
	}
	if fx.obs.extended.Load() != 1 {
		t.Fatal("extend not counted")
	}
	fx.clock.Advance(8 * time.Second) // past the original deadline (10 s)
	if n := fx.s.PurgeExpired(); n != 0 {
		t.Fatalf("purged %d leases before the extended deadline", n)
	}
	// The stale heap entry from the first deadline must not release the lease; 1 is served.
	fx.mustReserve(Limits{VisibilityTimeout: time.Minute, MaxInFlight: 10, MaxAckedAhead: 10}, 5, 1)
	fx.clock.Advance(2 * time.Second) // 18 s = 8 + 10: extended deadline reached
	if n := fx.s.PurgeExpired(); n != 1 {
		t.Fatalf("purged %d, want the extended lease", n)
	}
	if err := fx.ack(d, lim); !errors.Is(err, ErrStale) {
		t.Fatalf("ack after extended expiry = %v, want ErrStale", err)
	}
}

func TestPC17ExtendKeepsHandleAndUsesLiveTimeout(t *testing.T) {
	fx := newFixture(t, 1)
	d := fx.mustReserve(lim, 1, 0)[0]
	long := lim
	long.VisibilityTimeout = time.Hour
	if err := fx.s.Extend(0, d.Handle.Nonce, long); err != nil {
		t.Fatal(err)
	}
	fx.clock.Advance(59 * time.Minute)
	if err := fx.ack(d, lim); err != nil {
		t.Fatalf("same handle after extend: %v", err)
	}
}

func TestPC17NackReleasesAtOnceAndBroadcasts(t *testing.T) {
	fx := newFixture(t, 3)
	ds := fx.mustReserve(lim, 2, 0, 1)
	before := fx.src.broadcasts.Load()
	if err := fx.s.Nack(1, ds[1].Handle.Nonce); err != nil {
		t.Fatal(err)
	}
	if fx.src.broadcasts.Load() != before+1 {
		t.Fatal("nack did not broadcast")
	}
	if fx.obs.nacked.Load() != 1 {
		t.Fatal("nack not counted")
	}
	// The released offset comes back before the untouched one, with a new nonce.
	again := fx.mustReserve(lim, 2, 1, 2)
	if again[0].Handle.Nonce <= ds[1].Handle.Nonce {
		t.Fatal("re-reservation after nack reused a nonce")
	}
	if err := fx.s.Nack(1, ds[1].Handle.Nonce); !errors.Is(err, ErrStale) {
		t.Fatalf("nacked handle still live: %v", err)
	}
}

func TestExpiryPurgeReleasesAndBroadcasts(t *testing.T) {
	fx := newFixture(t, 4)
	ds := fx.mustReserve(lim, 3, 0, 1, 2)
	if err := fx.ack(ds[1], lim); err != nil {
		t.Fatal(err)
	}
	fx.clock.Advance(lim.VisibilityTimeout - time.Millisecond)
	before := fx.src.broadcasts.Load()
	if n := fx.s.PurgeExpired(); n != 0 || fx.src.broadcasts.Load() != before {
		t.Fatalf("purge before deadline released %d", n)
	}
	fx.clock.Advance(time.Millisecond)
	if n := fx.s.PurgeExpired(); n != 2 {
		t.Fatalf("purge released %d, want 2 (acked lease's heap entry is stale)", n)
	}
	if fx.src.broadcasts.Load() != before+1 {
		t.Fatal("purge did not broadcast")
	}
	if st := fx.s.State(); st.InFlight != 0 {
		t.Fatalf("in flight %d after purge", st.InFlight)
	}
	fx.mustReserve(lim, 5, 0, 2, 3)
}

func TestReserveServesLowestFreeOffset(t *testing.T) {
	fx := newFixture(t, 10)
	ds := fx.mustReserve(lim, 6, 0, 1, 2, 3, 4, 5)
	for _, i := range []int{4, 2} {
		if err := fx.s.Nack(ds[i].Handle.Offset, ds[i].Handle.Nonce); err != nil {
			t.Fatal(err)
		}
	}
	if err := fx.ack(ds[3], lim); err != nil {
		t.Fatal(err)
	}
	fx.mustReserve(lim, 3, 2, 4, 6)
}

func TestPC19HandleFromPreviousShardNeverValidates(t *testing.T) {
	fx := newFixture(t, 5)
	first := fx.mustReserve(lim, 5, 0, 1, 2, 3, 4)
	var maxOld uint64
	for _, d := range first {
		maxOld = max(maxOld, d.Handle.Nonce)
	}
	if err := fx.s.Close(); err != nil {
		t.Fatal(err)
	}
	for _, gap := range []time.Duration{0, time.Second} {
		fx.clock.Advance(gap)
		s2 := fx.open()
		ds, out := s2.Reserve(lim, 5, 0)
		if out != Reserved || len(ds) != 5 {
			t.Fatalf("gap %v: reserve on new shard = %d %v", gap, len(ds), out)
		}
		for i, d := range ds {
			if d.Handle.Nonce <= maxOld {
				t.Fatalf("gap %v: new nonce %d not above old %d", gap, d.Handle.Nonce, maxOld)
			}
			old := first[i].Handle
			if err := s2.Ack(old.Offset, old.Nonce, lim); !errors.Is(err, ErrStale) {
				t.Fatalf("gap %v: old handle %v on new shard = %v, want ErrStale", gap, old, err)
			}
		}
		for _, d := range ds {
			maxOld = max(maxOld, d.Handle.Nonce)
		}
		if err := s2.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

func TestClosedShardRejectsEverything(t *testing.T) {
	fx := newFixture(t, 5)
	d := fx.mustReserve(lim, 1, 0)[0]
	if err := fx.s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := fx.ack(d, lim); !errors.Is(err, ErrStale) {
		t.Fatalf("ack on closed shard = %v, want ErrStale", err)
	}
	if ds, out := fx.reserve(lim, 1); len(ds) != 0 || out != Empty {
		t.Fatalf("reserve on closed shard = %v %v", offsetsOf(ds), out)
	}
}

func TestPC21CorruptSkipAdvancesFrontier(t *testing.T) {
	cases := []struct {
		name          string
		corrupt       []int64
		want          []int64 // delivered by one Reserve(…, 3)
		ack           []int64 // acked afterwards, in order
		wantCommitted int64
	}{
		{"at the frontier", []int64{0, 1}, []int64{2, 3, 4}, nil, 1},
		{"above the frontier", []int64{2, 3}, []int64{0, 1, 4}, []int64{1, 0}, 3},
		{"run up to the hwm", []int64{1, 2, 3, 4, 5}, []int64{0}, []int64{0}, 5},
		{"everything", []int64{0, 1, 2, 3, 4, 5}, nil, nil, 5},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fx := newFixture(t, 6)
			for _, o := range tc.corrupt {
				fx.src.corrupt[o] = true
			}
			ds, out := fx.reserve(lim, 3)
			if !equalOffsets(offsetsOf(ds), tc.want) {
				t.Fatalf("delivered %v (%v), want %v", offsetsOf(ds), out, tc.want)
			}
			for _, o := range tc.ack {
				for _, d := range ds {
					if d.Handle.Offset == o {
						if err := fx.ack(d, lim); err != nil {
							t.Fatal(err)
						}
					}
				}
			}
			if got := fx.obs.corrupt.Load(); got != int64(len(tc.corrupt)) {
				t.Fatalf("corrupt skipped = %d, want %d", got, len(tc.corrupt))
			}
			if st := fx.s.State(); st.Committed != tc.wantCommitted {
				t.Fatalf("committed %d, want %d (%+v)", st.Committed, tc.wantCommitted, st)
			}
			// Never re-reserved.
			more, _ := fx.reserve(lim, 10)
			for _, d := range more {
				if fx.src.corrupt[d.Handle.Offset] {
					t.Fatalf("corrupt offset %d handed out again", d.Handle.Offset)
				}
			}
		})
	}
}

func TestAgedOutOffsetsJumpFrontier(t *testing.T) {
	fx := newFixture(t, 10)
	ds := fx.mustReserve(lim, 4, 0, 1, 2, 3)
	if err := fx.ack(ds[2], lim); err != nil {
		t.Fatal(err)
	}
	fx.src.set(func(f *fakeSource) { f.oldest = 5 })
	fx.mustReserve(lim, 1, 5)
	if st := fx.s.State(); st.Committed != 4 || st.AckedAhead != 0 {
		t.Fatalf("after aging out: %+v, want committed 4, no acked-ahead", st)
	}
	// 0,1,3 were out (delivered) and 4 was never delivered; 2 was acked.
	if got := fx.obs.agedOut.Load(); got != 4 {
		t.Fatalf("aged out = %d, want 4", got)
	}
	// A lease on an aged-out offset can still be acked (it is already resolved).
	if err := fx.ack(ds[0], lim); err != nil {
		t.Fatalf("ack of aged-out lease: %v", err)
	}
	if st := fx.s.State(); st.Committed != 4 {
		t.Fatalf("frontier moved to %d", st.Committed)
	}
}

func TestAgedOutAtReadResolvesAndContinues(t *testing.T) {
	fx := newFixture(t, 5)
	fx.src.onRead = func(off int64) {
		if off == 0 {
			fx.src.set(func(f *fakeSource) { f.oldest = 2 })
		}
	}
	ds, _ := fx.reserve(lim, 2)
	// 0 and 1 aged out between reserve and read; the call goes on to 2 and 3.
	for _, d := range ds {
		if d.Handle.Offset < 2 {
			t.Fatalf("aged-out offset %d delivered", d.Handle.Offset)
		}
	}
	if len(ds) != 2 || fx.s.State().Committed != 1 {
		t.Fatalf("delivered %v, state %+v", offsetsOf(ds), fx.s.State())
	}
}

func TestTransientReadErrorReleasesLease(t *testing.T) {
	fx := newFixture(t, 3)
	fx.src.transient[1] = true
	ds, out := fx.reserve(lim, 3)
	if !equalOffsets(offsetsOf(ds), []int64{0, 2}) || out != Reserved {
		t.Fatalf("delivered %v %v, want [0 2]", offsetsOf(ds), out)
	}
	if st := fx.s.State(); st.InFlight != 2 {
		t.Fatalf("in flight %d, want 2", st.InFlight)
	}
	delete(fx.src.transient, 1)
	fx.mustReserve(lim, 3, 1)
}

func TestFrozenHandsOutNothingButAcksWork(t *testing.T) {
	fx := newFixture(t, 5)
	d := fx.mustReserve(lim, 1, 0)[0]
	fx.s.SetFrozen(true)
	if ds, out := fx.reserve(lim, 1); out != Frozen || len(ds) != 0 {
		t.Fatalf("frozen reserve = %v %v", offsetsOf(ds), out)
	}
	if err := fx.ack(d, lim); err != nil {
		t.Fatalf("ack while frozen: %v", err)
	}
	before := fx.src.broadcasts.Load()
	fx.s.SetFrozen(false)
	if fx.src.broadcasts.Load() != before+1 {
		t.Fatal("freeze end did not wake waiters")
	}
	fx.mustReserve(lim, 1, 1)
}

func TestEmptyAtHighWatermark(t *testing.T) {
	fx := newFixture(t, 0)
	if ds, out := fx.reserve(lim, 1); out != Empty || ds != nil {
		t.Fatalf("reserve on empty log = %v %v", ds, out)
	}
	fx.src.set(func(f *fakeSource) { f.hwm = 1 })
	fx.mustReserve(lim, 5, 0)
	if _, out := fx.reserve(lim, 1); out != Empty {
		t.Fatalf("outcome %v, want empty", out)
	}
}

func TestReserveStopsAtTheByteBoundAndReleasesTheRest(t *testing.T) {
	fx := newFixture(t, 10)
	fx.src.size = func(off int64) int {
		if off == 0 {
			return 300 // larger than the bound alone: still handed out, on its own
		}
		return 100
	}
	small := Limits{VisibilityTimeout: lim.VisibilityTimeout, MaxBytes: 250}
	fx.mustReserve(small, 10, 0)
	before := fx.src.broadcasts.Load()
	ds := fx.mustReserve(small, 10, 1, 2)
	if fx.src.broadcasts.Load() == before {
		t.Fatal("releasing the leases past the bound woke no waiter")
	}
	if st := fx.s.State(); st.InFlight != 3 {
		t.Fatalf("in flight %d, want 3: the leases past the bound were kept", st.InFlight)
	}
	// The released offsets come back first, to the next call, with no lease to wait out.
	fx.mustReserve(small, 1, 3)
	if err := fx.ack(ds[0], lim); err != nil {
		t.Fatalf("ack of a message within the bound: %v", err)
	}
	// An answer that other partitions filled to 200 bytes has room for no 100-byte record:
	// nothing, and the lease taken to read it is released.
	if ds, out := fx.s.Reserve(small, 10, 200); len(ds) != 0 || out == Reserved {
		t.Fatalf("reserved %v into a full answer (outcome %v)", offsetsOf(ds), out)
	}
	if ds, _ := fx.s.Reserve(small, 10, 100); !equalOffsets(offsetsOf(ds), []int64{4}) {
		t.Fatalf("reserved %v into an answer holding 100 bytes, want [4]", offsetsOf(ds))
	}
	// Without a bound of its own, a call takes DefaultMaxBytes: all of what is left here.
	fx.mustReserve(lim, 10, 5, 6, 7, 8, 9)
}

func TestDefaultByteBoundCapsOneReserve(t *testing.T) {
	fx := newFixture(t, 100)
	fx.src.size = func(int64) int { return 1 << 20 }
	ds, _ := fx.reserve(lim, 100)
	if len(ds) != DefaultMaxBytes>>20 {
		t.Fatalf("reserved %d messages of 1 MiB, want %d (DefaultMaxBytes)", len(ds), DefaultMaxBytes>>20)
	}
}

// Limits.Take is asked for every message before it joins the answer; a refusal ends the
// answer there, also before its first message, and the leases past it go back at once.
func TestReserveStopsWhereTakeRefuses(t *testing.T) {
	fx := newFixture(t, 10)
	fx.src.size = func(int64) int { return 100 }
	budget := 250
	var asked []int
	budgeted := lim
	budgeted.Take = func(n int) bool {
		asked = append(asked, n)
		if n > budget {
			return false
		}
		budget -= n
		return true
	}
	fx.mustReserve(budgeted, 10, 0, 1)
	if len(asked) != 3 || asked[0] != 100 {
		t.Fatalf("Take asked %v, want 100 bytes for each of three messages", asked)
	}
	if st := fx.s.State(); st.InFlight != 2 {
		t.Fatalf("in flight %d, want 2: the leases past the refusal were kept", st.InFlight)
	}
	if ds, out := fx.s.Reserve(budgeted, 10, 0); len(ds) != 0 || out == Reserved {
		t.Fatalf("reserved %v with nothing left to take (outcome %v)", offsetsOf(ds), out)
	}
	budget = 1000
	fx.mustReserve(budgeted, 1, 2) // the refused offsets come back first
}
