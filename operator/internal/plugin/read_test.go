package plugin

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	naradv1 "narad.dev/api/v1alpha1"
)

// knownStatus is a cluster of 4 scaling down to 3: demo-3 drains, two moves in flight, one blocked.
func knownStatus() naradv1.NaradClusterStatus {
	started := metav1.NewTime(testNow.Add(-2 * time.Minute))
	eta := metav1.NewTime(testNow.Add(3 * time.Minute))
	return naradv1.NaradClusterStatus{
		ObservedGeneration: 1, Replicas: 4, ReadyReplicas: 4, Leader: "demo-0",
		Conditions: []metav1.Condition{
			{Type: naradv1.ConditionReady, Status: metav1.ConditionTrue, Reason: "AllReplicasReady",
				Message: "4/4 ready, leader demo-0", LastTransitionTime: metav1.NewTime(testNow)},
			{Type: naradv1.ConditionDraining, Status: metav1.ConditionTrue, Reason: "Decommissioning",
				Message: "demo-3 is draining", LastTransitionTime: metav1.NewTime(testNow)},
		},
		Members: []naradv1.MemberStatus{
			{Pod: "demo-0", NodeID: "demo-0", RaftRole: "voter", Status: "alive", OwnedPartitions: 5},
			{Pod: "demo-1", NodeID: "demo-1", RaftRole: "voter", Status: "alive", OwnedPartitions: 4},
			{Pod: "demo-2", NodeID: "demo-2", RaftRole: "voter", Status: "alive", OwnedPartitions: 4},
			{Pod: "demo-3", NodeID: "demo-3", RaftRole: "nonvoter", Status: "draining",
				OwnedPartitions: 3, Draining: true},
		},
		Moves: naradv1.MovesStatus{InFlight: 2, Blocked: []naradv1.BlockedMove{
			{Topic: "orders", Partition: 7, From: "demo-3", To: "demo-1", Reasons: []string{"target_dead"}},
		}},
		Draining: []naradv1.DrainingNodeStatus{{
			NodeID: "demo-3", PartitionsLeft: 3, PartitionsAtStart: 5, BytesLeft: 3 << 20,
			BytesAtStart: 4 << 20, StartedAt: &started, ETA: &eta,
			BlockedReasons: []string{"leader_transfer"},
		}},
	}
}

// lines matches each pattern against some line of out, in order.
func wantLines(t *testing.T, out string, patterns ...string) {
	t.Helper()
	rest := strings.Split(out, "\n")
	for _, p := range patterns {
		re := regexp.MustCompile(p)
		found := false
		for len(rest) > 0 {
			line := rest[0]
			rest = rest[1:]
			if re.MatchString(line) {
				found = true
				break
			}
		}
		if !found {
			t.Fatalf("no line (after the previous match) matches %q in:\n%s", p, out)
		}
	}
}

func TestStatusTableShowsMembersMovesAndDrainProgress(t *testing.T) {
	ns := newNamespace(t)
	createCluster(t, ns, "demo", 4, knownStatus())

	r := run(t, "", "status", "demo", "-n", ns)
	if r.code != ExitOK {
		t.Fatalf("exit %d, stderr %s", r.code, r.err)
	}
	wantLines(t, r.out,
		`^NaradCluster `+ns+`/demo \(generation 1, observed 1\)$`,
		`^Replicas:  4 desired, 4 current, 4 ready \(initial cluster size 3\)$`,
		`^Leader:    demo-0$`,
		`^TYPE\s+STATUS\s+REASON\s+MESSAGE$`,
		`^Ready\s+True\s+AllReplicasReady\s+4/4 ready, leader demo-0$`,
		`^Draining\s+True\s+Decommissioning\s+demo-3 is draining$`,
		`^POD\s+NODE\s+ROLE\s+STATUS\s+PARTITIONS\s+DRAINING$`,
		`^demo-0\s+demo-0\s+voter\s+alive\s+5\s+false$`,
		`^demo-3\s+demo-3\s+nonvoter\s+draining\s+3\s+true$`,
		`^MOVES: 2 in flight, 1 blocked$`,
		`^orders\s+7\s+demo-3\s+demo-1\s+target_dead$`,
		`^demo-3: started 2026-03-01T11:58:00Z, ETA 2026-03-01T12:03:00Z \(in 3m0s\)$`,
		`^  partitions `+regexp.QuoteMeta(progressBar(2, 5))+`  2 of 5 moved, 3 left$`,
		`^  bytes      `+regexp.QuoteMeta(progressBar(1<<20, 4<<20))+`  1.0 MiB of 4.0 MiB copied, 3.0 MiB left$`,
		`^  blocked:   leader_transfer$`,
	)
	if !strings.Contains(r.out, "  40% [") || !strings.Contains(r.out, "  25% [") {
		t.Fatalf("progress bars lack their percentages:\n%s", r.out)
	}
}

func TestStatusDocumentsCarryTheClusterAndDrainProgress(t *testing.T) {
	ns := newNamespace(t)
	nc := createCluster(t, ns, "demo", 4, knownStatus())
	st := knownStatus()
	want := clusterView{
		Name: "demo", Namespace: ns, Generation: nc.Generation, ObservedGeneration: 1,
		Replicas: 4, InitialClusterSize: 3, CurrentReplicas: 4, ReadyReplicas: 4, Leader: "demo-0",
		Conditions: st.Conditions, Members: st.Members, Moves: st.Moves,
		Draining: []drainView{{DrainingNodeStatus: st.Draining[0], PartitionsDone: 2, BytesDone: 1 << 20}},
	}
	for _, format := range []string{"json", "yaml"} {
		t.Run(format, func(t *testing.T) {
			r := run(t, "", "status", "demo", "-n", ns, "-o", format)
			if r.code != ExitOK {
				t.Fatalf("exit %d, stderr %s", r.code, r.err)
			}
			var got clusterView
			decode(t, format, r.out, &got)
			if d := cmp.Diff(want, got, timeEqual); d != "" {
				t.Fatalf("status -o %s (-want +got):\n%s", format, d)
			}
		})
	}
}

func TestMovesShowsInFlightAndBlockedWithReasons(t *testing.T) {
	ns := newNamespace(t)
	createCluster(t, ns, "demo", 4, knownStatus())

	r := run(t, "", "moves", "demo", "-n", ns)
	if r.code != ExitOK {
		t.Fatalf("exit %d, stderr %s", r.code, r.err)
	}
	wantLines(t, r.out, `^MOVES: 2 in flight, 1 blocked$`,
		`^TOPIC\s+PARTITION\s+FROM\s+TO\s+BLOCKED BY$`, `^orders\s+7\s+demo-3\s+demo-1\s+target_dead$`)

	want := movesView{Cluster: "demo", Namespace: ns, Moves: knownStatus().Moves}
	for _, format := range []string{"json", "yaml"} {
		r := run(t, "", "moves", "demo", "-n", ns, "-o", format)
		if r.code != ExitOK {
			t.Fatalf("-o %s: exit %d, stderr %s", format, r.code, r.err)
		}
		var got movesView
		decode(t, format, r.out, &got)
		if d := cmp.Diff(want, got); d != "" {
			t.Fatalf("moves -o %s (-want +got):\n%s", format, d)
		}
	}
}

func TestStatusOfAMissingClusterFails(t *testing.T) {
	ns := newNamespace(t)
	r := run(t, "", "status", "nope", "-n", ns)
	if r.code != ExitFailed || !strings.Contains(r.err, `NaradCluster "nope" not found`) {
		t.Fatalf("exit %d, stderr %q", r.code, r.err)
	}
}

func TestTopicsListsSpreadBacklogAndReadiness(t *testing.T) {
	ns := newNamespace(t)
	mk := func(name, brokerName, cluster string, st naradv1.TopicStatus) {
		tp := &naradv1.Topic{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: naradv1.TopicSpec{ClusterRef: naradv1.ClusterReference{Name: cluster},
				Name: brokerName, Partitions: 6},
		}
		if err := k8s.Create(t.Context(), tp); err != nil {
			t.Fatal(err)
		}
		tp.Status = st
		if err := k8s.Status().Update(t.Context(), tp); err != nil {
			t.Fatal(err)
		}
	}
	ready := []metav1.Condition{{Type: naradv1.ConditionReady, Status: metav1.ConditionTrue,
		Reason: "Synced", LastTransitionTime: metav1.NewTime(testNow)}}
	mk("orders", "orders.v1", "demo", naradv1.TopicStatus{Partitions: 6, Backlog: 42, Conditions: ready,
		Owners: map[string]int32{"demo-1": 2, "demo-0": 2, "demo-2": 2}})
	mk("audit", "", "demo", naradv1.TopicStatus{Partitions: 3})
	mk("other", "", "elsewhere", naradv1.TopicStatus{Partitions: 3, Conditions: ready})

	r := run(t, "", "topics", "--cluster", "demo", "-n", ns)
	if r.code != ExitOK {
		t.Fatalf("exit %d, stderr %s", r.code, r.err)
	}
	wantLines(t, r.out,
		`^NAME\s+TOPIC\s+CLUSTER\s+PARTITIONS\s+OWNERS\s+BACKLOG\s+READY$`,
		`^audit\s+audit\s+demo\s+3\s+-\s+0\s+Unknown$`,
		`^orders\s+orders\.v1\s+demo\s+6\s+demo-0:2,demo-1:2,demo-2:2\s+42\s+True$`)
	if strings.Contains(r.out, "elsewhere") {
		t.Fatalf("--cluster demo listed another cluster's topic:\n%s", r.out)
	}

	all := run(t, "", "topics", "-n", ns, "-o", "json")
	if all.code != ExitOK {
		t.Fatalf("exit %d, stderr %s", all.code, all.err)
	}
	var rows []topicRow
	decode(t, "json", all.out, &rows)
	want := []topicRow{
		{Name: "audit", Namespace: ns, Topic: "audit", Cluster: "demo", Partitions: 3, Ready: "Unknown"},
		{Name: "orders", Namespace: ns, Topic: "orders.v1", Cluster: "demo", Partitions: 6, Backlog: 42,
			Ready: "True", Owners: map[string]int32{"demo-0": 2, "demo-1": 2, "demo-2": 2}},
		{Name: "other", Namespace: ns, Topic: "other", Cluster: "elsewhere", Partitions: 3, Ready: "True"},
	}
	if d := cmp.Diff(want, rows); d != "" {
		t.Fatalf("topics -o json (-want +got):\n%s", d)
	}

	y := run(t, "", "topics", "-n", ns, "--cluster", "elsewhere", "-o", "yaml")
	var yrows []topicRow
	decode(t, "yaml", y.out, &yrows)
	if d := cmp.Diff(want[2:], yrows); y.code != ExitOK || d != "" {
		t.Fatalf("topics -o yaml: exit %d (-want +got):\n%s", y.code, d)
	}
}

func TestLinksListsStateEpochAndLag(t *testing.T) {
	ns := newNamespace(t)
	mk := func(name, cluster, parent, child string, delay int64, st naradv1.FanoutLinkStatus) {
		l := &naradv1.FanoutLink{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: naradv1.FanoutLinkSpec{ClusterRef: naradv1.ClusterReference{Name: cluster},
				Parent: parent, Child: child, DelayMs: delay},
		}
		if err := k8s.Create(t.Context(), l); err != nil {
			t.Fatal(err)
		}
		l.Status = st
		if err := k8s.Status().Update(t.Context(), l); err != nil {
			t.Fatal(err)
		}
	}
	mk("orders-replica", "demo", "orders", "orders-replica", 90_000, naradv1.FanoutLinkStatus{
		State: naradv1.FanoutLinkAttached, Epoch: "00000000000000a1", Lag: 17, DueLagSeconds: 4,
		Conditions: []metav1.Condition{{Type: naradv1.ConditionReady, Status: metav1.ConditionTrue,
			Reason: "Attached", LastTransitionTime: metav1.NewTime(testNow)}}})
	mk("x", "other", "a", "b", 0, naradv1.FanoutLinkStatus{State: naradv1.FanoutLinkPending})

	r := run(t, "", "links", "--cluster", "demo", "-n", ns)
	if r.code != ExitOK {
		t.Fatalf("exit %d, stderr %s", r.code, r.err)
	}
	wantLines(t, r.out,
		`^NAME\s+CLUSTER\s+PARENT\s+CHILD\s+DELAY\s+STATE\s+EPOCH\s+LAG\s+DUE LAG\s+READY$`,
		`^orders-replica\s+demo\s+orders\s+orders-replica\s+1m30s\s+Attached\s+00000000000000a1\s+17\s+4s\s+True$`)
	if strings.Contains(r.out, "Pending") {
		t.Fatalf("--cluster demo listed another cluster's link:\n%s", r.out)
	}

	for _, format := range []string{"json", "yaml"} {
		r := run(t, "", "links", "-n", ns, "-o", format)
		if r.code != ExitOK {
			t.Fatalf("-o %s: exit %d, stderr %s", format, r.code, r.err)
		}
		var rows []linkRow
		decode(t, format, r.out, &rows)
		want := []linkRow{
			{Name: "orders-replica", Namespace: ns, Cluster: "demo", Parent: "orders", Child: "orders-replica",
				DelayMs: 90_000, State: "Attached", Epoch: "00000000000000a1", Lag: 17, DueLagSeconds: 4, Ready: "True"},
			{Name: "x", Namespace: ns, Cluster: "other", Parent: "a", Child: "b", State: "Pending", Ready: "Unknown"},
		}
		if d := cmp.Diff(want, rows); d != "" {
			t.Fatalf("links -o %s (-want +got):\n%s", format, d)
		}
	}
}

func TestUsersListsGrantsSecretAndReadiness(t *testing.T) {
	ns := newNamespace(t)
	mk := func(name, cluster string, grants []naradv1.UserGrant, st naradv1.NaradUserStatus) {
		u := &naradv1.NaradUser{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec:       naradv1.NaradUserSpec{ClusterRef: naradv1.ClusterReference{Name: cluster}, Grants: grants},
		}
		if err := k8s.Create(t.Context(), u); err != nil {
			t.Fatal(err)
		}
		u.Status = st
		if err := k8s.Status().Update(t.Context(), u); err != nil {
			t.Fatal(err)
		}
	}
	mk("writer", "demo", []naradv1.UserGrant{
		{Action: naradv1.GrantProduce, Patterns: []string{"orders", "audit"}},
		{Action: naradv1.GrantConsume, Patterns: []string{"orders-*"}},
	}, naradv1.NaradUserStatus{Username: "writer", SecretName: "writer-narad-user",
		Conditions: []metav1.Condition{{Type: naradv1.ConditionReady, Status: metav1.ConditionTrue,
			Reason: "Reconciled", LastTransitionTime: metav1.NewTime(testNow)}}})
	mk("ops", "demo", []naradv1.UserGrant{{Action: naradv1.GrantAdmin}}, naradv1.NaradUserStatus{
		Conditions: []metav1.Condition{{Type: naradv1.ConditionReady, Status: metav1.ConditionFalse,
			Reason: "PasswordSecretNotFound", LastTransitionTime: metav1.NewTime(testNow)}}})
	mk("far", "elsewhere", nil, naradv1.NaradUserStatus{})

	r := run(t, "", "users", "--cluster", "demo", "-n", ns)
	if r.code != ExitOK {
		t.Fatalf("exit %d, stderr %s", r.code, r.err)
	}
	wantLines(t, r.out,
		`^NAME\s+USERNAME\s+CLUSTER\s+GRANTS\s+SECRET\s+READY$`,
		`^ops\s+ops\s+demo\s+admin\s+-\s+False \(PasswordSecretNotFound\)$`,
		`^writer\s+writer\s+demo\s+produce:orders,audit consume:orders-\*\s+writer-narad-user\s+True$`)
	if strings.Contains(r.out, "elsewhere") {
		t.Fatalf("--cluster demo listed another cluster's user:\n%s", r.out)
	}

	j := run(t, "", "users", "-n", ns, "--cluster", "elsewhere", "-o", "json")
	var rows []userRow
	decode(t, "json", j.out, &rows)
	want := []userRow{{Name: "far", Namespace: ns, Username: "far", Cluster: "elsewhere", Ready: "Unknown"}}
	if d := cmp.Diff(want, rows); j.code != ExitOK || d != "" {
		t.Fatalf("users -o json: exit %d (-want +got):\n%s", j.code, d)
	}
}

func TestUsageErrorsExitTwo(t *testing.T) {
	for _, args := range [][]string{
		{"status"},
		{"status", "a", "b"},
		{"frobnicate"},
		{"status", "demo", "-o", "xml"},
		{"topics", "--no-such-flag"},
		{"scale", "demo"},
		{"scale", "demo", "--to", "0"},
		{"scale", "demo", "--to", "many"},
		{"decommission", "demo"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			r := run(t, "", args...)
			if r.code != ExitUsage || !strings.Contains(r.err, "--help' for usage") {
				t.Fatalf("exit %d, stderr %q", r.code, r.err)
			}
		})
	}
}

func decode(t *testing.T, format, doc string, into any) {
	t.Helper()
	var err error
	if format == "yaml" {
		err = yaml.UnmarshalStrict([]byte(doc), into)
	} else {
		dec := json.NewDecoder(strings.NewReader(doc))
		dec.DisallowUnknownFields()
		err = dec.Decode(into)
	}
	if err != nil {
		t.Fatalf("decode %s: %v\n%s", format, err, doc)
	}
}

// timeEqual compares metav1.Times at the second, the precision they are serialised with.
var timeEqual = cmp.Comparer(func(a, b metav1.Time) bool { return a.Equal(&b) })

// status shows the replication defaults, the under-replicated count and the Topics of the
// cluster that report under-replicated partitions.
func TestStatusShowsUnderReplicatedPartitions(t *testing.T) {
	ns := newNamespace(t)
	st := knownStatus()
	st.Replication = &naradv1.ReplicationStatus{DefaultReplicationFactor: 3, UnderReplicatedPartitions: 2, UnderMinInSyncPartitions: 1}
	createCluster(t, ns, "demo", 4, st)
	for _, tc := range []struct {
		name, cluster string
		under         int32
	}{{"orders", "demo", 2}, {"healthy", "demo", 0}, {"elsewhere", "other", 5}} {
		tp := &naradv1.Topic{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: tc.name},
			Spec: naradv1.TopicSpec{ClusterRef: naradv1.ClusterReference{Name: tc.cluster}, Name: tc.name + "-t", Partitions: 3}}
		if err := k8s.Create(t.Context(), tp); err != nil {
			t.Fatal(err)
		}
		tp.Status = naradv1.TopicStatus{ReplicationFactor: 3, MinInSyncReplicas: 2, UnderReplicatedPartitions: tc.under, UnderMinInSyncPartitions: min(tc.under, 1)}
		if err := k8s.Status().Update(t.Context(), tp); err != nil {
			t.Fatal(err)
		}
	}
	r := run(t, "", "status", "demo", "-n", ns)
	if r.code != ExitOK {
		t.Fatalf("exit %d, stderr %s", r.code, r.err)
	}
	wantLines(t, r.out,
		`^REPLICATION: new topics R 3, M min\(2, R\); 2 partitions under-replicated, 1 below min_insync_replicas$`,
		`^NAME\s+TOPIC\s+R\s+M\s+UNDER-REPLICATED\s+BELOW-M$`,
		`^orders\s+orders-t\s+3\s+2\s+2\s+1$`)
	if strings.Contains(r.out, "healthy") || strings.Contains(r.out, "elsewhere") {
		t.Fatalf("status lists topics that are fully replicated or of another cluster:\n%s", r.out)
	}
	r = run(t, "", "status", "demo", "-n", ns, "-o", "json")
	var got clusterView
	decode(t, "json", r.out, &got)
	if len(got.UnderReplicatedTopics) != 1 || got.UnderReplicatedTopics[0].Topic != "orders-t" || got.Replication == nil ||
		got.Replication.UnderReplicatedPartitions != 2 {
		t.Fatalf("status -o json replication: %+v %+v", got.Replication, got.UnderReplicatedTopics)
	}
}
