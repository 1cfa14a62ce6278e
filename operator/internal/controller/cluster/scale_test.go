package cluster

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	naradv1 "narad.dev/api/v1alpha1"
	"narad.dev/broker/client"
	"narad.dev/operator/brokers"
	"narad.dev/operator/internal/brokertest"
	"narad.dev/operator/naming"
)

const scaleTestPassword = "s3cret-admin"

// scaleEvent is one event the scale-down recorded.
type scaleEvent struct{ Type, Reason, Note string }

// scaleEvents is an events.EventRecorder keeping every event for the test to read.
type scaleEvents struct {
	mu     sync.Mutex
	events []scaleEvent
}

func (e *scaleEvents) Eventf(_ runtime.Object, _ runtime.Object, eventtype, reason, _, note string, args ...any) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.events = append(e.events, scaleEvent{eventtype, reason, fmt.Sprintf(note, args...)})
}

func (e *scaleEvents) count(reason string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := 0
	for _, ev := range e.events {
		if ev.Reason == reason {
			n++
		}
	}
	return n
}

// scaleHarness plays the parts around r.scale: the API server (controller-runtime's fake
// client), the brokers (brokertest.Fake), the rest of the reconciler (step: observe, scale,
// apply the StatefulSet's replicas, write the status) and the StatefulSet controller (syncPods).
type scaleHarness struct {
	t      *testing.T
	ctx    context.Context
	name   string
	kube   ctrlclient.Client
	fake   *brokertest.Fake
	events *scaleEvents
	r      *Reconciler
	now    time.Time
}

// scaleScheme is built once: the built-in kinds take a while to register.
var scaleScheme = sync.OnceValue(func() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(naradv1.AddToScheme(s))
	return s
})

// newScaleHarness builds a cluster named name (unique per test: the metrics are global) with
// spec.replicas spec, a StatefulSet of len(members) replicas, one pod and one claim per
// ordinal, and brokers serving members.
func newScaleHarness(t *testing.T, name string, spec int32, policy naradv1.PVCRetentionPolicy, members []client.Member) *scaleHarness {
	t.Helper()
	nc := &naradv1.NaradCluster{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "narad", Generation: 1},
		Spec: naradv1.NaradClusterSpec{Replicas: spec, InitialClusterSize: 3,
			Storage: naradv1.StorageSpec{PVCRetentionOnScaleDown: policy}},
	}
	objs := []ctrlclient.Object{
		nc,
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: naming.AdminSecret(nc), Namespace: nc.Namespace},
			Data: map[string][]byte{naradv1.AdminPasswordKey: []byte(scaleTestPassword)}},
		&appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: naming.StatefulSet(nc), Namespace: nc.Namespace},
			Spec: appsv1.StatefulSetSpec{Replicas: ptr.To(int32(len(members)))}},
	}
	for i := range int32(len(members)) {
		objs = append(objs, scalePod(nc, i), &corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Name: naming.PVC(nc, i), Namespace: nc.Namespace, Labels: naming.Selector(nc)}})
	}
	kube := fake.NewClientBuilder().WithScheme(scaleScheme()).WithStatusSubresource(&naradv1.NaradCluster{}).
		WithObjects(objs...).Build()
	f := brokertest.New(brokertest.Cluster{Members: members, Leader: naming.NodeID(nc, 0)}, naming.AdminUser, scaleTestPassword)
	t.Cleanup(f.Close)
	h := &scaleHarness{t: t, ctx: context.Background(), name: name, kube: kube, fake: f, events: &scaleEvents{},
		now: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	h.r = h.reconciler()
	return h
}

// reconciler is a fresh Reconciler on the same objects and brokers (an operator restart).
func (h *scaleHarness) reconciler() *Reconciler {
	resolver := brokers.ResolverFunc(func(*naradv1.NaradCluster, int32) string { return h.fake.URL() })
	return &Reconciler{Client: h.kube, Scheme: h.kube.Scheme(), Recorder: h.events,
		Brokers: &brokers.Connector{Reader: h.kube, Resolver: resolver, Timeout: 5 * time.Second},
		Now:     func() time.Time { return h.now }}
}

func scalePod(nc *naradv1.NaradCluster, ordinal int32) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: naming.PodName(nc, ordinal), Namespace: nc.Namespace,
		Labels: naming.Selector(nc)}}
}

// members builds n alive members of cluster name: ordinals 0-2 voters, the rest non-voters,
// each owning owned partitions.
func scaleMembers(name string, n, owned int) []client.Member {
	var ms []client.Member
	for i := range n {
		role := "voter"
		if i >= 3 {
			role = "nonvoter"
		}
		ms = append(ms, client.Member{ID: fmt.Sprintf("%s-%d", name, i), Status: client.StatusAlive, RaftRole: role,
			OwnedPartitions: owned, DecommissionBlocked: []string{}})
	}
	return ms
}

func (h *scaleHarness) cluster() *naradv1.NaradCluster {
	h.t.Helper()
	var nc naradv1.NaradCluster
	if err := h.kube.Get(h.ctx, types.NamespacedName{Namespace: "narad", Name: h.name}, &nc); err != nil {
		h.t.Fatalf("get cluster: %v", err)
	}
	return &nc
}

func (h *scaleHarness) sts() *appsv1.StatefulSet {
	h.t.Helper()
	var sts appsv1.StatefulSet
	if err := h.kube.Get(h.ctx, types.NamespacedName{Namespace: "narad", Name: h.name}, &sts); err != nil {
		h.t.Fatalf("get statefulset: %v", err)
	}
	return &sts
}

// observe reads the brokers the way the reconciler's observation does.
func (h *scaleHarness) observe() *observation {
	h.t.Helper()
	cl, err := client.New(h.fake.URL(), client.WithBasicAuth(naming.AdminUser, scaleTestPassword))
	if err != nil {
		h.t.Fatal(err)
	}
	ml, err := cl.ClusterMembers(h.ctx)
	if err != nil {
		return &observation{Err: err}
	}
	return &observation{Members: ml.Members, Leader: ml.Leader, LeaderReachable: ml.LeaderReachable}
}

// step is one reconcile: observe, scale, apply the replica count to the StatefulSet and write
// the status. It returns the count and the status written.
func (h *scaleHarness) step() (int32, time.Duration, *naradv1.NaradClusterStatus) {
	h.t.Helper()
	return h.stepWith(h.observe())
}

func (h *scaleHarness) stepWith(obs *observation) (int32, time.Duration, *naradv1.NaradClusterStatus) {
	h.t.Helper()
	nc := h.cluster()
	sts := h.sts()
	st := nc.Status.DeepCopy()
	replicas, requeue, err := h.r.scale(h.ctx, nc, sts, obs, st)
	if err != nil {
		h.t.Fatalf("scale: %v", err)
	}
	sts.Spec.Replicas = ptr.To(replicas)
	if err := h.kube.Update(h.ctx, sts); err != nil {
		h.t.Fatalf("update statefulset: %v", err)
	}
	st.Replicas = replicas // as the status author does: the count applied
	nc.Status = *st
	if err := h.kube.Status().Update(h.ctx, nc); err != nil {
		h.t.Fatalf("update status: %v", err)
	}
	return replicas, requeue, st
}

// syncPods plays the StatefulSet controller: pods above the replica count go, missing ones come.
func (h *scaleHarness) syncPods() {
	h.t.Helper()
	nc := h.cluster()
	replicas := *h.sts().Spec.Replicas
	for i := range int32(10) {
		pod := scalePod(nc, i)
		var err error
		if i < replicas {
			err = h.kube.Create(h.ctx, pod)
			if apierrors.IsAlreadyExists(err) {
				err = nil
			}
		} else {
			err = ctrlclient.IgnoreNotFound(h.kube.Delete(h.ctx, pod))
		}
		if err != nil {
			h.t.Fatalf("sync pod %d: %v", i, err)
		}
	}
}

func (h *scaleHarness) setSpecReplicas(n int32) {
	h.t.Helper()
	nc := h.cluster()
	nc.Spec.Replicas = n
	nc.Generation++
	if err := h.kube.Update(h.ctx, nc); err != nil {
		h.t.Fatalf("update spec: %v", err)
	}
}

func (h *scaleHarness) member(i int) string { return fmt.Sprintf("%s-%d", h.name, i) }

// updateMember changes member i as the brokers would.
func (h *scaleHarness) updateMember(i int, fn func(m *client.Member)) {
	h.fake.Update(func(c *brokertest.Cluster) {
		for j := range c.Members {
			if c.Members[j].ID == h.member(i) {
				fn(&c.Members[j])
			}
		}
	})
}

// decommissionCalls lists the nodes of real (not dry-run) decommission POSTs, in order.
func (h *scaleHarness) decommissionCalls(method string, dryRun bool) []string {
	var ids []string
	for _, c := range h.fake.Calls() {
		if c.Method != method || !strings.HasSuffix(c.Path, "/decommission") || strings.Contains(c.Query, "dry_run=true") != dryRun {
			continue
		}
		ids = append(ids, strings.Split(c.Path, "/")[4])
	}
	return ids
}

func (h *scaleHarness) pvcExists(i int32) bool {
	h.t.Helper()
	var pvc corev1.PersistentVolumeClaim
	err := h.kube.Get(h.ctx, types.NamespacedName{Namespace: "narad", Name: naming.PVC(h.cluster(), i)}, &pvc)
	if err != nil && !apierrors.IsNotFound(err) {
		h.t.Fatal(err)
	}
	return err == nil
}

func (h *scaleHarness) metric(result string) float64 {
	return testutil.ToFloat64(decommissions.WithLabelValues("narad", h.name, result))
}

func scaleCondition(t *testing.T, st *naradv1.NaradClusterStatus, typ string) metav1.Condition {
	t.Helper()
	c := meta.FindStatusCondition(st.Conditions, typ)
	if c == nil {
		t.Fatalf("no %s condition in %+v", typ, st.Conditions)
	}
	return *c
}

func wantScaleCondition(t *testing.T, st *naradv1.NaradClusterStatus, typ string, status metav1.ConditionStatus, reason string) metav1.Condition {
	t.Helper()
	c := scaleCondition(t, st, typ)
	if c.Status != status || c.Reason != reason {
		t.Fatalf("%s = %s/%s (%s), want %s/%s", typ, c.Status, c.Reason, c.Message, status, reason)
	}
	return c
}

func TestScaleWithoutStatefulSetCreatesSpecReplicas(t *testing.T) {
	h := newScaleHarness(t, "scale-create", 3, naradv1.PVCRetentionDelete, nil)
	nc := h.cluster()
	st := &naradv1.NaradClusterStatus{}
	replicas, _, err := h.r.scale(h.ctx, nc, nil, &observation{Err: brokers.ErrNoBroker}, st)
	if err != nil || replicas != 3 {
		t.Fatalf("scale = %d, %v; want 3", replicas, err)
	}
	wantScaleCondition(t, st, naradv1.ConditionDegraded, metav1.ConditionFalse, degradedAsExpected)
	wantScaleCondition(t, st, naradv1.ConditionDraining, metav1.ConditionFalse, drainingNone)
}

func TestScaleUpGrowsWithoutTouchingBrokers(t *testing.T) {
	h := newScaleHarness(t, "scale-up", 5, naradv1.PVCRetentionDelete, scaleMembers("scale-up", 3, 4))
	replicas, _, st := h.step()
	if replicas != 5 {
		t.Fatalf("replicas = %d, want 5", replicas)
	}
	if calls := h.decommissionCalls("POST", true); len(calls) != 0 {
		t.Fatalf("dry runs %v during a scale-up", calls)
	}
	wantScaleCondition(t, st, naradv1.ConditionDegraded, metav1.ConditionFalse, degradedAsExpected)
}

func TestScaleDownRefusedIsDegradedAndChangesNothing(t *testing.T) {
	h := newScaleHarness(t, "scale-refused", 3, naradv1.PVCRetentionDelete, scaleMembers("scale-refused", 4, 3))
	h.fake.Update(func(c *brokertest.Cluster) {
		c.Refuse = map[string][]string{h.member(3): {"no_receivers", "no_live_majority"}}
	})
	for range 3 {
		replicas, _, st := h.step()
		if replicas != 4 {
			t.Fatalf("replicas = %d after a refusal, want 4", replicas)
		}
		c := wantScaleCondition(t, st, naradv1.ConditionDegraded, metav1.ConditionTrue, degradedScaleDownRefused)
		if !strings.Contains(c.Message, "no_receivers") || !strings.Contains(c.Message, "no_live_majority") || c.ObservedGeneration != 1 {
			t.Fatalf("Degraded = %+v, want the brokers' reasons and generation 1", c)
		}
		wantScaleCondition(t, st, naradv1.ConditionDraining, metav1.ConditionFalse, drainingNone)
		if len(st.Draining) != 0 {
			t.Fatalf("draining %+v after a refusal", st.Draining)
		}
	}
	if got := h.decommissionCalls("POST", false); len(got) != 0 {
		t.Fatalf("decommission POSTs %v after a refused dry run", got)
	}
	if h.events.count(eventScaleDownRefused) != 1 || h.metric(resultRefused) != 1 {
		t.Fatalf("refusal events %d, refused metric %v; want 1 each (once per generation)",
			h.events.count(eventScaleDownRefused), h.metric(resultRefused))
	}
	// A new generation that is still refused is reported again, once.
	h.setSpecReplicas(2)
	h.step()
	h.step()
	if h.events.count(eventScaleDownRefused) != 2 || h.metric(resultRefused) != 2 {
		t.Fatalf("refusal events %d, refused metric %v after a new generation; want 2 each",
			h.events.count(eventScaleDownRefused), h.metric(resultRefused))
	}
	if m, _ := h.fake.Member(h.member(3)); m.Draining {
		t.Fatal("a refused node was marked draining")
	}
}

func TestScaleDownRefusedOnStartIsTreatedLikeARefusedDryRun(t *testing.T) {
	h := newScaleHarness(t, "scale-409", 3, naradv1.PVCRetentionDelete, scaleMembers("scale-409", 4, 3))
	h.fake.Update(func(c *brokertest.Cluster) { c.RefuseOnStart = map[string][]string{h.member(3): {"min_voters"}} })
	replicas, _, st := h.step()
	if replicas != 4 {
		t.Fatalf("replicas = %d, want 4", replicas)
	}
	c := wantScaleCondition(t, st, naradv1.ConditionDegraded, metav1.ConditionTrue, degradedScaleDownRefused)
	if !strings.Contains(c.Message, "min_voters") {
		t.Fatalf("Degraded message %q lacks the 409's reason", c.Message)
	}
	if len(st.Draining) != 0 || h.metric(resultStarted) != 0 || h.metric(resultRefused) != 1 {
		t.Fatalf("draining %+v, started %v, refused %v", st.Draining, h.metric(resultStarted), h.metric(resultRefused))
	}
}

// TestScaleDownShrinksOnlyOnceTheNodeOwnsNothingAndLeftRaft walks one node's drain: the
// StatefulSet keeps its size while the node owns partitions or is still a voter.
func TestScaleDownShrinksOnlyOnceTheNodeOwnsNothingAndLeftRaft(t *testing.T) {
	const name = "scale-drain"
	members := scaleMembers(name, 4, 4)
	members[3].RaftRole = "voter"
	h := newScaleHarness(t, name, 3, naradv1.PVCRetentionDelete, members)
	h.fake.Update(func(c *brokertest.Cluster) {
		c.Topics = []client.TopicDetail{
			scaleTopic("orders", map[string]int64{h.member(3): 1000, h.member(0): 7}),
			scaleTopic("events", map[string]int64{h.member(3): 500, h.member(1): 9}),
		}
	})
	start := h.now

	replicas, requeue, st := h.step()
	if replicas != 4 || requeue != drainPoll {
		t.Fatalf("step 1 = %d, %v; want 4, %v", replicas, requeue, drainPoll)
	}
	if got := h.decommissionCalls("POST", false); !slices.Equal(got, []string{h.member(3)}) {
		t.Fatalf("decommission POSTs %v, want [%s]", got, h.member(3))
	}
	if len(st.Draining) != 1 {
		t.Fatalf("draining %+v, want one entry", st.Draining)
	}
	e := st.Draining[0]
	if e.NodeID != h.member(3) || e.PartitionsAtStart != 4 || e.PartitionsLeft != 4 || e.BytesAtStart != 1500 ||
		e.BytesLeft != 1500 || e.StartedAt == nil || !e.StartedAt.Time.Equal(start) {
		t.Fatalf("entry at start = %+v", e)
	}
	wantScaleCondition(t, st, naradv1.ConditionDraining, metav1.ConditionTrue, drainingDecommissioning)
	wantScaleCondition(t, st, naradv1.ConditionDegraded, metav1.ConditionFalse, degradedAsExpected)
	if h.events.count(eventDecommissionStarted) != 1 || h.metric(resultStarted) != 1 {
		t.Fatalf("started events %d, metric %v", h.events.count(eventDecommissionStarted), h.metric(resultStarted))
	}
	if g := testutil.ToFloat64(drainingNodes.WithLabelValues("narad", name)); g != 1 {
		t.Fatalf("draining gauge %v, want 1", g)
	}
	for _, metric := range []string{"narad_operator_draining_nodes", "narad_operator_decommissions_total"} {
		if n, err := testutil.GatherAndCount(metrics.Registry, metric); err != nil || n == 0 {
			t.Fatalf("%s not served by controller-runtime's registry: %d series, %v", metric, n, err)
		}
	}

	// Two partitions (1000 bytes) moved away in 10 s: 500 bytes left, ETA 5 s later.
	h.now = start.Add(10 * time.Second)
	h.updateMember(3, func(m *client.Member) {
		m.OwnedPartitions = 2
		m.DecommissionBlocked = []string{"leader_transfer"}
	})
	h.fake.Update(func(c *brokertest.Cluster) {
		c.Topics[0] = scaleTopic("orders", map[string]int64{h.member(0): 1007})
	})
	replicas, _, st = h.step()
	e = st.Draining[0]
	if replicas != 4 || e.PartitionsLeft != 2 || e.BytesLeft != 500 || e.ETA == nil ||
		!e.ETA.Time.Equal(h.now.Add(5*time.Second)) || !slices.Equal(e.BlockedReasons, []string{"leader_transfer"}) {
		t.Fatalf("mid-drain: replicas %d, entry %+v", replicas, e)
	}
	c := scaleCondition(t, st, naradv1.ConditionDraining)
	if !strings.Contains(c.Message, "leader_transfer") {
		t.Fatalf("Draining message %q lacks the blocked reason", c.Message)
	}

	// Owns nothing but is still a voter: not yet.
	h.updateMember(3, func(m *client.Member) { m.OwnedPartitions = 0 })
	if replicas, _, _ = h.step(); replicas != 4 {
		t.Fatalf("shrank to %d while the node is still a voter", replicas)
	}
	// Left Raft but owns a partition again (a forced promotion): not yet.
	h.updateMember(3, func(m *client.Member) { m.RaftRole = "none"; m.OwnedPartitions = 1 })
	if replicas, _, _ = h.step(); replicas != 4 {
		t.Fatalf("shrank to %d while the node owns a partition", replicas)
	}
	if h.metric(resultCompleted) != 0 || h.events.count(eventNodeRemoved) != 0 {
		t.Fatal("node reported removed before it was")
	}

	h.updateMember(3, func(m *client.Member) { m.OwnedPartitions = 0 })
	replicas, _, _ = h.step()
	if replicas != 3 {
		t.Fatalf("replicas = %d once drained, want 3", replicas)
	}
	if h.events.count(eventNodeRemoved) != 1 || h.metric(resultCompleted) != 1 {
		t.Fatalf("removed events %d, completed metric %v", h.events.count(eventNodeRemoved), h.metric(resultCompleted))
	}
	if got := h.decommissionCalls("POST", false); len(got) != 1 {
		t.Fatalf("decommission POSTs %v, want exactly one", got)
	}
	if g := testutil.ToFloat64(drainingNodes.WithLabelValues("narad", name)); g != 0 {
		t.Fatalf("draining gauge %v after the removal, want 0", g)
	}

	// A lagging cache shows the StatefulSet at 4 again: still 3, and the removal is not
	// reported twice.
	stale := h.sts()
	stale.Spec.Replicas = ptr.To(int32(4))
	if err := h.kube.Update(h.ctx, stale); err != nil {
		t.Fatal(err)
	}
	if replicas, _, _ = h.step(); replicas != 3 {
		t.Fatalf("replicas = %d from a stale StatefulSet, want 3", replicas)
	}
	if h.events.count(eventNodeRemoved) != 1 || h.metric(resultCompleted) != 1 {
		t.Fatalf("removal reported again: events %d, completed %v", h.events.count(eventNodeRemoved), h.metric(resultCompleted))
	}
}

func scaleTopic(name string, sizes map[string]int64) client.TopicDetail {
	d := client.TopicDetail{Topic: client.Topic{Name: name, Partitions: len(sizes)}}
	var owners []string
	for o := range sizes {
		owners = append(owners, o)
	}
	slices.Sort(owners)
	for i, o := range owners {
		d.PartitionStats = append(d.PartitionStats, client.PartitionStat{Index: i, OwnerNode: o, Available: true, SizeBytes: sizes[o]})
	}
	return d
}

// drainAll plays the brokers finishing every draining node's drain.
func (h *scaleHarness) drainAll() {
	h.fake.Update(func(c *brokertest.Cluster) {
		for i := range c.Members {
			if c.Members[i].Draining {
				c.Members[i].OwnedPartitions, c.Members[i].RaftRole = 0, "none"
			}
		}
	})
}

func TestScaleDownRemovesOneNodeAtATime(t *testing.T) {
	const name = "scale-five"
	h := newScaleHarness(t, name, 3, naradv1.PVCRetentionDelete, scaleMembers(name, 5, 2))
	var trace []string
	for i := 0; i < 20 && *h.sts().Spec.Replicas != 3; i++ {
		before := *h.sts().Spec.Replicas
		replicas, _, st := h.step()
		if before-replicas > 1 {
			t.Fatalf("shrank from %d to %d in one step", before, replicas)
		}
		active := 0
		for _, e := range st.Draining {
			if o, _ := naming.Ordinal(h.cluster(), e.NodeID); o < replicas {
				active++
			}
		}
		if active > 1 {
			t.Fatalf("%d nodes draining at once: %+v", active, st.Draining)
		}
		trace = append(trace, fmt.Sprintf("%d→%d", before, replicas))
		h.drainAll()
		h.syncPods()
	}
	if *h.sts().Spec.Replicas != 3 {
		t.Fatalf("never reached 3 replicas: %v", trace)
	}
	if got := h.decommissionCalls("POST", false); !slices.Equal(got, []string{h.member(4), h.member(3)}) {
		t.Fatalf("decommissions %v, want node 4 then node 3", got)
	}
	// Node 3's decommission started only once the StatefulSet had shrunk past node 4.
	if !slices.Contains(trace, "5→4") || slices.Index(trace, "5→4") > slices.Index(trace, "4→3") {
		t.Fatalf("shrink order %v", trace)
	}
	_, _, st := h.step()
	wantScaleCondition(t, st, naradv1.ConditionDraining, metav1.ConditionFalse, drainingNone)
	if h.pvcExists(3) || h.pvcExists(4) || !h.pvcExists(2) {
		t.Fatal("claims of removed nodes not deleted, or a kept node's claim deleted")
	}
	if h.metric(resultStarted) != 2 || h.metric(resultCompleted) != 2 {
		t.Fatalf("started %v completed %v, want 2 and 2", h.metric(resultStarted), h.metric(resultCompleted))
	}
}

func TestScaleDownClaimFollowsRetentionPolicyOnceThePodIsGone(t *testing.T) {
	for _, tc := range []struct {
		name   string
		policy naradv1.PVCRetentionPolicy
		kept   bool
		event  string
	}{
		{"scale-pvc-delete", naradv1.PVCRetentionDelete, false, eventPVCDeleted},
		{"scale-pvc-retain", naradv1.PVCRetentionRetain, true, eventPVCRetained},
		{"scale-pvc-unset", "", true, eventPVCRetained}, // the API's default is Retain
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newScaleHarness(t, tc.name, 3, tc.policy, scaleMembers(tc.name, 4, 1))
			h.step() // decommission starts
			h.drainAll()
			if replicas, _, _ := h.step(); replicas != 3 {
				t.Fatalf("replicas = %d, want 3", replicas)
			}
			// The pod is still terminating: the claim stays, the growth would wait.
			_, requeue, st := h.step()
			if !h.pvcExists(3) || requeue != drainPoll {
				t.Fatalf("claim touched (or no requeue %v) while the pod still exists", requeue)
			}
			wantScaleCondition(t, st, naradv1.ConditionDraining, metav1.ConditionTrue, drainingRemovingPods)
			if !h.r.scalingDown(h.cluster(), st) {
				t.Fatal("scalingDown false while a removed pod is still going")
			}
			h.syncPods()
			_, _, st = h.step()
			if h.pvcExists(3) != tc.kept || h.events.count(tc.event) != 1 {
				t.Fatalf("claim exists %v (want %v), %s events %d", h.pvcExists(3), tc.kept, tc.event, h.events.count(tc.event))
			}
			if !h.pvcExists(2) {
				t.Fatal("a kept node's claim was deleted")
			}
			if len(st.Draining) != 0 || h.r.scalingDown(h.cluster(), st) {
				t.Fatalf("draining %+v after the claim was dealt with", st.Draining)
			}
			wantScaleCondition(t, st, naradv1.ConditionDraining, metav1.ConditionFalse, drainingNone)
			h.step()
			if h.events.count(tc.event) != 1 {
				t.Fatalf("%s reported %d times", tc.event, h.events.count(tc.event))
			}
		})
	}
}

func TestScaleDownResumesAfterOperatorRestart(t *testing.T) {
	const name = "scale-restart"
	h := newScaleHarness(t, name, 3, naradv1.PVCRetentionDelete, scaleMembers(name, 4, 3))
	_, _, st := h.step()
	started := st.Draining[0].StartedAt

	h.r = h.reconciler() // restart: nothing in memory
	h.now = h.now.Add(time.Minute)
	h.updateMember(3, func(m *client.Member) { m.OwnedPartitions = 1 })
	replicas, _, st := h.step()
	if replicas != 4 || len(st.Draining) != 1 || !st.Draining[0].StartedAt.Equal(started) || st.Draining[0].PartitionsAtStart != 3 ||
		st.Draining[0].PartitionsLeft != 1 {
		t.Fatalf("after restart: replicas %d, draining %+v", replicas, st.Draining)
	}
	if got := h.decommissionCalls("POST", false); len(got) != 1 {
		t.Fatalf("decommission POSTs %v, want the first one only", got)
	}
	h.drainAll()
	h.r = h.reconciler()
	if replicas, _, _ = h.step(); replicas != 3 {
		t.Fatalf("replicas = %d, want 3", replicas)
	}
}

// TestScaleDownAdoptsADrainItLostTrackOf: the operator stopped between its decommission POST and
// the status write; the brokers' draining flag is enough to carry on.
func TestScaleDownAdoptsADrainItLostTrackOf(t *testing.T) {
	const name = "scale-adopt"
	members := scaleMembers(name, 4, 2)
	members[3].Draining, members[3].Status = true, client.StatusDraining
	h := newScaleHarness(t, name, 3, naradv1.PVCRetentionDelete, members)
	replicas, _, st := h.step()
	if replicas != 4 || len(st.Draining) != 1 || st.Draining[0].NodeID != h.member(3) || st.Draining[0].PartitionsAtStart != 2 {
		t.Fatalf("replicas %d, draining %+v", replicas, st.Draining)
	}
	if got := h.decommissionCalls("POST", false); len(got) != 0 {
		t.Fatalf("decommission POSTs %v for a node already draining", got)
	}
	wantScaleCondition(t, st, naradv1.ConditionDraining, metav1.ConditionTrue, drainingDecommissioning)
}

func TestScaleUpMidDrainCancelsTheDecommission(t *testing.T) {
	const name = "scale-cancel"
	h := newScaleHarness(t, name, 3, naradv1.PVCRetentionDelete, scaleMembers(name, 4, 3))
	h.step()
	if m, _ := h.fake.Member(h.member(3)); !m.Draining {
		t.Fatal("node 3 not draining after the first step")
	}
	h.setSpecReplicas(4)
	replicas, _, st := h.step()
	if replicas != 4 {
		t.Fatalf("replicas = %d, want 4", replicas)
	}
	if got := h.decommissionCalls("DELETE", false); !slices.Equal(got, []string{h.member(3)}) {
		t.Fatalf("cancels %v, want [%s]", got, h.member(3))
	}
	if m, _ := h.fake.Member(h.member(3)); m.Draining {
		t.Fatal("node 3 still draining after the cancel")
	}
	if len(st.Draining) != 0 || h.events.count(eventDecommissionCancelled) != 1 {
		t.Fatalf("draining %+v, cancel events %d", st.Draining, h.events.count(eventDecommissionCancelled))
	}
	wantScaleCondition(t, st, naradv1.ConditionDraining, metav1.ConditionFalse, drainingNone)
	h.step()
	if got := h.decommissionCalls("DELETE", false); len(got) != 1 {
		t.Fatalf("cancels %v, want one", got)
	}
}

// TestScaleUpAfterTheNodeLeftRaftFinishesTheRemovalFirst: a node out of Raft cannot be
// cancelled; it is scaled away, its pod waited for, and only then the StatefulSet grows again.
func TestScaleUpAfterTheNodeLeftRaftFinishesTheRemovalFirst(t *testing.T) {
	const name = "scale-regrow"
	h := newScaleHarness(t, name, 3, naradv1.PVCRetentionDelete, scaleMembers(name, 4, 3))
	h.step()
	h.drainAll()
	h.setSpecReplicas(4)
	if replicas, _, _ := h.step(); replicas != 3 {
		t.Fatalf("replicas = %d, want 3 (finish the removal)", replicas)
	}
	if got := h.decommissionCalls("DELETE", false); len(got) != 0 {
		t.Fatalf("cancelled %v a node out of Raft", got)
	}
	if replicas, _, _ := h.step(); replicas != 3 {
		t.Fatalf("grew to %d while the removed pod still exists", replicas)
	}
	h.syncPods()
	if replicas, _, _ := h.step(); replicas != 4 {
		t.Fatalf("replicas = %d after the pod went, want 4", replicas)
	}
	if h.pvcExists(3) {
		t.Fatal("claim of the removed node kept with policy Delete")
	}

	// The brokers keep the removed node's record (draining, out of Raft, owning nothing) until
	// their member GC; the new pod over its ordinal has not joined yet. The removal is over:
	// the StatefulSet stays grown (a real cluster showed it shrinking again, over and over).
	h.syncPods()
	for range 3 {
		if replicas, _, _ := h.step(); replicas != 4 {
			t.Fatalf("replicas = %d with the removed node's leftover record, want 4", replicas)
		}
	}
	if n := h.events.count(eventNodeRemoved); n != 1 {
		t.Fatalf("node removed %d times, want once", n)
	}
	// The new pod joins: the drain flag of its old record is cancelled.
	h.updateMember(3, func(m *client.Member) { m.RaftRole = "nonvoter" })
	if replicas, _, _ := h.step(); replicas != 4 {
		t.Fatalf("replicas = %d once the new node joined, want 4", replicas)
	}
	if got := h.decommissionCalls("DELETE", false); !slices.Equal(got, []string{h.member(3)}) {
		t.Fatalf("cancels %v, want [%s]", got, h.member(3))
	}
}

func TestScaleDownOfDeadNodeIsNodeDead(t *testing.T) {
	const name = "scale-dead"
	members := scaleMembers(name, 4, 2)
	members[3].Status = client.StatusDead
	h := newScaleHarness(t, name, 3, naradv1.PVCRetentionDelete, members)
	for range 3 {
		replicas, _, st := h.step()
		if replicas != 4 {
			t.Fatalf("replicas = %d with a dead node, want 4", replicas)
		}
		wantScaleCondition(t, st, naradv1.ConditionDegraded, metav1.ConditionTrue, degradedNodeDead)
	}
	if got := h.decommissionCalls("POST", false); len(got) != 0 {
		t.Fatalf("decommission POSTs %v for a dead node", got)
	}
	if h.events.count(eventNodeDead) != 1 {
		t.Fatalf("NodeDead events %d, want 1", h.events.count(eventNodeDead))
	}
	// Dead while draining: still held.
	h.updateMember(3, func(m *client.Member) { m.Draining = true })
	if replicas, _, st := h.step(); replicas != 4 || scaleCondition(t, st, naradv1.ConditionDegraded).Reason != degradedNodeDead {
		t.Fatalf("replicas %d / Degraded %+v for a dead draining node", replicas, scaleCondition(t, st, naradv1.ConditionDegraded))
	}
	// The node came back and finished: removed, and Degraded clears.
	h.updateMember(3, func(m *client.Member) { m.Status = client.StatusDraining })
	h.drainAll()
	replicas, _, st := h.step()
	if replicas != 3 {
		t.Fatalf("replicas = %d, want 3", replicas)
	}
	wantScaleCondition(t, st, naradv1.ConditionDegraded, metav1.ConditionFalse, degradedAsExpected)
}

func TestScaleDownWithBrokersUnreachableHolds(t *testing.T) {
	const name = "scale-unreach"
	h := newScaleHarness(t, name, 3, naradv1.PVCRetentionDelete, scaleMembers(name, 4, 2))
	replicas, requeue, st := h.stepWith(&observation{Err: fmt.Errorf("%w: connection refused", brokers.ErrNoBroker)})
	if replicas != 4 || requeue != unreachablePoll {
		t.Fatalf("scale = %d, %v; want 4, %v", replicas, requeue, unreachablePoll)
	}
	c := wantScaleCondition(t, st, naradv1.ConditionDegraded, metav1.ConditionTrue, degradedBrokersUnreachable)
	if !strings.Contains(c.Message, "connection refused") {
		t.Fatalf("message %q", c.Message)
	}
	// A scale-up needs no broker: it goes on.
	h.setSpecReplicas(5)
	replicas, _, st = h.stepWith(&observation{Err: brokers.ErrNoBroker})
	if replicas != 5 {
		t.Fatalf("replicas = %d, want 5", replicas)
	}
	wantScaleCondition(t, st, naradv1.ConditionDegraded, metav1.ConditionFalse, degradedAsExpected)
}

// TestScaleDownOfANodeThatNeverJoined: its pod exists but it is no member: nothing to drain.
func TestScaleDownOfANodeThatNeverJoined(t *testing.T) {
	const name = "scale-nojoin"
	h := newScaleHarness(t, name, 3, naradv1.PVCRetentionDelete, scaleMembers(name, 4, 2))
	h.fake.Update(func(c *brokertest.Cluster) { c.Members = c.Members[:3] })
	if replicas, _, _ := h.step(); replicas != 3 {
		t.Fatalf("replicas = %d, want 3", replicas)
	}
	if got := h.decommissionCalls("POST", true); len(got) != 0 {
		t.Fatalf("dry runs %v for a non-member", got)
	}
}
