package cluster

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	naradv1 "narad.dev/api/v1alpha1"
	"narad.dev/broker/client"
	"narad.dev/operator/internal/brokertest"
	"narad.dev/operator/naming"
)

// TestDrainGateShrinksOnlyPastAnEmptyNodeOutOfRaft is the scale-down gate's table.
func TestDrainGateShrinksOnlyPastAnEmptyNodeOutOfRaft(t *testing.T) {
	for _, tc := range []struct {
		name   string
		m      client.Member
		found  bool
		want   drainStep
		reason string
	}{
		{"not a member", client.Member{ID: "n-3"}, false, stepRemove, ""},
		{"drained and out of raft", client.Member{ID: "n-3", Draining: true, RaftRole: "none", Status: "draining"}, true, stepRemove, ""},
		{"drained out of raft and dead since", client.Member{ID: "n-3", Draining: true, RaftRole: "none", Status: "dead"}, true, stepRemove, ""},
		{"owns partitions", client.Member{ID: "n-3", Draining: true, RaftRole: "none", OwnedPartitions: 1, Status: "draining"}, true, stepWait, ""},
		{"still a voter", client.Member{ID: "n-3", Draining: true, RaftRole: "voter", Status: "draining"}, true, stepWait, ""},
		{"still a non-voter", client.Member{ID: "n-3", Draining: true, RaftRole: "nonvoter", Status: "draining"}, true, stepWait, ""},
		{"out of raft but never decommissioned", client.Member{ID: "n-3", RaftRole: "none", Status: "alive"}, true, stepStart, ""},
		{"alive", client.Member{ID: "n-3", RaftRole: "voter", OwnedPartitions: 4, Status: "alive"}, true, stepStart, ""},
		{"dead", client.Member{ID: "n-3", RaftRole: "nonvoter", OwnedPartitions: 4, Status: "dead"}, true, stepDead, degradedNodeDead},
		{"dead while draining", client.Member{ID: "n-3", Draining: true, RaftRole: "nonvoter", OwnedPartitions: 4, Status: "dead"}, true, stepDead, degradedNodeDead},
	} {
		t.Run(tc.name, func(t *testing.T) {
			step, reason, msg := nextDrainStep(tc.m, tc.found)
			if step != tc.want || reason != tc.reason {
				t.Fatalf("nextDrainStep = %v %q (%s), want %v %q", step, reason, msg, tc.want, tc.reason)
			}
		})
	}
}

func TestDrainVerdictGateCarriesTheBrokersReasons(t *testing.T) {
	if ok, reason, _ := verdictGate("n-3", &client.DecommissionVerdict{Allowed: true}); !ok || reason != "" {
		t.Fatalf("allowed verdict gated: %v %q", ok, reason)
	}
	ok, reason, msg := verdictGate("n-3", &client.DecommissionVerdict{Reasons: []string{"min_voters", "dead_owner"}})
	if ok || reason != degradedScaleDownRefused || !strings.Contains(msg, "n-3") || !strings.Contains(msg, "min_voters, dead_owner") {
		t.Fatalf("refused verdict = %v %q %q", ok, reason, msg)
	}
	reasons, refused := refusalReasons(&client.Error{Status: 409, Reasons: []string{"no_receivers"}})
	if !refused || !slices.Equal(reasons, []string{"no_receivers"}) {
		t.Fatalf("409 = %v %v", reasons, refused)
	}
	if _, refused := refusalReasons(&client.Error{Status: 503}); refused {
		t.Fatal("a 503 read as a refusal")
	}
	if _, refused := refusalReasons(errors.New("dial tcp: refused")); refused {
		t.Fatal("a network error read as a refusal")
	}
}

func TestDrainETAFollowsTheRateSinceStart(t *testing.T) {
	start := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *metav1.Time { t := metav1.NewTime(start.Add(d)); return &t }
	for _, tc := range []struct {
		name string
		e    naradv1.DrainingNodeStatus
		now  time.Duration
		want *metav1.Time
	}{
		{"by bytes", naradv1.DrainingNodeStatus{StartedAt: at(0), BytesAtStart: 1000, BytesLeft: 250}, time.Minute, at(80 * time.Second)},
		{"by partitions without bytes", naradv1.DrainingNodeStatus{StartedAt: at(0), PartitionsAtStart: 4, PartitionsLeft: 1}, 30 * time.Second, at(40 * time.Second)},
		{"nothing moved yet", naradv1.DrainingNodeStatus{StartedAt: at(0), BytesAtStart: 1000, BytesLeft: 1000}, time.Minute, nil},
		{"nothing left", naradv1.DrainingNodeStatus{StartedAt: at(0), BytesAtStart: 1000}, time.Minute, nil},
		{"no start", naradv1.DrainingNodeStatus{BytesAtStart: 1000, BytesLeft: 10}, time.Minute, nil},
		{"grew since start", naradv1.DrainingNodeStatus{StartedAt: at(0), BytesAtStart: 10, BytesLeft: 20}, time.Minute, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := drainETA(tc.e, start.Add(tc.now))
			if (got == nil) != (tc.want == nil) || (got != nil && !got.Time.Equal(tc.want.Time)) {
				t.Fatalf("drainETA = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestDrainProgressSumsBytesOnlyWhenPartitionsFlip: a draining node takes no produce, so its
// bytes are summed again only when its owned count changes.
func TestDrainProgressSumsBytesOnlyWhenPartitionsFlip(t *testing.T) {
	start := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	e := startEntry(client.Member{ID: "n-3", OwnedPartitions: 3}, 300, start)
	calls := 0
	bytes := func(n int64) func() (int64, error) {
		return func() (int64, error) { calls++; return n, nil }
	}
	e = progressEntry(e, client.Member{ID: "n-3", OwnedPartitions: 3, DecommissionBlocked: []string{}}, start.Add(time.Second), bytes(1))
	if calls != 0 || e.BytesLeft != 300 {
		t.Fatalf("summed %d times, bytes left %d", calls, e.BytesLeft)
	}
	e = progressEntry(e, client.Member{ID: "n-3", OwnedPartitions: 1, DecommissionBlocked: []string{"ingress_backlog"}}, start.Add(2*time.Second), bytes(100))
	if calls != 1 || e.BytesLeft != 100 || e.PartitionsLeft != 1 || !slices.Equal(e.BlockedReasons, []string{"ingress_backlog"}) {
		t.Fatalf("after a flip: calls %d, entry %+v", calls, e)
	}
	// Leader unreachable: blocked reasons unknown, kept; a failed sum keeps the figure.
	e = progressEntry(e, client.Member{ID: "n-3", OwnedPartitions: 2}, start.Add(3*time.Second),
		func() (int64, error) { return 0, errors.New("boom") })
	if e.BytesLeft != 100 || !slices.Equal(e.BlockedReasons, []string{"ingress_backlog"}) {
		t.Fatalf("after a failed sum: %+v", e)
	}
	e = progressEntry(e, client.Member{ID: "n-3", DecommissionBlocked: []string{}}, start.Add(4*time.Second), bytes(7))
	if e.BytesLeft != 0 || e.PartitionsLeft != 0 || e.BlockedReasons != nil || e.ETA != nil {
		t.Fatalf("drained entry %+v", e)
	}
}

func TestDrainOwnedBytesSumsTheNodesPartitionsOfEveryTopic(t *testing.T) {
	topics := []client.TopicDetail{}
	var want int64
	for i := range 40 { // more topics than the describe concurrency
		size := int64(i + 1)
		owners := map[string]int64{"n-1": 1000}
		if i%3 == 0 {
			owners["n-3"] = size
			want += size
		}
		topics = append(topics, scaleTopic("t"+string(rune('a'+i%26))+string(rune('a'+i/26)), owners))
	}
	f := brokertest.New(brokertest.Cluster{Topics: topics}, naming.AdminUser, "pw")
	t.Cleanup(f.Close)
	cl, err := client.New(f.URL(), client.WithBasicAuth(naming.AdminUser, "pw"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := ownedBytes(context.Background(), cl, "n-3")
	if err != nil || got != want {
		t.Fatalf("ownedBytes = %d, %v; want %d", got, err, want)
	}
	gets := 0
	for _, c := range f.Calls() {
		if c.Method == "GET" && strings.HasPrefix(c.Path, "/v1/topics/") {
			gets++
		}
	}
	if gets != 40 {
		t.Fatalf("described %d topics, want 40", gets)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := ownedBytes(ctx, cl, "n-3"); err == nil {
		t.Fatal("ownedBytes succeeded on a cancelled context")
	}
	bad, err := client.New(f.URL(), client.WithBasicAuth(naming.AdminUser, "wrong"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ownedBytes(context.Background(), bad, "n-3"); !client.IsStatus(err, 401) {
		t.Fatalf("ownedBytes with bad credentials = %v, want a 401", err)
	}
}
