package replica

import (
	"context"
	"errors"
	"io"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"narad.dev/broker/internal/log"
	"narad.dev/broker/internal/testwait"
	"narad.dev/broker/internal/transfer"
)

// segSource serves a leader node's listing and segment streams in-process, as the move
// transfer plane does over node RPC.
type segSource struct {
	n        *node
	noEpochs bool             // an older leader: no epochs in the listing
	cutAt    int64            // > 0: every stream ends (EOF) after this many bytes
	damage   bool             // flip one byte of every stream's first chunk
	stall    bool             // every stream sends nothing until its context ends
	streams  []int64          // the bases streamed, in order
	onStream func(base int64) // called as a stream opens
}

func (s *segSource) List(context.Context) (transfer.Listing, error) {
	hwm, segs, err := s.n.log.CommittedListing()
	if err != nil {
		return transfer.Listing{}, err
	}
	l := transfer.Listing{HighWatermark: hwm, OldestOffset: s.n.log.OldestOffset()}
	for _, sg := range segs {
		l.Segments = append(l.Segments, transfer.Segment{Base: sg.Base, Size: sg.Size, Sealed: sg.Sealed})
	}
	if !s.noEpochs {
		for _, e := range s.n.epochs.Entries() {
			l.Epochs = append(l.Epochs, transfer.EpochEntry{Epoch: e.Epoch, Start: e.Start})
		}
	}
	return l, nil
}

func (s *segSource) Stream(ctx context.Context, base, at, n int64, chunk int) (transfer.SegmentStream, error) {
	s.streams = append(s.streams, base)
	if s.onStream != nil {
		s.onStream(base)
	}
	if s.cutAt > 0 {
		n = min(n, s.cutAt)
	}
	return &logStream{ctx: ctx, l: s.n.log, base: base, at: at, end: at + n, chunk: chunk, damage: s.damage,
		stall: s.stall}, nil
}

// logStream reads a segment through ReadCommitted, a chunk per Recv.
type logStream struct {
	ctx             context.Context
	stall           bool
	l               *log.Log
	base, at, end   int64
	chunk           int
	damage, damaged bool
}

func (s *logStream) Recv(buf []byte) (int, error) {
	if s.stall {
		<-s.ctx.Done()
		return 0, s.ctx.Err()
	}
	if s.at >= s.end {
		return 0, io.EOF
	}
	n, err := s.l.ReadCommitted(s.base, s.at, buf[:min(int64(s.chunk), s.end-s.at, int64(len(buf)))])
	if err != nil {
		return 0, err
	}
	if n == 0 {
		return 0, io.EOF
	}
	if s.damage && !s.damaged {
		buf[n/2] ^= 0x10
		s.damaged = true
	}
	s.at += int64(n)
	return n, nil
}

func (s *logStream) Close() {}

// leaderOverEpochs makes a the leader of epoch 1 and then of epoch 3 with records under both,
// several sealed segments in all, and returns the epoch 3 leadership.
func leaderOverEpochs(t *testing.T, a *node) *Leader {
	t.Helper()
	ld := a.lead(t, 1, []string{"a", "b"}, []string{"a"}, 1, nil)
	for range 6 {
		produce(t, a, ld, "x", 20)
	}
	ld.Depose()
	ld = a.lead(t, 3, []string{"a", "b"}, []string{"a"}, 1, nil)
	for range 8 {
		produce(t, a, ld, "y", 20)
	}
	return ld
}

// sealedEnd is where the leader's sealed segments end: the base of its boundary segment.
func sealedEnd(t *testing.T, n *node) (end int64, sealed int) {
	t.Helper()
	_, segs, err := n.log.CommittedListing()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range segs {
		if s.Sealed {
			sealed++
		} else {
			return s.Base, sealed
		}
	}
	t.Fatal("no boundary segment")
	return 0, 0
}

func TestAnEmptyFollowerPreCopiesTheSealedSegments(t *testing.T) {
	a, b := newNode(t, "a"), newNode(t, "b")
	ld := leaderOverEpochs(t, a)
	end, sealed := sealedEnd(t, a)
	if sealed < 3 {
		t.Fatalf("the test needs several sealed segments, has %d", sealed)
	}
	src := &segSource{n: a}
	fw := follow(b, a, ld)
	res, err := fw.PreCopy(context.Background(), src)
	if err != nil {
		t.Fatal(err)
	}
	if res.Segments != sealed || res.From != 0 || res.To != end || len(src.streams) != sealed {
		t.Fatalf("PreCopy = %+v after %d streams; want %d segments to %d", res, len(src.streams), sealed, end)
	}
	if b.log.NextOffset() != end || b.log.HighWatermark() != end {
		t.Fatalf("follower after the pre-copy: next %d hwm %d, want both %d", b.log.NextOffset(), b.log.HighWatermark(), end)
	}
	sameRecords(t, a.log, b.log, 0, end)
	// Its epochs are the leader's over what it copied: the leader's second epoch started below
	// the end of the copies.
	want := a.epochs.Entries()
	if want[1].Start >= end {
		t.Fatalf("the test needs epoch 3 to start below %d: %v", end, want)
	}
	if got := b.epochs.Entries(); !slices.Equal(got, want) {
		t.Fatalf("follower's epochs %v, leader's %v", got, want)
	}
	// The fetch takes it from there, and it reconciles cleanly.
	catchUp(t, fw, a)
	sameRecords(t, a.log, b.log, 0, a.log.NextOffset())
	if err := fw.Reconcile(context.Background()); err != nil || b.log.NextOffset() != a.log.NextOffset() {
		t.Fatalf("Reconcile = %v, end %d", err, b.log.NextOffset())
	}
	// A second pre-copy, with records at the end, copies nothing.
	again, err := fw.PreCopy(context.Background(), src)
	if err != nil || again.Segments != 0 || len(src.streams) != sealed {
		t.Fatalf("PreCopy of a caught-up follower = %+v, %v after %d streams", again, err, len(src.streams))
	}
}

// The committed part of the leader's active segment is copied too once it holds at least
// activePreCopyMin bytes, and becomes a segment of its own in the follower's log; the fetch
// goes on from its end.
func TestPreCopyTakesTheCommittedPartOfTheActiveSegment(t *testing.T) {
	a, b := newNode(t, "a"), newNode(t, "b")
	ld := leaderOverEpochs(t, a)
	_, sealed := sealedEnd(t, a)
	_, segs, err := a.log.CommittedListing()
	if err != nil {
		t.Fatal(err)
	}
	active := segs[len(segs)-1]
	if active.Sealed || active.Size == 0 {
		t.Fatalf("the test needs records in the leader's active segment: %+v", active)
	}
	hwm := a.log.HighWatermark()
	defer func(old int64) { activePreCopyMin = old }(activePreCopyMin)
	for _, tc := range []struct {
		min      int64
		segments int
	}{{active.Size + 1, sealed}, {active.Size, sealed + 1}} {
		activePreCopyMin = tc.min
		c := newNode(t, "b")
		src := &segSource{n: a}
		res, err := follow(c, a, ld).PreCopy(context.Background(), src)
		if err != nil || res.Segments != tc.segments {
			t.Fatalf("PreCopy with activePreCopyMin %d = %+v, %v; want %d segments", tc.min, res, err, tc.segments)
		}
	}
	activePreCopyMin = active.Size
	src := &segSource{n: a}
	fw := follow(b, a, ld)
	res, err := fw.PreCopy(context.Background(), src)
	if err != nil || res.To != hwm || b.log.NextOffset() != hwm || b.log.HighWatermark() != hwm {
		t.Fatalf("PreCopy = %+v, %v: follower next %d hwm %d, want both at the leader's HWM %d",
			res, err, b.log.NextOffset(), b.log.HighWatermark(), hwm)
	}
	sameRecords(t, a.log, b.log, 0, hwm)
	if got, want := b.epochs.Entries(), a.epochs.Entries(); !slices.Equal(got, want) {
		t.Fatalf("follower's epochs %v, leader's %v", got, want)
	}
	// The leader goes on writing its active segment; the follower fetches from its own new one.
	produce(t, a, ld, "z", 20)
	catchUp(t, fw, a)
	sameRecords(t, a.log, b.log, 0, a.log.NextOffset())
	if err := fw.Reconcile(context.Background()); err != nil || b.log.NextOffset() != a.log.NextOffset() {
		t.Fatalf("Reconcile = %v, end %d", err, b.log.NextOffset())
	}
}

func TestPreCopyLeavesToTheFetchWhatItCannotCopy(t *testing.T) {
	t.Run("a follower with records of its own", func(t *testing.T) {
		a, b := newNode(t, "a"), newNode(t, "b")
		ld := leaderOverEpochs(t, a)
		fw := follow(b, a, ld)
		if err := fw.FetchOnce(context.Background()); err != nil { // one 700-byte answer
			t.Fatal(err)
		}
		src := &segSource{n: a}
		res, err := fw.PreCopy(context.Background(), src)
		if err != nil || res.Segments != 0 || len(src.streams) != 0 {
			t.Fatalf("PreCopy = %+v, %v, %d streams; want nothing", res, err, len(src.streams))
		}
	})
	t.Run("a leader whose listing has no epochs", func(t *testing.T) {
		a, b := newNode(t, "a"), newNode(t, "b")
		ld := leaderOverEpochs(t, a)
		src := &segSource{n: a, noEpochs: true}
		res, err := follow(b, a, ld).PreCopy(context.Background(), src)
		if err != nil || res.Segments != 0 || len(src.streams) != 0 || b.log.NextOffset() != 0 {
			t.Fatalf("PreCopy = %+v, %v, %d streams, next %d; want nothing", res, err, len(src.streams), b.log.NextOffset())
		}
	})
	t.Run("a stream that ends short", func(t *testing.T) {
		a, b := newNode(t, "a"), newNode(t, "b")
		ld := leaderOverEpochs(t, a)
		src := &segSource{n: a, cutAt: 100}
		fw := follow(b, a, ld)
		res, err := fw.PreCopy(context.Background(), src)
		if err != nil || res.Segments != 0 || b.log.NextOffset() != 0 {
			t.Fatalf("PreCopy = %+v, %v, next %d; want nothing installed", res, err, b.log.NextOffset())
		}
		noTemps(t, b)
		catchUp(t, fw, a)
		sameRecords(t, a.log, b.log, 0, a.log.NextOffset())
	})
	t.Run("a segment the follower's log took records into meanwhile", func(t *testing.T) {
		a, b := newNode(t, "a"), newNode(t, "b")
		ld := leaderOverEpochs(t, a)
		fw := follow(b, a, ld)
		src := &segSource{n: a}
		fetched := false
		src.onStream = func(base int64) {
			if base == 0 || fetched {
				return
			}
			// The second segment streams while the first installs: once that install ends, a
			// fetch lands on the log, ahead of the second segment's install.
			fetched = true
			testwait.For(t, 10*time.Second, "the first install", func() bool { return b.log.NextOffset() == base })
			if err := fw.FetchOnce(context.Background()); err != nil {
				t.Error(err)
			}
		}
		res, err := fw.PreCopy(context.Background(), src)
		if err != nil || res.Segments != 1 {
			t.Fatalf("PreCopy = %+v, %v; want the first segment only", res, err)
		}
		noTemps(t, b)
		catchUp(t, fw, a)
		sameRecords(t, a.log, b.log, 0, a.log.NextOffset())
	})
}

func TestPreCopyGivesUpOnASilentLeader(t *testing.T) {
	defer func(d time.Duration) { preCopyIdle = d }(preCopyIdle)
	preCopyIdle = 50 * time.Millisecond
	a, b := newNode(t, "a"), newNode(t, "b")
	ld := leaderOverEpochs(t, a)
	res, err := follow(b, a, ld).PreCopy(context.Background(), &segSource{n: a, stall: true})
	if err == nil || !strings.Contains(err.Error(), "no chunk for") || res.Segments != 0 {
		t.Fatalf("PreCopy from a silent leader = %+v, %v; want a no-chunk error", res, err)
	}
	if b.log.NextOffset() != 0 {
		t.Fatalf("follower changed: next %d", b.log.NextOffset())
	}
	noTemps(t, b)
}

// A pre-copy waits for a free slot before it copies (the node's bound on pre-copies at once);
// one with nothing to copy takes none.
func TestPreCopyWaitsForASlot(t *testing.T) {
	a, b := newNode(t, "a"), newNode(t, "b")
	ld := leaderOverEpochs(t, a)
	slots := make(chan struct{}, 1)
	slots <- struct{}{} // taken by another partition's pre-copy
	fw := follow(b, a, ld)
	fw.PreCopySlots = slots
	src := &segSource{n: a}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	res, err := fw.PreCopy(ctx, src)
	if !errors.Is(err, context.DeadlineExceeded) || res.Segments != 0 || len(src.streams) != 0 {
		t.Fatalf("PreCopy with no free slot = %+v, %v after %d streams; want to wait, copying nothing", res, err, len(src.streams))
	}
	<-slots // the other pre-copy ends
	_, sealed := sealedEnd(t, a)
	if res, err = fw.PreCopy(context.Background(), src); err != nil || res.Segments != sealed {
		t.Fatalf("PreCopy with a free slot = %+v, %v; want %d segments", res, err, sealed)
	}
	if len(slots) != 0 {
		t.Fatal("the pre-copy kept its slot")
	}
	// Nothing left to copy: no slot is taken, so a full set of slots does not hold it up.
	slots <- struct{}{}
	if res, err = fw.PreCopy(context.Background(), src); err != nil || res.Segments != 0 {
		t.Fatalf("PreCopy with nothing to copy and no free slot = %+v, %v", res, err)
	}
}

// A log with records (which may be in the ISR) does not wait for a slot: without a free one it
// leaves its segments to the fetch at once.
func TestPreCopyOfALogWithRecordsDoesNotWaitForASlot(t *testing.T) {
	a, b := newNode(t, "a"), newNode(t, "b")
	ld := leaderOverEpochs(t, a)
	fw := follow(b, a, ld)
	if _, err := fw.PreCopy(context.Background(), &segSource{n: a}); err != nil { // copies the sealed ones
		t.Fatal(err)
	}
	for range 12 { // more sealed segments past the follower's end, which is a segment start
		produce(t, a, ld, "v", 20)
	}
	slots := make(chan struct{}, 1)
	slots <- struct{}{}
	fw.PreCopySlots = slots
	src := &segSource{n: a}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := fw.PreCopy(ctx, src)
	if err != nil || res.Segments != 0 || len(src.streams) != 0 {
		t.Fatalf("PreCopy of a log with records and no free slot = %+v, %v, %d streams; want nothing at once",
			res, err, len(src.streams))
	}
}

func TestPreCopyRefusesDamagedBytes(t *testing.T) {
	a, b := newNode(t, "a"), newNode(t, "b")
	ld := leaderOverEpochs(t, a)
	res, err := follow(b, a, ld).PreCopy(context.Background(), &segSource{n: a, damage: true})
	if !errors.Is(err, log.ErrCorruptRecord) || res.Segments != 0 {
		t.Fatalf("PreCopy of damaged bytes = %+v, %v; want ErrCorruptRecord", res, err)
	}
	if b.log.NextOffset() != 0 || len(b.epochs.Entries()) != 0 {
		t.Fatalf("follower changed: next %d, epochs %v", b.log.NextOffset(), b.epochs.Entries())
	}
	noTemps(t, b)
}

// An empty follower whose leader's log starts past its end begins where the leader's does.
func TestPreCopyBelowTheLeadersLogStart(t *testing.T) {
	a, b := newNode(t, "a"), newNode(t, "b")
	ld := leaderOverEpochs(t, a)
	for range 10 {
		produce(t, a, ld, "z", 20)
	}
	if _, err := a.log.ApplyRetention(int64(time.Hour/time.Millisecond), time.Now().Add(48*time.Hour)); err != nil {
		t.Fatal(err)
	}
	for range 10 { // sealed segments past the new log start
		produce(t, a, ld, "w", 20)
	}
	start := a.log.OldestOffset()
	end, sealed := sealedEnd(t, a)
	if start == 0 || sealed == 0 {
		t.Fatalf("the test needs retention to leave sealed segments past 0: start %d, %d sealed", start, sealed)
	}
	fw := follow(b, a, ld)
	res, err := fw.PreCopy(context.Background(), &segSource{n: a})
	if err != nil || res.From != start || res.To != end || res.Segments != sealed {
		t.Fatalf("PreCopy = %+v, %v; want %d segments over [%d, %d)", res, err, sealed, start, end)
	}
	if b.log.OldestOffset() != start {
		t.Fatalf("follower starts at %d, leader at %d", b.log.OldestOffset(), start)
	}
	catchUp(t, fw, a)
	sameRecords(t, a.log, b.log, start, a.log.NextOffset())
}

// noTemps fails when n's partition directory holds a temp file.
func noTemps(t *testing.T, n *node) {
	t.Helper()
	ents, err := os.ReadDir(n.log.Dir())
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if strings.Contains(e.Name(), "tmp-") {
			t.Fatalf("temp file left: %s", e.Name())
		}
	}
}

// heldHWM holds the first HWM move of a pre-copy (the end of the first segment's install)
// until the next segment's stream opens, and records whether it did.
type heldHWM struct {
	*log.Log
	opened     chan int64
	held       bool
	overlapped bool
}

func (h *heldHWM) AdvanceHWM(hwm int64) error {
	if !h.held {
		h.held = true
		<-h.opened // the first segment's stream
		select {
		case <-h.opened:
			h.overlapped = true
		case <-time.After(5 * time.Second):
		}
	}
	return h.Log.AdvanceHWM(hwm)
}

func TestPreCopyStreamsTheNextSegmentWhileOneInstalls(t *testing.T) {
	a, b := newNode(t, "a"), newNode(t, "b")
	ld := leaderOverEpochs(t, a)
	end, sealed := sealedEnd(t, a)
	opened := make(chan int64, 1024)
	src := &segSource{n: a, onStream: func(base int64) { opened <- base }}
	fw := follow(b, a, ld)
	held := &heldHWM{Log: b.log, opened: opened}
	fw.Log = held
	res, err := fw.PreCopy(context.Background(), src)
	if err != nil || res.Segments != sealed || res.To != end {
		t.Fatalf("PreCopy = %+v, %v; want %d segments to %d", res, err, sealed, end)
	}
	if !held.overlapped {
		t.Fatal("the second segment's stream did not open while the first segment was being installed")
	}
	if b.log.NextOffset() != end || b.log.HighWatermark() != end {
		t.Fatalf("follower after the pre-copy: next %d hwm %d, want both %d", b.log.NextOffset(), b.log.HighWatermark(), end)
	}
	sameRecords(t, a.log, b.log, 0, end)
	noTemps(t, b)
}
