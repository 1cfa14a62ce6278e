package fanout

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"narad.dev/broker/internal/fanout/cursorfile"
	plog "narad.dev/broker/internal/log"
	"narad.dev/broker/internal/testwait"
)

const remoteID = "remote:t@127.0.0.1:1"

// remoteCursor runs a remote link's cursor on parent orders/0 against target url.
func remoteCursor(t *testing.T, h *fakeHost, dir, url string) *cursor {
	t.Helper()
	h.set(func(h *fakeHost) {
		h.links["orders/"+remoteID] = epoch
		h.leader["orders/"+remoteID] = epoch
	})
	cfg := testConfig(h, newFakeObserver())
	cfg.RemoteBackoffCap = 40 * time.Millisecond
	d := Desired{Parent: "orders", Partition: 0, Child: remoteID, Epoch: epoch, AttachOffsets: []int64{0}, Dir: dir,
		Remote: &RemoteTarget{URLs: []string{url}, Topic: "t", User: "u", Password: "secret-pw"}}
	c := &cursor{cfg: cfg, host: h, obs: cfg.Observer, log: cfg.Logger, d: d, rr: new(atomic.Uint32)}
	ctx, cancel := context.WithCancel(context.Background())
	exited := make(chan struct{})
	go func() { _ = c.run(ctx); close(exited) }()
	t.Cleanup(func() { cancel(); <-exited })
	return c
}

func remoteFile(dir string) (cursorfile.State, error) {
	return cursorfile.Read(context.Background(), cursorfile.Path(dir, remoteID))
}

func TestRemoteCursorRetryAfter503ResendsWithoutGaps(t *testing.T) {
	h := newFakeHost()
	dir := openParent(t, h, t.TempDir(), 0, plog.Options{})
	var fail atomic.Bool
	fail.Store(true)
	ft := &fakeTarget{status: func(int, []plog.Entry) int {
		if fail.Load() {
			return http.StatusServiceUnavailable
		}
		return http.StatusAccepted
	}}
	srv := httptest.NewServer(ft)
	defer srv.Close()
	produce(t, h.logs[0], 0, 30, keyed, 1000)
	c := remoteCursor(t, h, dir, srv.URL)
	testwait.For(t, 10*time.Second, "target_unreachable", func() bool { s, _ := c.remote.get(); return s == RemoteUnreachable })
	if st, err := remoteFile(dir); err != nil || st.NextOffset != 0 {
		t.Fatalf("cursor advanced while the target refused: %+v %v", st, err)
	}
	fail.Store(false)
	testwait.For(t, 10*time.Second, "cursor at 30", func() bool { st, err := remoteFile(dir); return err == nil && st.NextOffset == 30 })
	if s, _ := c.remote.get(); s != RemoteActive {
		t.Fatalf("state after recovery %q", s)
	}
	seen := map[string]bool{}
	for _, e := range ft.accepted() {
		seen[string(e.Payload)] = true
	}
	for i := range 30 {
		if p := fmt.Sprintf("m%d", i); !seen[p] {
			t.Fatalf("record %s never reached the target (gap)", p)
		}
	}
}

func TestRemoteCursorRejectedRecordStopsTheLinkWithoutSkipping(t *testing.T) {
	h := newFakeHost()
	dir := openParent(t, h, t.TempDir(), 0, plog.Options{})
	ft := &fakeTarget{status: func(_ int, recs []plog.Entry) int {
		for _, r := range recs {
			if string(r.Payload) == "m7" {
				return http.StatusBadRequest
			}
		}
		return http.StatusAccepted
	}}
	srv := httptest.NewServer(ft)
	defer srv.Close()
	produce(t, h.logs[0], 0, 20, keyed, 1000)
	c := remoteCursor(t, h, dir, srv.URL)
	testwait.For(t, 10*time.Second, "rejected", func() bool { s, _ := c.remote.get(); return s == RemoteRejected })
	// Several retries later the cursor still has not passed the refused record.
	testwait.For(t, 10*time.Second, "retries", func() bool { ft.mu.Lock(); defer ft.mu.Unlock(); return ft.calls > 10 })
	if st, err := remoteFile(dir); err != nil || st.NextOffset > 7 {
		t.Fatalf("cursor passed a rejected record: %+v %v", st, err)
	}
	_, lastErr := c.remote.get()
	if !strings.Contains(lastErr, "400") || strings.Contains(lastErr, "secret-pw") {
		t.Fatalf("last error %q", lastErr)
	}
}

func TestRemoteCursorStates(t *testing.T) {
	for _, tc := range []struct {
		status int
		state  string
	}{{http.StatusUnauthorized, RemoteUnauthorized}, {http.StatusNotFound, RemoteTopicMissing}} {
		h := newFakeHost()
		dir := openParent(t, h, t.TempDir(), 0, plog.Options{})
		srv := httptest.NewServer(&fakeTarget{status: func(int, []plog.Entry) int { return tc.status }})
		produce(t, h.logs[0], 0, 5, keyed, 1000)
		c := remoteCursor(t, h, dir, srv.URL)
		testwait.For(t, 10*time.Second, tc.state, func() bool { s, _ := c.remote.get(); return s == tc.state })
		if st, err := remoteFile(dir); err != nil || st.NextOffset != 0 {
			t.Fatalf("%d: cursor advanced: %+v %v", tc.status, st, err)
		}
		srv.Close()
	}
}

// One HTTP client per link: a link's cursors on this node share one Sender, a re-attach
// (new epoch) gets another, and the last cursor to stop releases it.
func TestRunnerSharesOneSenderPerRemoteLinkEpoch(t *testing.T) {
	r, err := NewRunner(Config{Host: newFakeHost()})
	if err != nil {
		t.Fatal(err)
	}
	d0 := Desired{Parent: "orders", Partition: 0, Child: remoteID, Epoch: "e1",
		Remote: &RemoteTarget{URLs: []string{"http://127.0.0.1:1"}, Topic: "t"}}
	d1, d2 := d0, d0
	d1.Partition, d2.Epoch = 1, "e2"
	r.mu.Lock()
	a, b, c := r.acquireSenderLocked(d0), r.acquireSenderLocked(d1), r.acquireSenderLocked(d2)
	r.mu.Unlock()
	if a != b || a == c || a.hc == c.hc {
		t.Fatalf("senders: partitions share %v, epochs share %v, clients share %v", a == b, a == c, a.hc == c.hc)
	}
	r.releaseSender(d0)
	if _, ok := r.senders[linkKey{"orders", remoteID, "e1"}]; !ok {
		t.Fatal("the sender went while a cursor of its link still runs")
	}
	r.releaseSender(d1)
	r.releaseSender(d2)
	if len(r.senders) != 0 {
		t.Fatalf("%d senders left after every cursor stopped", len(r.senders))
	}
}
