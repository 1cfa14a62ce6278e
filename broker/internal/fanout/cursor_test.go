package fanout

import (
	"context"
	"errors"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"narad.dev/broker/internal/fanout/cursorfile"
	"narad.dev/broker/internal/faults"
	plog "narad.dev/broker/internal/log"
	"narad.dev/broker/internal/testwait"
)

const epoch = "67953471cc57a32a"

// setup returns a host with parent "orders" partition 0 (real log), child "an" with n
// partitions, linked at epoch in the replica and at the leader.
func setup(t *testing.T, childParts int) (*fakeHost, *fakeObserver, Config, string) {
	t.Helper()
	h, obs := newFakeHost(), newFakeObserver()
	dir := openParent(t, h, t.TempDir(), 0, plog.Options{})
	h.set(func(h *fakeHost) {
		h.childParts["an"] = childParts
		h.links["orders/an"] = epoch
		h.leader["orders/an"] = epoch
	})
	return h, obs, testConfig(h, obs), dir
}

func desired(dir string, offs []int64) Desired {
	return Desired{Parent: "orders", Partition: 0, Child: "an", Epoch: epoch, AttachOffsets: offs, Dir: dir}
}

func fileState(t *testing.T, dir string) (cursorfile.State, error) {
	t.Helper()
	return cursorfile.Read(context.Background(), cursorfile.Path(dir, "an"))
}

func fileAt(t *testing.T, dir string, want int64) func() bool {
	return func() bool {
		st, err := fileState(t, dir)
		return err == nil && st.NextOffset == want
	}
}

func TestCommitBeforeAdvanceFailingBucketNeverLetsTheFilePassTheSlab(t *testing.T) {
	h, _, cfg, dir := setup(t, 2)
	produce(t, h.logs[0], 0, 20, keyed, 1000)
	h.set(func(h *fakeHost) {
		h.fail = func(p, _ int) error {
			if p == 1 {
				return errDown
			}
			return nil
		}
	})
	startCursor(t, cfg, desired(dir, []int64{0}))
	testwait.For(t, 10*time.Second, "several retry rounds", func() bool { h.mu.Lock(); defer h.mu.Unlock(); return h.attempts[1] >= 9 })
	st, err := fileState(t, dir)
	if err != nil || st.NextOffset != 0 {
		t.Fatalf("cursor file = %+v, %v; want next_offset 0 while a bucket fails", st, err)
	}
	h.set(func(h *fakeHost) { h.fail = nil })
	testwait.For(t, 10*time.Second, "advance after recovery", fileAt(t, dir, 20))
	if got := len(h.all()); got != 20 {
		t.Fatalf("child received %d records, want 20", got)
	}
}

func TestCommitBeforeAdvanceFaultAfterChildCommitThenRestartDuplicatesNeverGaps(t *testing.T) {
	t.Cleanup(faults.Reset)
	h, _, cfg, dir := setup(t, 2)
	produce(t, h.logs[0], 0, 10, keyed, 1000)
	faults.Set(FaultAfterChildCommit, faults.ErrInjected)
	_, done := startCursor(t, cfg, desired(dir, []int64{0}))
	if err := <-done; !errors.Is(err, faults.ErrInjected) {
		t.Fatalf("cursor exit = %v, want the injected fault", err)
	}
	if st, err := fileState(t, dir); err != nil || st.NextOffset != 0 {
		t.Fatalf("cursor file = %+v, %v; want the anchor (0) after a crash before the advance", st, err)
	}
	if got := len(h.all()); got != 10 {
		t.Fatalf("child received %d before the crash, want 10", got)
	}
	faults.Reset()
	startCursor(t, cfg, desired(dir, []int64{0}))
	testwait.For(t, 10*time.Second, "advance after restart", fileAt(t, dir, 10))
	count := map[string]int{}
	for _, p := range h.all() {
		count[p]++
	}
	for i := 0; i < 10; i++ {
		if c := count["m"+strconv.Itoa(i)]; c != 2 {
			t.Fatalf("record m%d delivered %d times, want 2 (the slab re-sent, no gap)", i, c)
		}
	}
}

func TestStartTable(t *testing.T) {
	cases := []struct {
		name      string
		partition int
		offs      []int64
		file      *cursorfile.State // pre-existing file
		corrupt   bool
		wantFirst string // first record delivered
		wantFile  int64  // after delivering the 10 records
	}{
		{name: "MissingFileStartsAtAttachOffset", offs: []int64{3}, wantFirst: "m3"},
		{name: "PartitionBeyondAttachOffsetsStartsAtZero", partition: 1, offs: []int64{7}, wantFirst: "m0"},
		{name: "OwnEpochFileIsResumed", offs: []int64{0}, file: &cursorfile.State{Epoch: epoch, NextOffset: 6}, wantFirst: "m6"},
		{name: "EpochMismatchFileIsNotResumed", offs: []int64{4}, file: &cursorfile.State{Epoch: "0000000000000000", NextOffset: 8}, wantFirst: "m4"},
		{name: "CorruptFileAnchorsAtAttachOffset", offs: []int64{5}, corrupt: true, wantFirst: "m5"},
		{name: "LegacyLinkStartsAtTail", offs: nil, wantFirst: "m10"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h, obs, cfg := newFakeHost(), newFakeObserver(), Config{}
			dir := openParent(t, h, t.TempDir(), tc.partition, plog.Options{})
			h.set(func(h *fakeHost) {
				h.parentParts = 2
				h.childParts["an"] = 1
				h.links["orders/an"] = epoch
				h.leader["orders/an"] = epoch
			})
			cfg = testConfig(h, obs)
			lg := h.logs[tc.partition]
			produce(t, lg, 0, 10, keyed, 1000)
			path := cursorfile.Path(dir, "an")
			if tc.file != nil {
				w, err := cursorfile.Anchor(dir, "an", tc.file.Epoch, tc.file.NextOffset)
				if err != nil {
					t.Fatal(err)
				}
				w.Close()
				if tc.file.Epoch == epoch {
					h.set(func(h *fakeHost) { h.leaderErr = errors.New("leader unreachable") })
				}
			}
			if tc.corrupt {
				if err := os.WriteFile(path, make([]byte, cursorfile.RecordSize), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			d := desired(dir, tc.offs)
			d.Partition = tc.partition
			startCursor(t, cfg, d)
			if tc.wantFirst == "m10" {
				testwait.For(t, 10*time.Second, "tail anchor", fileAt(t, dir, 10))
				produce(t, lg, 10, 12, keyed, 1000)
			}
			testwait.For(t, 10*time.Second, "first delivery", func() bool { return len(h.all()) > 0 })
			testwait.For(t, 10*time.Second, "caught up", fileAt(t, dir, lg.HighWatermark()))
			if got := h.payloads(0)[0]; got != tc.wantFirst {
				t.Fatalf("first record = %s, want %s", got, tc.wantFirst)
			}
			st, _ := fileState(t, dir)
			if st.Epoch != epoch {
				t.Fatalf("file epoch = %q, want %q", st.Epoch, epoch)
			}
			if tc.corrupt && obs.get(func(o *fakeObserver) any { return o.corrupt }).(int) != 1 {
				t.Fatal("corrupt cursor file not counted")
			}
			if tc.file != nil && tc.file.Epoch == epoch && h.leaderCalls.Load() != 0 {
				t.Fatal("resuming the own epoch's file asked the leader")
			}
		})
	}
}

func TestUnconfirmedAnchorWritesNoFileAndCursorExits(t *testing.T) {
	cases := []struct {
		name     string
		leaderE  string
		leaderOK bool
		err      error
		oldFile  bool
	}{
		{name: "LeaderUnreachable", err: errors.New("no leader")},
		{name: "LeaderHasOtherEpoch", leaderE: "ffffffffffffffff", leaderOK: true, oldFile: true},
		{name: "LeaderSaysDetached", oldFile: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h, _, cfg, dir := setup(t, 1)
			produce(t, h.logs[0], 0, 5, keyed, 1000)
			h.set(func(h *fakeHost) {
				h.leaderErr = tc.err
				delete(h.leader, "orders/an")
				if tc.leaderOK {
					h.leader["orders/an"] = tc.leaderE
				}
			})
			path := cursorfile.Path(dir, "an")
			var before []byte
			if tc.oldFile {
				w, err := cursorfile.Anchor(dir, "an", "0123456789abcdef", 2)
				if err != nil {
					t.Fatal(err)
				}
				w.Close()
				before, _ = os.ReadFile(path)
			}
			_, done := startCursor(t, cfg, desired(dir, []int64{0}))
			if err := <-done; !errors.Is(err, ErrUnconfirmed) {
				t.Fatalf("cursor exit = %v, want ErrUnconfirmed", err)
			}
			after, err := os.ReadFile(path)
			if tc.oldFile && string(after) != string(before) {
				t.Fatal("an unconfirmed anchor overwrote the cursor file")
			}
			if !tc.oldFile && !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("an unconfirmed anchor wrote a cursor file (err %v)", err)
			}
			if len(h.all()) != 0 {
				t.Fatal("records fanned out without a confirmed anchor")
			}
		})
	}
}

func TestAnchorFaultBeforeAnchorLeavesNoFile(t *testing.T) {
	t.Cleanup(faults.Reset)
	h, _, cfg, dir := setup(t, 1)
	faults.Set(FaultBeforeAnchor, faults.ErrInjected)
	_, done := startCursor(t, cfg, desired(dir, []int64{0}))
	if err := <-done; !errors.Is(err, faults.ErrInjected) {
		t.Fatalf("exit = %v", err)
	}
	if _, err := fileState(t, dir); !errors.Is(err, cursorfile.ErrNotExist) {
		t.Fatalf("file after a fault before the anchor: %v, want none", err)
	}
	if len(h.all()) != 0 {
		t.Fatal("records fanned out without an anchor")
	}
}

func TestRetryFailedBucketAloneHealthyBucketsGetNoDuplicates(t *testing.T) {
	h, _, cfg, dir := setup(t, 2)
	produce(t, h.logs[0], 0, 40, keyed, 1000)
	h.set(func(h *fakeHost) {
		h.fail = func(p, n int) error {
			if p == 1 && n <= 7 { // 3 quick tries × 2 rounds + 1
				return errDown
			}
			return nil
		}
	})
	startCursor(t, cfg, desired(dir, []int64{0}))
	testwait.For(t, 10*time.Second, "advance", fileAt(t, dir, 40))
	p0, p1 := h.payloads(0), h.payloads(1)
	if len(p0)+len(p1) != 40 {
		t.Fatalf("child received %d+%d records, want 40 exactly once", len(p0), len(p1))
	}
	pl := placement{partitions: 2}
	for _, p := range [][]string{p0, p1} {
		seen := map[string]bool{}
		for _, s := range p {
			if seen[s] {
				t.Fatalf("record %s delivered twice", s)
			}
			seen[s] = true
		}
	}
	for _, s := range p1 {
		i := atoiM(s)
		if pl.target(plog.Entry{Key: keyed(i)}) != 1 {
			t.Fatalf("record %s rerouted into partition 1", s)
		}
	}
	if !slices.IsSortedFunc(p1, func(a, b string) int { return atoiM(a) - atoiM(b) }) {
		t.Fatalf("retried bucket lost slab order: %v", p1)
	}
}

func atoiM(s string) int {
	n := 0
	for _, c := range s[1:] {
		n = n*10 + int(c-'0')
	}
	return n
}

func TestRetryLinkGoneDropsHeldRecordsAndExits(t *testing.T) {
	h, _, cfg, dir := setup(t, 1)
	produce(t, h.logs[0], 0, 5, keyed, 1000)
	h.set(func(h *fakeHost) { h.fail = func(int, int) error { return errDown } })
	_, done := startCursor(t, cfg, desired(dir, []int64{0}))
	testwait.For(t, 10*time.Second, "a retry round", func() bool { h.mu.Lock(); defer h.mu.Unlock(); return h.attempts[0] >= 4 })
	h.set(func(h *fakeHost) { h.links["orders/an"] = "ffffffffffffffff" }) // re-attached
	select {
	case err := <-done:
		if !errors.Is(err, errLinkGone) {
			t.Fatalf("exit = %v, want errLinkGone", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("cursor kept retrying after its link changed epoch")
	}
	if st, _ := fileState(t, dir); st.NextOffset != 0 {
		t.Fatalf("file advanced to %d", st.NextOffset)
	}
}

func TestRetryRebucketsHeldRecordsUnderCurrentChildCount(t *testing.T) {
	h, _, cfg, dir := setup(t, 2)
	produce(t, h.logs[0], 0, 30, keyed, 1000)
	var grown = make(chan struct{})
	h.set(func(h *fakeHost) {
		h.fail = func(p, _ int) error {
			select {
			case <-grown:
				return nil
			default:
			}
			if p == 1 {
				return errDown
			}
			return nil
		}
	})
	startCursor(t, cfg, desired(dir, []int64{0}))
	testwait.For(t, 10*time.Second, "failing rounds", func() bool { h.mu.Lock(); defer h.mu.Unlock(); return h.attempts[1] >= 3 })
	h.set(func(h *fakeHost) { h.childParts["an"] = 4 })
	close(grown)
	testwait.For(t, 10*time.Second, "advance", fileAt(t, dir, 30))
	pl2, pl4 := placement{partitions: 2}, placement{partitions: 4}
	for p := 0; p < 4; p++ {
		for _, s := range h.payloads(p) {
			k := plog.Entry{Key: keyed(atoiM(s))}
			if p == 0 && pl2.target(k) == 0 {
				continue // committed in the first round under 2 partitions
			}
			if pl2.target(k) != 1 || pl4.target(k) != p {
				t.Fatalf("record %s in partition %d: want held records re-bucketed mod 4", s, p)
			}
		}
	}
}
