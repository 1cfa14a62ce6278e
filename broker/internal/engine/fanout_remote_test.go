package engine

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"narad.dev/broker/internal/fanout"
	"narad.dev/broker/internal/fanout/cursorfile"
	"narad.dev/broker/internal/meta"
	"narad.dev/broker/internal/service"
	"narad.dev/broker/internal/transfer"
)

const remotePassword = "secret-pw-7"

// remoteTarget is another cluster's topic as a remote link sees it: GET describes it, the batch
// produce answers what verdict says for the batch's payloads (202 records them, in order).
type remoteTarget struct {
	srv *httptest.Server

	mu      sync.Mutex
	got     []string
	verdict func(payloads []string) int // nil → 202
}

func newRemoteTarget(t *testing.T) *remoteTarget {
	rt := &remoteTarget{}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/topics/{t}", func(w http.ResponseWriter, r *http.Request) {
		_, _ = fmt.Fprintf(w, `{"name":%q,"role":"standalone","partitions":3}`, r.PathValue("t"))
	})
	mux.HandleFunc("POST /v1/topics/{t}/produce/batch", func(w http.ResponseWriter, r *http.Request) {
		if u, p, _ := r.BasicAuth(); u != "u" || p != remotePassword {
			http.Error(w, `{"error":"bad credentials"}`, http.StatusUnauthorized)
			return
		}
		var body struct {
			Records []struct {
				Payload  string `json:"payload"`
				Encoding string `json:"payload_encoding"`
			} `json:"records"`
		}
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			http.Error(w, `{"error":"bad json"}`, http.StatusBadRequest)
			return
		}
		payloads := make([]string, len(body.Records))
		for i, rec := range body.Records {
			b, err := base64.StdEncoding.DecodeString(rec.Payload)
			if err != nil || rec.Encoding != "base64" {
				http.Error(w, `{"error":"bad payload"}`, http.StatusBadRequest)
				return
			}
			payloads[i] = string(b)
		}
		rt.mu.Lock()
		st := http.StatusAccepted
		if rt.verdict != nil {
			st = rt.verdict(payloads)
		}
		if st == http.StatusAccepted {
			rt.got = append(rt.got, payloads...)
		}
		rt.mu.Unlock()
		w.WriteHeader(st)
		if st == http.StatusAccepted {
			_, _ = fmt.Fprintf(w, `{"accepted":%d}`, len(payloads))
		} else {
			_, _ = fmt.Fprintf(w, `{"error":"scripted %d"}`, st)
		}
	})
	rt.srv = httptest.NewServer(mux)
	t.Cleanup(rt.srv.Close)
	return rt
}

func (rt *remoteTarget) setVerdict(f func([]string) int) {
	rt.mu.Lock()
	rt.verdict = f
	rt.mu.Unlock()
}

func (rt *remoteTarget) received() []string {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return slices.Clone(rt.got)
}

// attachRemote attaches a remote child of parent into topic at rt and returns the stored link.
func (n *testNode) attachRemote(parent meta.Topic, rt *remoteTarget, topic, start string) meta.RemoteLink {
	n.t.Helper()
	_, cs, err := n.e.AttachRemote(n.ctx(), service.RemoteAttach{Parent: parent.Name, URLs: []string{rt.srv.URL},
		Topic: topic, User: "u", Password: remotePassword, Start: start})
	if err != nil {
		n.t.Fatalf("attach remote %s: %v", topic, err)
	}
	l, ok := n.store.RemoteLink(parent.Name, cs.ID)
	if !ok {
		n.t.Fatalf("remote link %s not stored", cs.ID)
	}
	return l
}

// runFanout runs a fan-out runner on n (fast retries) until the returned stop is called or the
// test ends.
func (n *testNode) runFanout() (stop func()) {
	n.t.Helper()
	r, err := fanout.NewRunner(fanout.Config{Host: n.e.FanoutHost(), Tick: 20 * time.Millisecond,
		RetryBackoff: 10 * time.Millisecond, RemoteBackoffCap: 40 * time.Millisecond, LongPoll: 50 * time.Millisecond,
		QuickBackoffs: []time.Duration{time.Millisecond}})
	if err != nil {
		n.t.Fatal(err)
	}
	n.e.BindFanout(r)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = r.Run(ctx) }()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-done }) }
	n.t.Cleanup(stop)
	return stop
}

// remoteEntry is parent's listing entry of link id.
func (n *testNode) remoteEntry(parent, id string) service.ChildStatus {
	n.t.Helper()
	for _, cs := range n.e.Children(n.ctx(), n.topic(parent)) {
		if cs.ID == id {
			return cs
		}
	}
	n.t.Fatalf("%s lists no remote child %s", parent, id)
	return service.ChildStatus{}
}

func payloads(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%d", prefix, i)
	}
	return out
}

// docs/internals/fanout.md §13 rule 4: each start mode records its own per-partition start — the
// committed HWM (attach, the default), the first offset the consumers have not resolved
// (consumer_frontier), the oldest retained record (oldest).
func TestRemoteAttachOffsetsFollowTheStartMode(t *testing.T) {
	n := startNode(t, t.TempDir(), nil)
	rt := newRemoteTarget(t)
	parent := n.createTopic(service.CreateTopicRequest{Name: "src", Partitions: 3})
	n.mustCommit(parent, 0, payloads("a", 5)...)
	n.mustCommit(parent, 1, payloads("b", 2)...)

	// Resolve offsets 0..2 of partition 0; partition 1's records stay leased.
	var acks []service.AckEntry
	leased := 0
	eventually(t, 10*time.Second, func() bool {
		msgs, err := n.e.Consume(n.ctx(), parent, queueReq(100*time.Millisecond, 10))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range msgs {
			leased++
			if m.Partition == 0 && m.Offset < 3 {
				acks = append(acks, ackEntry(t, m, service.OpAck))
			}
		}
		return leased == 7
	}, "7 records leased (have %d)", leased)
	for i, err := range n.e.Ack(n.ctx(), parent, acks) {
		if err != nil {
			t.Fatalf("ack %d: %v", i, err)
		}
	}

	for _, tc := range []struct {
		start, topic, stored string
		want                 []int64
	}{
		{"", "t-default", meta.StartAttach, []int64{5, 2, 0}},
		{meta.StartAttach, "t-attach", meta.StartAttach, []int64{5, 2, 0}},
		{meta.StartConsumerFrontier, "t-frontier", meta.StartConsumerFrontier, []int64{3, 0, 0}},
		{meta.StartOldest, "t-oldest", meta.StartOldest, []int64{0, 0, 0}},
	} {
		l := n.attachRemote(parent, rt, tc.topic, tc.start)
		if l.Start != tc.stored || !slices.Equal(l.AttachOffsets, tc.want) {
			t.Errorf("start %q: stored start %q offsets %v, want %q %v", tc.start, l.Start, l.AttachOffsets, tc.stored, tc.want)
		}
		if cs := n.remoteEntry(parent.Name, l.ID); cs.Start != tc.stored || cs.Target != tc.topic {
			t.Errorf("start %q: listing start %q target %q", tc.start, cs.Start, cs.Target)
		}
	}
}

// docs/internals/fanout.md §13: the listing shows the most severe state any partition's cursor reports
// with that cursor's last error, the recovery point (each partition's unadvanced position),
// and never the password.
func TestRemoteListingAggregatesStateRecoveryPointAndLastError(t *testing.T) {
	n := startNode(t, t.TempDir(), nil)
	rt := newRemoteTarget(t)
	parent := n.createTopic(service.CreateTopicRequest{Name: "orders", Partitions: 3})
	n.mustCommit(parent, 0, payloads("p0-", 4)...)
	n.mustCommit(parent, 1, "p1-0", "p1-bad", "p1-2")
	has := func(ps []string, prefix string) bool {
		return slices.ContainsFunc(ps, func(p string) bool { return strings.HasPrefix(p, prefix) })
	}
	// Phase 1: partition 0's batches are refused as unauthorized, partition 1's as rejected.
	rt.setVerdict(func(ps []string) int {
		switch {
		case slices.Contains(ps, "p1-bad"):
			return http.StatusBadRequest
		case has(ps, "p0-"):
			return http.StatusForbidden
		}
		return http.StatusAccepted
	})
	l := n.attachRemote(parent, rt, "mirror", meta.StartOldest)

	if cs := n.remoteEntry(parent.Name, l.ID); cs.State != service.ChildIncomplete || cs.LagComplete {
		t.Fatalf("listing before any cursor ran: %+v, want incomplete", cs)
	}
	n.runFanout()

	check := func(phase, state, errHas string, rp map[string]int64, lag int64) {
		t.Helper()
		var cs service.ChildStatus
		eventually(t, 10*time.Second, func() bool {
			cs = n.remoteEntry(parent.Name, l.ID)
			return cs.State == state && cs.LagComplete && len(cs.RecoveryPoint) == 3 &&
				cs.RecoveryPoint["0"] == rp["0"] && cs.RecoveryPoint["1"] == rp["1"] && cs.RecoveryPoint["2"] == rp["2"]
		}, "%s: listing state %q recovery point %v (have %q %v, last error %q)", phase, state, rp, cs.State, cs.RecoveryPoint, cs.LastError)
		if !strings.Contains(cs.LastError, errHas) {
			t.Fatalf("%s: last error %q, want it to hold %q", phase, cs.LastError, errHas)
		}
		if cs.LagMessages != lag {
			t.Fatalf("%s: lag %d, want %d", phase, cs.LagMessages, lag)
		}
		b, err := json.Marshal(cs)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), remotePassword) || strings.Contains(string(b), "password") {
			t.Fatalf("%s: the listing carries the password: %s", phase, b)
		}
		if cs.Kind != "remote" || cs.ID != l.ID || cs.Name != "remote:"+rt.srv.URL+"/mirror" {
			t.Fatalf("%s: listing identity %+v", phase, cs)
		}
	}
	// rejected outranks unauthorized; nothing advanced but the empty partition.
	check("rejected+unauthorized", fanout.RemoteRejected, "400", map[string]int64{"0": 0, "1": 0, "2": 0}, 7)

	// Phase 2: partition 1 is accepted now; partition 0 is still unauthorized.
	rt.setVerdict(func(ps []string) int {
		if has(ps, "p0-") {
			return http.StatusForbidden
		}
		return http.StatusAccepted
	})
	check("unauthorized", fanout.RemoteUnauthorized, "403", map[string]int64{"0": 0, "1": 3, "2": 0}, 4)

	// Phase 3: everything is accepted: active, every partition at its high watermark.
	rt.setVerdict(nil)
	check("recovered", fanout.RemoteActive, "", map[string]int64{"0": 4, "1": 3, "2": 0}, 0)
	got := rt.received()
	for _, want := range append(payloads("p0-", 4), "p1-0", "p1-bad", "p1-2") {
		if !slices.Contains(got, want) {
			t.Fatalf("the target never received %q (got %v)", want, got)
		}
	}
}

// docs/internals/fanout.md §13 (moves): a remote link's cursor file rides in the partition's transfer
// listing like a local child's, and an owner that installs it resumes from the copied position
// instead of the link's attach offsets.
func TestRemoteCursorFileTravelsWithTheMoveAndTheNewOwnerResumesFromIt(t *testing.T) {
	src := startNode(t, t.TempDir(), nil)
	rtA := newRemoteTarget(t)
	parent := src.createTopic(service.CreateTopicRequest{Name: "mv", Partitions: 3})
	src.mustCommit(parent, 0, payloads("m", 10)...)
	l := src.attachRemote(parent, rtA, "mirror", meta.StartOldest)
	stop := src.runFanout()
	path := cursorfile.Path(src.partDir("mv", 0), l.ID)
	eventually(t, 10*time.Second, func() bool {
		st, err := cursorfile.Read(context.Background(), path)
		return err == nil && st.NextOffset == 10 && st.Child == l.ID
	}, "remote cursor file %s at 10, naming %s", path, l.ID)
	stop()

	listing, err := src.e.TransferListing(src.ctx(), "mv", 0)
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(listing.Cursors, func(c transfer.Cursor) bool { return c.Child == l.ID })
	if i < 0 {
		t.Fatalf("the transfer listing does not carry the remote cursor: %+v", listing.Cursors)
	}
	st, err := cursorfile.Parse(listing.Cursors[i].Record)
	if err != nil || st.Epoch != l.AttachEpoch || st.NextOffset != 10 {
		t.Fatalf("listed remote cursor %+v %v, want epoch %s at 10", st, err, l.AttachEpoch)
	}

	// The new owner: the same parent partition (copied records plus newer ones), the same link,
	// and the listed cursor file installed as the move's finish step does.
	dst := startNode(t, t.TempDir(), nil)
	dparent := dst.createTopic(service.CreateTopicRequest{Name: "mv", Partitions: 3})
	dst.mustCommit(dparent, 0, payloads("m", 15)...)
	if _, err := dst.store.AttachRemote(dst.ctx(), l); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cursorfile.Path(dst.partDir("mv", 0), listing.Cursors[i].Child), listing.Cursors[i].Record, 0o644); err != nil {
		t.Fatal(err)
	}
	rtA.mu.Lock()
	rtA.got = nil // the same target (the link id names it); count only what the new owner sends
	rtA.mu.Unlock()
	dst.runFanout()
	eventually(t, 10*time.Second, func() bool { return slices.Contains(rtA.received(), "m14") }, "m14 at the target")
	got := rtA.received()
	for _, p := range got {
		var off int
		if _, err := fmt.Sscanf(p, "m%d", &off); err != nil || off < 10 {
			t.Fatalf("the new owner re-sent %q from before the copied position 10 (got %v)", p, got)
		}
	}
	if !slices.Equal(got, payloads("m", 15)[10:]) {
		t.Fatalf("the new owner sent %v, want m10…m14 in order", got)
	}
}
